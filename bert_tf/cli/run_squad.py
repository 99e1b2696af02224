r"""Fine-tune BERT for SQuAD v1.1 / v2.0 (paper sections 4.2, 4.3) with the original run_squad.py's flags.

  run_squad --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --do_train --train_file=train-v1.1.json \
      --do_predict --predict_file=dev-v1.1.json --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=2 \
      --max_seq_length=384 --doc_stride=128 --output_dir=runs/squad [--version_2_with_negative]

With SQuAD 2.0 and answers in --predict_file, the no-answer threshold is searched there and saved with the model
(task.json) unless --null_score_diff_threshold is given.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import (DIRECTORY, USER_ERRORS, define_finetuning_flags, fail, options_from_flags, print_best,
                         start, strategy_from_flags)

flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_string("tfds_name", None, "Read a prepared TFDS SQuAD instead of the files: squad/v1.1 or squad/v2.0 "
                    "(train and validation splits).")
flags.DEFINE_string("data_dir", None, "TFDS data_dir for --tfds_name.")
flags.DEFINE_integer("doc_stride", 128, "Stride between context windows.")
flags.DEFINE_integer("max_query_length", 64, "Maximum question length in word pieces.")
flags.DEFINE_integer("n_best_size", 20, "Candidates per question kept in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer in word pieces.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_bool("bilstm_head", False, "Put a randomly initialised BiLSTM between the encoder and the span head "
                  "(the paper's '+ BiLSTM' ablation, Table 5, for a left-to-right model).")
flags.DEFINE_float("null_score_diff_threshold", None, "SQuAD 2.0: answer nothing when null - best > this "
                   "(default: searched on the predict file, or the model's saved value).")
define_finetuning_flags(max_seq_length=384, dev="the predict file's answers", evaluates=False, dropout_rate=0.0)
flags.adopt_module_key_flags(cli)  # list the shared flags in --helpshort too

def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.tasks.span_qa import SquadOptions, run_squad
    from bert_tf.tasks import DataError

    try:
        if f.data_dir and not f.tfds_name:
            raise ValueError(f"--data_dir={f.data_dir} is the TFDS data_dir of --tfds_name, which is not given: give "
                             "the SQuAD files with --train_file / --predict_file, or add --tfds_name")
        strategy = strategy_from_flags(f)
        options = options_from_flags(f, SquadOptions)
        config = BertConfig.from_json_file(f.bert_config_file)
        results = run_squad(config, f.vocab_file, f.output_dir, options, f.train_file, f.predict_file, strategy,
                            tfds_name=f.tfds_name, tfds_data_dir=f.data_dir)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail(e)
    if results.get("predict"):
        print("run_squad: " + ", ".join(f"{k} {v:.4g}" for k, v in sorted(results["predict"].items())))
    print_best(results)


def run():
    start(main, "run_squad", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
