"""The quickstart's sizes: one frozen dataclass whose fields are also the flags of `bert_tf_quickstart`, so a run
from Python and one from the command line take the same settings."""

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
    finetune_examples: int = _option(4000, "word_order training examples made from the corpus (half of them "
                                           "shuffled); the held-out ones are an eighth of this, at least 200.")
    finetune_epochs: float = _option(3.0, "Passes over the word_order examples when fine-tuning (batch size 32).")
    finetune_learning_rate: float = _option(3e-4, "Peak fine-tuning learning rate.")
    random_seed: int = _option(12345, "Seed of the masking, the word_order examples, initialisation, dropout and "
                                      "data order.")
    num_workers: int = _option(2, "Processes that write the pretraining records (the records do not depend on "
                                  "it).")
