"""Fine-tune BERT on a GLUE task (paper section 4.1) with the original run_classifier.py's flags.

  run_classifier --task_name=MRPC --data_dir=glue/MRPC --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5,3e-5,2e-5 --num_train_epochs=3 \
      --output_dir=runs/mrpc

Data: the GLUE TSV files in --data_dir, or --tfds_name=glue/mrpc (already prepared TFDS data). Several
--learning_rate values (and --num_restarts) train one model each and keep the best on dev.
"""

from absl import app, flags

from bert_tf.cli import USER_ERRORS, define_distribution_flags, fail, strategy_from_flags

flags.DEFINE_string("task_name", None, "The task: cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli.")
flags.DEFINE_string("data_dir", None, "Directory with the task's files (GLUE TSVs); with --tfds_name: TFDS data_dir.")
flags.DEFINE_string("tfds_name", None, "Read the task from TFDS instead, e.g. glue/mrpc (must be prepared).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with.")
flags.DEFINE_string("output_dir", None, "Where the fine-tuned model, eval results and predictions are written.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained weights: an original TF1 checkpoint, an HF directory or "
                    "one of ours.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total length after WordPiece tokenization.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on dev (writes eval_results.txt).")
flags.DEFINE_bool("do_predict", False, "Whether to predict on test (test_results.tsv and GLUE submission files).")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_list("learning_rate", ["5e-5"], "Peak learning rate, or a comma list to choose from on dev.")
flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps with linear warmup.")
flags.DEFINE_integer("num_restarts", 1, "Restarts per learning rate (different seeds), best kept on dev.")
flags.DEFINE_float("dropout_rate", 0.1, "Dropout on the pooled output.")
flags.DEFINE_integer("random_seed", 12345, "Seed of the head's initialisation, dropout and data order.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Original flag, accepted (the best model is saved at the "
                     "end).")
define_distribution_flags()
flags.mark_flags_as_required(["task_name", "bert_config_file", "vocab_file", "output_dir"])


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import FinetuneOptions, run_classifier
    from bert_tf.tasks import DataError, get_task

    try:
        strategy = strategy_from_flags(f)
        rates = tuple(float(r) for r in f.learning_rate)
        options = FinetuneOptions(
            do_train=f.do_train, do_eval=f.do_eval, do_predict=f.do_predict, max_seq_length=f.max_seq_length,
            do_lower_case=f.do_lower_case, train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
            predict_batch_size=f.predict_batch_size, learning_rates=rates, num_train_epochs=f.num_train_epochs,
            warmup_proportion=f.warmup_proportion, num_restarts=f.num_restarts, dropout_rate=f.dropout_rate,
            random_seed=f.random_seed, init_checkpoint=f.init_checkpoint)
        task = get_task(f.task_name)
        config = BertConfig.from_json_file(f.bert_config_file)
        results = run_classifier(task, config, f.vocab_file, f.output_dir, options, data_dir=f.data_dir,
                                 tfds_name=f.tfds_name, strategy=strategy)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail("run_classifier", e)
    for key, value in results.items():
        if key != "grid":
            print(f"run_classifier: {task.name} {key}: {value}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
