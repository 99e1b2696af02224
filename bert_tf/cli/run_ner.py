"""Fine-tune BERT for named-entity recognition on CoNLL-2003-style files (paper section 5.3).

  run_ner --data_dir=conll2003 --vocab_file=cased_L-12_H-768_A-12/vocab.txt --nodo_lower_case \
      --bert_config_file=cased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=runs/ner

--data_dir holds train.txt, valid.txt and test.txt (`word ... tag` per line, blank line between sentences).
"""

from absl import app, flags

from bert_tf.cli import USER_ERRORS, define_distribution_flags, fail, strategy_from_flags

flags.DEFINE_string("data_dir", None, "Directory with train.txt, valid.txt, test.txt; with --tfds_name: TFDS "
                    "data_dir.")
flags.DEFINE_string("tfds_name", None, "Read a prepared TFDS dataset instead, e.g. conll2003.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with.")
flags.DEFINE_string("output_dir", None, "Where the model, eval results and predictions are written.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained weights: original TF1 checkpoint, HF directory or ours.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models; use --nodo_lower_case for cased).")
flags.DEFINE_integer("max_seq_length", 128, "Window length in word pieces; longer sentences are split.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on valid.txt.")
flags.DEFINE_bool("do_predict", False, "Whether to tag test.txt.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
flags.DEFINE_list("learning_rate", ["5e-5"], "Peak learning rate, or a comma list to choose from on valid.txt.")
flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps with linear warmup.")
flags.DEFINE_integer("num_restarts", 1, "Restarts per learning rate, best kept on valid.txt.")
flags.DEFINE_bool("label_all_subtokens", False, "Train every word piece on its word's tag (default: first piece).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the head's initialisation, dropout and data order.")
define_distribution_flags()
flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import NerOptions, run_ner
    from bert_tf.tasks import DataError

    try:
        strategy = strategy_from_flags(f)
        options = NerOptions(
            do_train=f.do_train, do_eval=f.do_eval, do_predict=f.do_predict, max_seq_length=f.max_seq_length,
            do_lower_case=f.do_lower_case, train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
            learning_rates=tuple(float(r) for r in f.learning_rate), num_train_epochs=f.num_train_epochs,
            warmup_proportion=f.warmup_proportion, num_restarts=f.num_restarts, random_seed=f.random_seed,
            init_checkpoint=f.init_checkpoint, label_all_subtokens=f.label_all_subtokens)
        results = run_ner(BertConfig.from_json_file(f.bert_config_file), f.vocab_file, f.output_dir, options,
                          f.data_dir, strategy, tfds_name=f.tfds_name)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail("run_ner", e)
    for key in ("dev", "test"):
        if key in results:
            print(f"run_ner: {key}: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(results[key].items())))


def run():
    app.run(main)


if __name__ == "__main__":
    run()
