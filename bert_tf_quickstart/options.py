"""The quickstart's sizes: one frozen dataclass whose fields are also the flags of `bert_tf_quickstart` (and of the
experiment drivers built on it), so a run from Python and one from the command line take the same settings; and
the command-line frame those commands share."""

from __future__ import annotations

import dataclasses


def _option(default, help: str):
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class QuickstartOptions:
    """Sizes of every stage; the defaults fit 2 CPU cores and about ten minutes. Each field's `help` is its flag's
    help in `bert_tf_quickstart`."""

    corpus_mb: float = _option(2.0, "Megabytes of the built-in corpus to use (the standard library has about 1.5 MB "
                                    "of docstrings: more takes them all); not with --input_file.")
    vocab_size: int = _option(8000, "Most word pieces in the vocabulary learned from the corpus (special tokens "
                                    "included).")
    max_seq_length: int = _option(64, "Word pieces per pretraining and fine-tuning sequence.")
    max_predictions_per_seq: int = _option(10, "Masked positions per pretraining sequence (15 % of the tokens, up "
                                               "to this many).")
    dupe_factor: int = _option(3, "Times each training document is used to make pretraining instances, each time "
                                  "with other masks.")
    hidden_size: int = _option(128, "Width of the model (BERT-Base: 768); the feed-forward layer is 4 times it.")
    num_hidden_layers: int = _option(2, "Transformer layers of the model (BERT-Base: 12).")
    num_attention_heads: int = _option(2, "Attention heads per layer; must divide --hidden_size.")
    train_batch_size: int = _option(64, "Pretraining batch size (sequences per step).")
    num_train_steps: int = _option(1500, "Pretraining steps (the first 5 % warm up the learning rate).")
    learning_rate: float = _option(5e-4, "Peak pretraining learning rate, for the original optimizer (no bias "
                                         "correction: larger early steps than AdamW).")
    finetune_examples: int = _option(4000, "Fine-tuning examples made from the corpus (word_order: half of them "
                                           "shuffled); the held-out ones are an eighth of this, at least 200.")
    finetune_epochs: float = _option(3.0, "Passes over the fine-tuning examples (batch size 32).")
    finetune_learning_rate: float = _option(3e-4, "Peak fine-tuning learning rate.")
    random_seed: int = _option(12345, "Seed of the masking, the word_order examples, initialisation, dropout and "
                                      "data order.")
    num_workers: int = _option(2, "Processes that write the pretraining records (the records do not depend on "
                                  "it).")


def define_flags(output_dir: str, exclude: tuple[str, ...] = ()) -> None:
    """The flags of the quickstart and of the experiments built on it: --output_dir (default `output_dir`),
    --input_file, --force, and one flag for each field of QuickstartOptions but `exclude`, with its default and
    help."""
    from absl import flags

    flags.DEFINE_string("output_dir", output_dir, "Where every stage writes its outputs.")
    flags.DEFINE_string("input_file", None, "Your corpus instead of the built-in one: one sentence per line, a blank "
                        "line between documents; every 20th document is held out for the figures and the questions.")
    flags.DEFINE_bool("force", False, "Redo every stage, even those complete for the same inputs.")
    for field in dataclasses.fields(QuickstartOptions):
        if field.name not in exclude:
            {int: flags.DEFINE_integer, float: flags.DEFINE_float}[type(field.default)](
                field.name, field.default, field.metadata["help"])


def from_flags(values, **fixed) -> QuickstartOptions:
    """QuickstartOptions from the flags `define_flags` defined (absl's FLAGS), with `fixed` for the fields it left
    out; ValueError for --corpus_mb with --input_file (it sizes the built-in corpus only)."""
    if values.input_file and values["corpus_mb"].present:
        raise ValueError(f"--corpus_mb sizes the built-in corpus; with --input_file={values.input_file} the whole "
                         "file is used: drop --corpus_mb")
    return QuickstartOptions(**{field.name: fixed[field.name] if field.name in fixed else getattr(values, field.name)
                                for field in dataclasses.fields(QuickstartOptions)})


def start_command(name: str, work) -> None:
    """Runs the command `name` (the quickstart, an experiment driver): its output directory checked before any work,
    then `work(flag_values)` with absl's log at WARNING unless --verbosity is given (the stages show progress bars
    and one-line summaries instead), and a user's error (a bad value, a missing file) as one line."""
    from bert_tf.cli import DIRECTORY, USER_ERRORS, fail, start

    def main(argv):
        del argv
        from absl import flags, logging

        f = flags.FLAGS
        if not f["verbosity"].present:
            logging.set_verbosity(logging.WARNING)
        try:
            work(f)
        except USER_ERRORS + (ValueError,) as e:
            fail(e)

    start(main, name, {"output_dir": DIRECTORY})
