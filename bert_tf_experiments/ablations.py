"""Table 5 at small scale, from the command line (`bert_tf_experiments.table5` says what it runs):

  python -m bert_tf_experiments.ablations [--output_dir=runs/ablations] [--input_file=my_corpus.txt]
      [--rows=bert,no_nsp,ltr,ltr_bilstm] [the quickstart's size flags] [--force]
"""

from absl import flags

from bert_tf_experiments.table5 import ROWS
from bert_tf_quickstart import options

options.define_flags("runs/ablations")
flags.adopt_module_key_flags(options)  # list them in --help, as this command's own
flags.DEFINE_list("rows", list(ROWS), f"Rows of Table 5 to run, some of: {', '.join(ROWS)}.")


def main(f):
    from bert_tf_experiments.table5 import run_ablations

    run_ablations(f.output_dir, options.from_flags(f), f.input_file, f.force, tuple(f.rows))


def run():
    options.start_command("bert_tf_experiments.ablations", main)


if __name__ == "__main__":
    run()
