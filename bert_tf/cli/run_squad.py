"""Fine-tune BERT for SQuAD v1.1 / v2.0 (paper sections 4.2, 4.3) with the original run_squad.py's flags.

  run_squad --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --do_train --train_file=train-v1.1.json \
      --do_predict --predict_file=dev-v1.1.json --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=2 \
      --max_seq_length=384 --doc_stride=128 --output_dir=runs/squad [--version_2_with_negative]

With SQuAD 2.0 and answers in --predict_file, the no-answer threshold is searched there and saved with the model
(task.json) unless --null_score_diff_threshold is given.
"""

from absl import app, flags

from bert_tf.cli import USER_ERRORS, define_distribution_flags, fail, strategy_from_flags

flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with.")
flags.DEFINE_string("output_dir", None, "Where the model and the predictions are written.")
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_string("tfds_name", None, "Read a prepared TFDS SQuAD instead of the files: squad/v1.1 or squad/v2.0 "
                    "(train and validation splits).")
flags.DEFINE_string("data_dir", None, "TFDS data_dir for --tfds_name.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained weights: original TF1 checkpoint, HF directory or ours.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 384, "Maximum total length of a window after WordPiece tokenization.")
flags.DEFINE_integer("doc_stride", 128, "Stride between context windows.")
flags.DEFINE_integer("max_query_length", 64, "Maximum question length in word pieces.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune.")
flags.DEFINE_bool("do_predict", False, "Whether to predict on --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_list("learning_rate", ["5e-5"], "Peak learning rate, or a comma list to choose from on the predict "
                  "file's answers.")
flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps with linear warmup.")
flags.DEFINE_integer("num_restarts", 1, "Restarts per learning rate, best kept.")
flags.DEFINE_integer("n_best_size", 20, "Candidates per question kept in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer in word pieces.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_float("null_score_diff_threshold", None, "SQuAD 2.0: answer nothing when null - best > this "
                   "(default: searched on the predict file, or the model's saved value).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the head's initialisation, dropout and data order.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Original flag, accepted (the model is saved at the end).")
define_distribution_flags()
flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import SquadOptions, run_squad
    from bert_tf.tasks import DataError

    try:
        strategy = strategy_from_flags(f)
        options = SquadOptions(
            do_train=f.do_train, do_predict=f.do_predict, max_seq_length=f.max_seq_length, doc_stride=f.doc_stride,
            max_query_length=f.max_query_length, do_lower_case=f.do_lower_case, train_batch_size=f.train_batch_size,
            predict_batch_size=f.predict_batch_size, learning_rates=tuple(float(r) for r in f.learning_rate),
            num_train_epochs=f.num_train_epochs, warmup_proportion=f.warmup_proportion,
            num_restarts=f.num_restarts, n_best_size=f.n_best_size, max_answer_length=f.max_answer_length,
            version_2_with_negative=f.version_2_with_negative,
            null_score_diff_threshold=f.null_score_diff_threshold, random_seed=f.random_seed,
            init_checkpoint=f.init_checkpoint)
        config = BertConfig.from_json_file(f.bert_config_file)
        results = run_squad(config, f.vocab_file, f.output_dir, options, f.train_file, f.predict_file, strategy,
                            tfds_name=f.tfds_name, tfds_data_dir=f.data_dir)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail("run_squad", e)
    if results.get("predict"):
        print("run_squad: " + ", ".join(f"{k} {v:.4g}" for k, v in sorted(results["predict"].items())))


def run():
    app.run(main)


if __name__ == "__main__":
    run()
