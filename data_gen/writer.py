"""Sharded TFRecord files written atomically, and the metadata file (its name, the record spec and the vocabulary
hash are the reader's, `bert_tf.pretraining`: one definition for both sides)."""

from __future__ import annotations

import gzip as gzip_lib
import json
import os

from bert_tf.pretraining import METADATA_NAME, feature_spec, file_sha256  # noqa: F401 (the reader's contract)


class ShardWriter:
    """Appends windows of TFRecord file bytes round-robin into shard files under temporary names; `close()` renames
    them. The workers frame the records (`records.Records.tfrecord_bytes`), so writing is one `write` per window.

    A run that dies leaves only `*.tmp` files, never a shard that looks complete. With `gzip`, each shard is one
    gzip stream at TF's default level, without a file name or time stamp in its header, so re-runs are byte-identical.
    """

    def __init__(self, paths: list[str], gzip: bool = False):
        self.paths = list(paths)
        for path in self.paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._tmp = [f"{path}.tmp" for path in self.paths]
        self._files = [open(tmp, "wb") for tmp in self._tmp]
        self._streams = [gzip_lib.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=f, mtime=0) if gzip else f
                         for f in self._files]
        self.counts = [0] * len(self.paths)

    def write_window(self, window_index: int, data: bytes, count: int) -> None:
        shard = window_index % len(self.paths)
        self._streams[shard].write(data)
        self.counts[shard] += count

    def close(self) -> None:
        self._close()
        for tmp, path in zip(self._tmp, self.paths):
            os.replace(tmp, path)

    def abort(self) -> None:
        self._close()
        for tmp in self._tmp:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _close(self) -> None:
        for stream, f in zip(self._streams, self._files):
            stream.close()
            f.close()


def write_metadata(path: str, metadata: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
