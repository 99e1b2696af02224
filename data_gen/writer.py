"""Sharded TFRecord files written atomically, and the metadata file (its name, the record spec and the vocabulary
hash are the reader's, `bert_tf.pretraining`: one definition for both sides)."""

from __future__ import annotations

import json
import os

import tensorflow as tf

from bert_tf.pretraining import METADATA_NAME, feature_spec, file_sha256  # noqa: F401 (the reader's contract)

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
