"""Sharded TFRecord files written atomically, and the metadata file (its name, the record spec and the vocabulary
hash are the reader's, `bert_tf.pretraining`: one definition for both sides)."""

from __future__ import annotations

import json
import os

from bert_tf.pretraining import METADATA_NAME, feature_spec, file_sha256  # noqa: F401 (the reader's contract)
from data_gen.appender import WindowAppender


class ShardWriter:
    """Shard files under temporary names, which windows are appended to by its `appender` (from the worker that
    built each window, `appender.WindowAppender`); `close()` renames them, `abort()` removes them.

    A run that dies leaves only `*.tmp` files, never a shard that looks complete. Call `abort()` only once no
    process appends any more (`generate` fails the appender and shuts its workers down first).
    """

    def __init__(self, paths: list[str], gzip: bool = False):
        self.paths = list(paths)
        for path in self.paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._tmp = [f"{path}.tmp" for path in self.paths]
        for tmp in self._tmp:
            open(tmp, "wb").close()  # empty, so that a re-run after a kill starts its shards afresh
        self.appender = WindowAppender(self._tmp, gzip=gzip)
        self.counts = [0] * len(self.paths)

    def count(self, window_index: int, instances: int) -> None:
        """Window `window_index` was appended with `instances` records."""
        self.counts[window_index % len(self.paths)] += instances

    def close(self) -> None:
        for tmp, path in zip(self._tmp, self.paths):
            os.replace(tmp, path)

    def abort(self) -> None:
        for tmp in self._tmp:
            if os.path.exists(tmp):
                os.remove(tmp)


def write_metadata(path: str, metadata: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
