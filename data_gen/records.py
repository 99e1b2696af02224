"""Pretraining records encoded to protobuf wire format and framed as a TFRecord file with numpy and CRC-32C alone
(no TensorFlow), so that data_gen workers do all of it.

The schema is `bert_tf.records.FEATURES`, which the caller passes in: this module is imported by the workers, which
must not import `bert_tf` (any module of it loads TensorFlow).
"""

from __future__ import annotations

import dataclasses

import google_crc32c
import numpy as np

def _varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Varints of a non-negative int array [n, ...] -> (bytes [n, k * width], valid [n, k * width]): each of the k
    values in a slot of the widest varint's width, its unused bytes marked invalid (valid is None: all are)."""
    v = np.asarray(values)
    n = v.shape[0]
    v = v.reshape(n, -1)
    top = int(v.max()) if v.size else 0
    width = 1
    while top >= 1 << (7 * width):
        width += 1
    if width == 1:
        return v.astype(np.uint8), None
    rest = v.astype(np.int32 if width <= 4 else np.int64)
    digits = np.empty(v.shape + (width,), np.uint8)
    valid = np.empty(v.shape + (width,), bool)
    valid[..., 0] = True
    for j in range(width):  # one byte plane at a time: 7 bits, and the continuation bit when more follow
        low = (rest & 0x7F).astype(np.uint8)
        rest = rest >> 7
        if j + 1 < width:
            more = rest > 0
            valid[..., j + 1] = more
            low |= more.view(np.uint8) << 7
        digits[..., j] = low
    return digits.reshape(n, -1), valid.reshape(n, -1)


def _varint_size(values: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each value."""
    size = np.ones(values.shape, np.int64)
    for shift in range(7, 63, 7):
        size += values >= 1 << shift
    return size


@dataclasses.dataclass
class Records:
    """Serialized records laid out as a TFRecord file in one buffer, the data CRCs not filled in yet: per record its
    length (uint64), the masked CRC-32C of the length, the record, the masked CRC-32C of the record, all
    little-endian (TF's record_writer.cc format). `starts[i]`, `ends[i]`: where record i lies in the buffer."""

    buffer: np.ndarray  # uint8
    starts: np.ndarray
    ends: np.ndarray

    def split(self) -> list[bytes]:
        """The serialized records, each on its own."""
        data = self.buffer.tobytes()
        return [data[start:end] for start, end in zip(self.starts.tolist(), self.ends.tolist())]

    def tfrecord_bytes(self) -> bytes:
        """The bytes of a TFRecord file holding the records (CRCs with google-crc32c's C code)."""
        data, value = self.buffer.tobytes(), google_crc32c.value
        crcs = _masked([value(data[start:end]) for start, end in zip(self.starts.tolist(), self.ends.tolist())])
        self.buffer[self.ends[:, None] + np.arange(4)] = crcs.view(np.uint8).reshape(-1, 4)
        return self.buffer.tobytes()


def _masked(crcs: list[int]) -> np.ndarray:
    """TFRecord's masking of a CRC (rotate right by 15, add a constant), as little-endian uint32."""
    crc = np.array(crcs, np.uint32)
    return (((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)).astype("<u4")


def serialize(arrays: dict[str, np.ndarray], features: dict[str, tuple]) -> Records:
    """Row i of each array -> record i, one serialized tf.train.Example of the schema `features`
    (`bert_tf.records.FEATURES`: name -> (dtype, length), in the order they are encoded); `arrays` has exactly
    its names.

    The protobuf wire format is assembled with numpy for the whole batch at once (packed varints for int64 lists,
    little-endian floats, length-delimited fields): every piece of every record is a column block of one byte
    matrix with a validity mask (varints sit in slots of the widest one's width), and one boolean selection lays
    all records out back to back. Building and serializing a tf.train.Example per record would cost many times
    more than everything else a worker does for that record (BENCHMARKS.md, "Pretraining data generation").
    `tests/data_gen/test_data_gen.py` parses the bytes back with `tf.io.parse_single_example` and compares them, message for
    message, with `tf.train.Example`.
    """
    if arrays and set(arrays) != set(features):
        raise ValueError(f"record fields {sorted(arrays)} are not the schema's {sorted(features)}")
    n = len(next(iter(arrays.values()))) if arrays else 0
    if n == 0:
        return Records(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    pieces: list[tuple[np.ndarray, np.ndarray | None]] = []  # column blocks: (bytes, valid or None if all are)

    def constant(content: bytes):
        pieces.append((np.frombuffer(content, np.uint8), None))

    def varints(values):
        pieces.append(_varint_matrix(values))

    fields, body_len = [], 0
    for key, (dtype, _) in features.items():  # sizes first: each message's length goes before it
        values = np.asarray(arrays[key]).reshape(n, -1)
        if dtype == "float32":
            payload = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(n, -1)
            payload_valid, tag = None, b"\x12"  # Feature.float_list
        else:
            if (values < 0).any():
                raise ValueError(f"record field {key} must be non-negative")
            (payload, payload_valid), tag = _varint_matrix(values), b"\x1a"  # Feature.int64_list
        data_len = np.full(n, payload.shape[1]) if payload_valid is None else payload_valid.sum(1)
        list_len = 1 + _varint_size(data_len) + data_len  # Int64List/FloatList: field 1, packed
        feature_len = 1 + _varint_size(list_len) + list_len  # Feature: the list in its oneof field
        key_field = b"\x0a" + bytes([len(key)]) + key.encode() + b"\x12"  # map entry: key = 1, value = 2
        entry_len = len(key_field) + _varint_size(feature_len) + feature_len
        body_len = body_len + 1 + _varint_size(entry_len) + entry_len
        fields.append((key_field, tag, payload, payload_valid, data_len, list_len, feature_len, entry_len))
    constant(b"\x0a")  # Example.features
    varints(body_len[:, None])
    for key_field, tag, payload, payload_valid, data_len, list_len, feature_len, entry_len in fields:
        constant(b"\x0a")  # Features.feature: one map entry
        varints(entry_len[:, None])
        constant(key_field)
        varints(feature_len[:, None])
        constant(tag)
        varints(list_len[:, None])
        constant(b"\x0a")
        varints(data_len[:, None])
        pieces.append((payload, payload_valid))
    lengths = 1 + _varint_size(body_len) + body_len
    # TFRecord header: the length and its CRC, computed once per distinct length (a few hundred per window)
    distinct, which = np.unique(lengths, return_inverse=True)
    length_crc = _masked([google_crc32c.value(int(length).to_bytes(8, "little")) for length in distinct])[which]
    pieces[:0] = [(lengths.astype("<u8").view(np.uint8).reshape(n, 8), None),
                  (length_crc.view(np.uint8).reshape(n, 4), None)]
    constant(b"\0\0\0\0")  # the record's CRC, filled in by `Records.tfrecord_bytes`
    width = sum(block.shape[-1] for block, _ in pieces)
    matrix, mask = np.empty((n, width), np.uint8), np.ones((n, width), bool)
    column = 0
    for block, ok in pieces:
        matrix[:, column:column + block.shape[-1]] = block
        if ok is not None:
            mask[:, column:column + block.shape[-1]] = ok
        column += block.shape[-1]
    ends = np.cumsum(lengths + 16) - 4
    return Records(matrix[mask], ends - lengths, ends)
