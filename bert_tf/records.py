"""The pretraining record schema and the metadata file beside the records: the one definition that the generator
(`data_gen`) writes and the reader (`bert_tf.pretraining`) checks.

A record is one `tf.train.Example` with the original schema (google-research/bert's create_pretraining_data.py
writes it and its run_pretraining.py reads it, so records go both ways): `input_ids`, `input_mask`, `segment_ids`
int64[max_seq_length]; `masked_lm_positions`, `masked_lm_ids` int64[max_predictions_per_seq]; `masked_lm_weights`
float32[max_predictions_per_seq]; `next_sentence_labels` int64[1] (1 = segment B is a random sentence).

`data_gen` writes `metadata.json` beside the shards: `flags` (the generation flags, `max_seq_length` and
`max_predictions_per_seq` among them), `vocab_file` and `vocab_sha256` (the vocabulary's identity), and `shards`
(one `{"path": file name, "instances": n}` per shard: exactly the run's record set, so that a reader refuses any
other file beside them), plus statistics. Records without it (the original generator's) are checked by their
first record alone.
"""

from __future__ import annotations

import hashlib
import json
import os

import tensorflow as tf

# name -> (dtype, length: the generation flag that sets it, or a fixed number), in the order the generator encodes
# them. Plain tuples in a dict: data_gen's workers receive it pickled and must not import bert_tf (TensorFlow).
FEATURES = {
    "input_ids": ("int64", "max_seq_length"),
    "input_mask": ("int64", "max_seq_length"),
    "segment_ids": ("int64", "max_seq_length"),
    "masked_lm_positions": ("int64", "max_predictions_per_seq"),
    "masked_lm_ids": ("int64", "max_predictions_per_seq"),
    "next_sentence_labels": ("int64", 1),
    "masked_lm_weights": ("float32", "max_predictions_per_seq"),
}
METADATA_NAME = "metadata.json"


class DataError(ValueError):
    """Pretraining records that do not fit the flags, or cannot be found or read."""


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The `tf.io.parse_example` spec of one record."""
    lengths = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    return {name: tf.io.FixedLenFeature([lengths.get(length, length)], tf.as_dtype(dtype))
            for name, (dtype, length) in FEATURES.items()}


def record_lengths(example: tf.train.Example) -> dict[str, int]:
    """The generation flags a parsed record's lengths show: {"max_seq_length": n, "max_predictions_per_seq": m};
    a missing feature is a `DataError` (not a pretraining record)."""
    features = example.features.feature
    first = {}  # flag -> the first feature whose length it sets, and its dtype
    for name, (dtype, length) in FEATURES.items():
        if isinstance(length, str):
            first.setdefault(length, (name, dtype))
    missing = [name for name, _ in first.values() if name not in features]
    if missing:
        raise DataError(f"not pretraining records (no {', '.join(missing)} feature); create them with "
                        "create_pretraining_data")
    values = lambda name, dtype: (features[name].float_list if dtype == "float32"  # noqa: E731
                                  else features[name].int64_list).value
    return {flag: len(values(name, dtype)) for flag, (name, dtype) in first.items()}


def file_sha256(path: str) -> str:
    """Hex SHA-256 of a file (the vocabulary's identity in the metadata)."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_metadata(path: str) -> dict:
    """The contents of a metadata file; one that is not a JSON object is a `DataError` naming it."""
    with tf.io.gfile.GFile(path) as f:
        try:
            metadata = json.load(f)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: not valid JSON ({e}); regenerate the data or delete the file") from None
    if not isinstance(metadata, dict):
        raise DataError(f"{path}: not a metadata object; regenerate the data or delete the file")
    return metadata


def listed_shards(path: str) -> set[str] | None:
    """The shard file names a metadata file lists, or None when it lists none (not written by data_gen)."""
    shards = load_metadata(path).get("shards")
    if not isinstance(shards, list):
        return None
    names = {s["path"] for s in shards if isinstance(s, dict) and isinstance(s.get("path"), str)
             and s["path"] == os.path.basename(s["path"]) and s["path"] not in ("", ".", "..", METADATA_NAME)}
    return names or None


def read_metadata(directory: str) -> tuple[str, dict] | None:
    """(path, contents) of the metadata file in a directory of shards, or None (e.g. the original generator's
    records)."""
    path = os.path.join(directory, METADATA_NAME)
    if tf.io.gfile.exists(path):
        return path, load_metadata(path)
    return None
