"""Sharded TFRecord files written atomically, the parse spec of the records (`data_gen.records`), the metadata."""

from __future__ import annotations

import hashlib
import json
import os

import tensorflow as tf

METADATA_NAME = "metadata.json"


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The `tf.io.parse_single_example` spec of one record."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ShardWriter:
    """Writes records round-robin by window into shard files under temporary names; `close()` renames them.

    A run that dies leaves only `*.tmp` files, never a shard that looks complete.
    """

    def __init__(self, paths: list[str], gzip: bool = False):
        self.paths = list(paths)
        for path in self.paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
        self._tmp = [f"{path}.tmp" for path in self.paths]
        self._writers = [tf.io.TFRecordWriter(tmp, options) for tmp in self._tmp]
        self.counts = [0] * len(self.paths)

    def write_window(self, window_index: int, records: list[bytes]) -> None:
        shard = window_index % len(self.paths)
        for record in records:
            self._writers[shard].write(record)
        self.counts[shard] += len(records)

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        for tmp, path in zip(self._tmp, self.paths):
            os.replace(tmp, path)

    def abort(self) -> None:
        for writer, tmp in zip(self._writers, self._tmp):
            writer.close()
            if os.path.exists(tmp):
                os.remove(tmp)


def write_metadata(path: str, metadata: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
