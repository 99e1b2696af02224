"""Pretraining records in the original schema, sharded TFRecord files written atomically, and the metadata file.

Schema (google-research/bert run_pretraining.py reads exactly this): `input_ids`, `input_mask`, `segment_ids`
int64[max_seq_length]; `masked_lm_positions`, `masked_lm_ids` int64[max_predictions_per_seq]; `masked_lm_weights`
float[max_predictions_per_seq]; `next_sentence_labels` int64[1] (1 = B is a random sentence).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
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


def _varint_slow(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_SMALL_VARINTS = [_varint_slow(i) for i in range(1 << 14)]


def _varint(n: int) -> bytes:
    return _SMALL_VARINTS[n] if n < 16384 else _varint_slow(n)


def _packed_varints(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Protobuf varints of a non-negative int array [rows, n], all rows in one buffer; returns (buffer, row ends)."""
    v = values.astype(np.uint64)
    if (values < 0).any():
        raise ValueError("record fields must be non-negative")
    sizes = np.ones(v.shape, np.int64)
    for shift in range(7, 64, 7):
        sizes += v >= (np.uint64(1) << np.uint64(shift))
    width = int(sizes.max()) if v.size else 1
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))[None, None, :]
    digits = ((v[:, :, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    position = np.arange(width)[None, None, :]
    digits |= np.where(position < sizes[:, :, None] - 1, 0x80, 0).astype(np.uint8)
    return digits[position < sizes[:, :, None]].tobytes(), np.cumsum(sizes.sum(axis=1))


def serialize(arrays: dict[str, np.ndarray]) -> list[bytes]:
    """Row i of each array -> one serialized tf.train.Example, in the schema above.

    The protobuf wire format is encoded directly with numpy (packed varints for int64 lists, little-endian floats):
    building tf.train.Example objects one by one was 60 % of the generator's time. `tests/test_data_gen.py` checks
    the bytes parse back, field for field, with `tf.io.parse_single_example` and `tf.train.Example`.
    """
    n = len(arrays["input_ids"])
    columns = []
    for key in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                "next_sentence_labels", "masked_lm_weights"):
        if key == "masked_lm_weights":
            data = np.ascontiguousarray(arrays[key], dtype="<f4").tobytes()
            width = arrays[key].shape[1] * 4
            ends, tag = np.arange(1, n + 1) * width, b"\x12"  # Feature.float_list
        else:
            data, ends = _packed_varints(np.asarray(arrays[key]).reshape(n, -1))
            tag = b"\x1a"  # Feature.int64_list
        columns.append((b"\x0a" + _varint(len(key)) + key.encode(), tag, data, ends))
    records = []
    starts = [0] * len(columns)
    ends_lists = [ends.tolist() for _, _, _, ends in columns]
    for i in range(n):
        parts = []
        for c, (key_field, tag, data, _) in enumerate(columns):
            end = ends_lists[c][i]
            packed = data[starts[c]:end]
            starts[c] = end
            length = _varint(len(packed))
            list_len = 1 + len(length) + len(packed)  # Int64List/FloatList: field 1, packed
            list_len_v = _varint(list_len)
            feature_len = 1 + len(list_len_v) + list_len  # Feature: the list in its oneof field
            feature_len_v = _varint(feature_len)
            entry_len = len(key_field) + 1 + len(feature_len_v) + feature_len  # map entry: key = 1, value = 2
            parts += (b"\x0a", _varint(entry_len), key_field, b"\x12", feature_len_v, tag, list_len_v, b"\x0a",
                      length, packed)
        body = b"".join(parts)
        records.append(b"\x0a" + _varint(len(body)) + body)  # Example.features
    return records


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
