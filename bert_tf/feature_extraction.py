"""Feature-based BERT (paper section 5.3): contextual token vectors from chosen layers, and the paper's ways of
combining layers for a downstream model of your own.

`extract` writes what the original extract_features.py writes: one JSON object per input line,
`{"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]}, ...]}, ...]}`,
for the real tokens (`[CLS] A [SEP] (B [SEP])`), values rounded to 6 decimals.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from bert_tf import staging
from bert_tf.tasks.base import DataError, open_text

VARIANTS = ("last_hidden", "second_to_last_hidden", "sum_last_four", "concat_last_four", "sum_all")


def combine_layers(encoder_outputs, variant: str):
    """The paper's feature-based variants (Table 7) from the list of every layer's output [batch, seq, H]:
    the last or second-to-last hidden layer, the sum or concatenation of the last four, the sum of all layers."""
    if variant == "last_hidden":
        return encoder_outputs[-1]
    if variant == "second_to_last_hidden":
        return encoder_outputs[-2]
    if variant == "sum_last_four":
        return tf.add_n(list(encoder_outputs[-4:]))
    if variant == "concat_last_four":
        return tf.concat(list(encoder_outputs[-4:]), axis=-1)
    if variant == "sum_all":
        return tf.add_n(list(encoder_outputs))
    raise ValueError(f"variant={variant!r}: choose one of {', '.join(VARIANTS)}")


def read_lines(path: str) -> list[tuple[str, str | None]]:
    """`text` or `text_a ||| text_b` per line (the original's input format); blank lines are skipped."""
    try:
        with open_text(path) as f:
            lines = [line.strip() for line in f]
    except FileNotFoundError:
        raise DataError(f"--input_file={path}: not found") from None
    pairs = []
    for line in lines:
        if not line:
            continue
        a, _, b = line.partition(" ||| ")
        pairs.append((a, b if _ else None))
    if not pairs:
        raise DataError(f"--input_file={path}: no text")
    return pairs


def extract(encoder, tokenizer, pairs, output_file: str, layers=(-1, -2, -3, -4), max_seq_length: int = 128,
            batch_size: int = 32) -> int:
    """Runs `encoder` over the lines and writes the JSONL file (atomically); returns the number of lines."""
    from bert_tf.tokenization import pack_inputs

    num_layers = encoder.bert_config.num_hidden_layers
    for layer in layers:
        if not -num_layers <= layer < num_layers:
            raise ValueError(f"--layers: {layer} is not a layer of a {num_layers}-layer model")
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
    with staging.atomic_write(output_file) as out:
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start:start + batch_size]
            packed = [pack_inputs(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(a)),
                                  None if b is None else tokenizer.convert_tokens_to_ids(tokenizer.tokenize(b)),
                                  max_seq_length, vocab=tokenizer.vocab) for a, b in batch]
            arrays = {key: np.array([row[key] for row in packed], np.int32) for key in packed[0]}
            tokens = [tokenizer.convert_ids_to_tokens(row["input_word_ids"][:sum(row["input_mask"])])
                      for row in packed]
            outputs = encoder(arrays)["encoder_outputs"]
            chosen = {layer: outputs[layer].numpy() for layer in layers}
            for offset, row in enumerate(tokens):
                features = [{"token": token, "layers": [
                    {"index": layer, "values": [round(float(v), 6) for v in chosen[layer][offset, position]]}
                    for layer in layers]} for position, token in enumerate(row)]
                out.write(json.dumps({"linex_index": start + offset, "features": features}) + "\n")
    return len(pairs)
