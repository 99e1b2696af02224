"""The main job: from raw text to a served answer in one command, on a built-in corpus (no downloads).

  python -m bert_tf_quickstart [--output_dir=runs/quickstart] [--input_file=my_corpus.txt] [--force]

Builds a vocabulary, pretraining records, pretrains a small BERT, fine-tunes it on a task derived from the corpus,
exports SavedModels and asks them questions from a fresh process; writes plots and `report.md`. See
`bert_tf_quickstart.pipeline` for the stages. Re-running in the same --output_dir reuses each stage whose inputs (the
corpus's content, the flags that change its output, the stages before it) are unchanged and redoes the others,
saying why; `--force` redoes them all.
"""

from absl import flags

from bert_tf_quickstart import options

options.define_flags("runs/quickstart")
flags.adopt_module_key_flags(options)  # list them in --help, as this command's own


def main(f):
    from bert_tf_quickstart.pipeline import run_quickstart

    run_quickstart(f.output_dir, options.from_flags(f), input_file=f.input_file, force=f.force)


def run():
    options.start_command("bert_tf_quickstart", main)


if __name__ == "__main__":
    run()
