"""The main job: from raw text to a served answer in one command, on a built-in corpus (no downloads).

  python -m bert_tf_quickstart [--output_dir=runs/quickstart] [--input_file=my_corpus.txt] [--force]

Builds a vocabulary, pretraining records, pretrains a small BERT, fine-tunes it on a task derived from the corpus,
exports SavedModels and asks them questions from a fresh process; writes plots and `report.md`. See
`bert_tf_quickstart.pipeline` for the stages. Re-running in the same --output_dir reuses each stage whose inputs (the
corpus's content, the flags that change its output, the stages before it) are unchanged and redoes the others,
saying why; `--force` redoes them all.
"""

import dataclasses

from absl import flags

from bert_tf_quickstart.options import QuickstartOptions

flags.DEFINE_string("output_dir", "runs/quickstart", "Where every stage writes its outputs.")
flags.DEFINE_string("input_file", None, "Your corpus instead of the built-in one: one sentence per line, a blank line "
                    "between documents; every 20th document is held out for the figures and the demo questions.")
flags.DEFINE_bool("force", False, "Redo every stage, even those complete for the same inputs.")
for _field in dataclasses.fields(QuickstartOptions):
    _define = {int: flags.DEFINE_integer, float: flags.DEFINE_float}[type(_field.default)]
    _define(_field.name, _field.default, _field.metadata["help"])


def main(argv):
    del argv
    f = flags.FLAGS
    from absl import logging

    from bert_tf.cli import USER_ERRORS, fail

    if not f["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # the stages show progress bars and one-line summaries instead
    from bert_tf_quickstart.pipeline import run_quickstart

    options = QuickstartOptions(**{field.name: getattr(f, field.name)
                                   for field in dataclasses.fields(QuickstartOptions)})
    if f.input_file and f["corpus_mb"].present:
        fail(f"--corpus_mb sizes the built-in corpus; with --input_file={f.input_file} the whole file is used: "
             "drop --corpus_mb")
    try:
        run_quickstart(f.output_dir, options, input_file=f.input_file, force=f.force)
    except USER_ERRORS + (ValueError,) as e:
        fail(e)


def run():
    from bert_tf.cli import DIRECTORY, start

    start(main, "bert_tf_quickstart", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
