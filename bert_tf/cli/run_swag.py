r"""Fine-tune BERT on SWAG (paper section 4.4): run_classifier with --task_name=swag and the same flags.

  run_swag --data_dir=swagaf/data --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --do_train --do_eval --train_batch_size=16 --learning_rate=2e-5 \
      --num_train_epochs=3 --max_seq_length=128 --output_dir=runs/swag

--data_dir holds SWAG's train.csv, val.csv and test.csv.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import DIRECTORY, run_classifier, start

flags.adopt_module_key_flags(cli)  # --helpshort lists the flags run_swag takes
flags.adopt_module_key_flags(run_classifier)


def run():
    flags.FLAGS.set_default("task_name", "swag")
    start(run_classifier.main, "run_swag", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
