"""Feature-based BERT (paper section 5.3): contextual token vectors from chosen layers, the paper's ways of
combining layers for a downstream model of your own (`FeatureCombination`, a layer in
`bert_tf.layers.feature_combination`), and its NER probe on frozen features (`BertFeatureTagger`, in
`bert_tf.models`).

`extract` writes what the original extract_features.py writes: one JSON object per input line,
`{"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]}, ...]}, ...]}`,
for the real tokens (`[CLS] A [SEP] (B [SEP])`), values rounded to 6 decimals.
"""

from __future__ import annotations

import json
import weakref

import numpy as np

from bert_tf import staging
from bert_tf import fileio
from bert_tf.layers.feature_combination import COMBINATIONS, FeatureCombination  # noqa: F401  (the API's names)
from bert_tf.models import BertFeatureTagger  # noqa: F401
from bert_tf.tasks.base import DataError, open_text

def read_lines(path: str) -> list[tuple[str, str | None]]:
    """`text` or `text_a ||| text_b` per line, as the original reads them: every line is one example (a blank one
    an empty text, so that `linex_index` is the line's index), split at its last ` ||| `. A file without any text is
    refused."""
    try:
        with open_text(path) as f:
            lines = [line.strip() for line in f]
    except FileNotFoundError:
        raise DataError(f"--input_file={path}: not found") from None
    if not any(lines):
        raise DataError(f"--input_file={path}: no text")
    pairs = []
    for line in lines:
        a, separator, b = line.rpartition(" ||| ")
        pairs.append((a, b) if separator else (b, None))
    return pairs


LAYER_NUMBERINGS = ("original", "paper")


def hidden_states(outputs) -> list:
    """A `BertEncoder` output dict -> its L + 1 hidden states: the embedding output (layer 0), then layers 1..L."""
    return [outputs["embedding_output"], *outputs["encoder_outputs"]]


def hidden_state_index(layer: int, num_layers: int, numbering: str | None = None) -> int:
    """Where `--layers` number `layer` lies in `hidden_states`. Negative numbers count from the last layer in both
    numberings (-1 = the last, -L = the first Transformer layer, -(L + 1) = the embedding output). Non-negative
    ones differ: in the original extract_features.py 0 is the first Transformer layer, in the paper's numbering
    (`numbering="paper"`, as HF's hidden_states) 0 is the embedding output and 1..L the layers; without a
    numbering they are refused rather than guessed."""
    if layer < 0:
        if layer < -(num_layers + 1):
            raise ValueError(f"--layers: {layer} is not a layer of a {num_layers}-layer model (-1 is the last, "
                             f"{-(num_layers + 1)} the embedding output)")
        return num_layers + 1 + layer
    if numbering not in LAYER_NUMBERINGS:
        raise ValueError(f"--layers={layer}: a non-negative layer number is the first Transformer layer in the "
                         "original extract_features.py but the embedding output in the paper's numbering; say "
                         "which with --layer_numbering=original or --layer_numbering=paper, or use negative numbers "
                         f"(-1 = the last layer, {-(num_layers + 1)} = the embedding output)")
    top = num_layers - 1 if numbering == "original" else num_layers
    if layer > top:
        raise ValueError(f"--layers: {layer} is not a layer of a {num_layers}-layer model (numbered "
                         f"{'0' if numbering == 'original' else '1'}..{num_layers if numbering == 'paper' else top}"
                         f"{', 0 = the embedding output' if numbering == 'paper' else ''})")
    return layer + 1 if numbering == "original" else layer


def extract(encoder, tokenizer, pairs, output_file: str, layers=(-1, -2, -3, -4), max_seq_length: int = 128,
            batch_size: int = 32, layer_numbering: str | None = None) -> int:
    """Runs `encoder` over the lines and writes the JSONL file (atomically); returns the number of lines. `layers`
    are numbered as `hidden_state_index` says; each is written with the number it was given. The encoder runs as
    one traced graph (TensorFlow's fused CPU kernels apply there, not eagerly)."""
    from bert_tf.tokenization import pack_inputs

    num_layers = encoder.bert_config.num_hidden_layers
    where = {layer: hidden_state_index(layer, num_layers, layer_numbering) for layer in layers}
    forward = _traced_states(encoder)
    fileio.makedirs(fileio.dirname(fileio.absolute(output_file)))
    with staging.atomic_write(output_file) as out:
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start:start + batch_size]
            packed = [pack_inputs(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(a)),
                                  None if b is None else tokenizer.convert_tokens_to_ids(tokenizer.tokenize(b)),
                                  max_seq_length, vocab=tokenizer.vocab) for a, b in batch]
            arrays = {key: np.array([row[key] for row in packed], np.int32) for key in packed[0]}
            tokens = [tokenizer.convert_ids_to_tokens(row["input_word_ids"][:sum(row["input_mask"])])
                      for row in packed]
            states = forward(arrays)
            chosen = {layer: six_decimals(states[index].numpy()) for layer, index in where.items()}
            for offset, row in enumerate(tokens):
                features = [{"token": token, "layers": [
                    {"index": layer, "values": chosen[layer][offset, position].tolist()} for layer in layers]}
                    for position, token in enumerate(row)]
                out.write(json.dumps({"linex_index": start + offset, "features": features}) + "\n")
    return len(pairs)


_TRACED = weakref.WeakKeyDictionary()


def _traced_states(encoder):
    """`hidden_states(encoder(inputs))` as one `tf.function`, kept while the encoder lives, so that repeated
    `extract` calls share its traces (a shorter last batch traces once more, then any size runs)."""
    if encoder not in _TRACED:
        import tensorflow as tf

        held = weakref.ref(encoder)  # the cache's value must not keep its key alive
        _TRACED[encoder] = tf.function(lambda inputs: hidden_states(held()(inputs)), reduce_retracing=True,
                                       autograph=False)
    return _TRACED[encoder]


def six_decimals(values: np.ndarray) -> np.ndarray:
    """`round(float(v), 6)` of every value (what the original writes), as float64, vectorised.

    For float32 and 16-bit `v`, `v * 1e6` is exact in float64 (at most 24 + 14 significant bits), so NumPy's
    `rint(v * 1e6) / 1e6` rounds the exact value half to even and then divides with one correctly rounded
    operation: the double nearest the rounded decimal, which is what Python's `round` returns. Wider values, where
    the product may round first, go through Python's `round`."""
    if values.dtype.itemsize > 4:
        return np.array([round(float(v), 6) for v in values.ravel()], np.float64).reshape(values.shape)
    return np.round(values.astype(np.float64), 6)
