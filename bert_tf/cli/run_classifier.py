r"""Fine-tune BERT on a GLUE task (paper section 4.1) with the original run_classifier.py's flags.

  run_classifier --task_name=MRPC --data_dir=glue/MRPC --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5,3e-5,2e-5 --num_train_epochs=3 \
      --output_dir=runs/mrpc

Data: the GLUE TSV files in --data_dir, or --tfds_name=glue/mrpc (already prepared TFDS data). Several values of
--train_batch_size, --learning_rate and --num_train_epochs (and --num_restarts) train one model per combination and
keep the best on dev (grid_results.tsv). A rerun of the same command resumes from the last checkpoint.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import (DIRECTORY, USER_ERRORS, define_finetuning_flags, fail, options_from_flags, print_best,
                         program, start, strategy_from_flags)

flags.DEFINE_string("task_name", None, "The task: cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, xnli[-lang], "
                    "swag.")
flags.DEFINE_string("data_dir", None, "Directory with the task's files (GLUE TSVs); with --tfds_name: TFDS data_dir.")
flags.DEFINE_string("tfds_name", None, "Read the task from TFDS instead, e.g. glue/mrpc (must be prepared).")
define_finetuning_flags()
flags.mark_flags_as_required(["task_name"])
flags.adopt_module_key_flags(cli)  # list the shared flags in --helpshort too

def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.classification import run_classifier
    from bert_tf.tasks import DataError, get_task

    try:
        strategy = strategy_from_flags(f)
        options = options_from_flags(f, FinetuneOptions)
        task = get_task(f.task_name)
        if program() == "run_swag" and task is not get_task("swag"):
            fail(f"--task_name={f.task_name}: run_swag trains SWAG only; run_classifier trains the other tasks")
        config = BertConfig.from_json_file(f.bert_config_file)
        results = run_classifier(task, config, f.vocab_file, f.output_dir, options, data_dir=f.data_dir,
                                 tfds_name=f.tfds_name, strategy=strategy)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail(e)
    for key, value in results.items():
        if key not in ("grid", "best"):
            print(f"{program()}: {task.name} {key}: {value}")
    print_best(results)


def run():
    start(main, "run_classifier", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
