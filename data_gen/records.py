"""Pretraining records in the original schema, encoded to protobuf wire format with numpy alone (no TensorFlow).

Schema (google-research/bert run_pretraining.py reads exactly this): `input_ids`, `input_mask`, `segment_ids`
int64[max_seq_length]; `masked_lm_positions`, `masked_lm_ids` int64[max_predictions_per_seq]; `masked_lm_weights`
float[max_predictions_per_seq]; `next_sentence_labels` int64[1] (1 = B is a random sentence).
"""

from __future__ import annotations

import numpy as np

_FIELDS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels",
           "masked_lm_weights")


def _varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of a non-negative int array [...]: (bytes [..., width] zero-padded, sizes [...])."""
    v = np.asarray(values).astype(np.int64)
    top = int(v.max()) if v.size else 0
    sizes = np.ones(v.shape, np.int64)
    for shift in range(7, 63, 7):
        if top < (1 << shift):
            break
        sizes += v >= (1 << shift)
    width = int(sizes.max()) if v.size else 1
    position = np.arange(width)
    digits = ((v[..., None] >> (position * 7)) & 0x7F).astype(np.uint8)
    digits |= np.where(position < sizes[..., None] - 1, 0x80, 0).astype(np.uint8)
    return np.where(position < sizes[..., None], digits, 0).astype(np.uint8), sizes


def _concat_rows(pieces: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise concatenation of ragged byte pieces, each (bytes [n, width], lengths [n]) -> (buffer, row ends)."""
    lengths = np.stack([length for _, length in pieces], axis=1)  # [n, pieces]
    row_len = lengths.sum(1)
    row_start = np.concatenate([[0], np.cumsum(row_len)[:-1]])
    piece_start = row_start[:, None] + np.concatenate([np.zeros((n, 1), np.int64), np.cumsum(lengths, 1)[:, :-1]], 1)
    out = np.empty(int(row_len.sum()), np.uint8)
    for p, (data, length) in enumerate(pieces):
        valid = np.arange(data.shape[1])[None, :] < length[:, None]
        out[(piece_start[:, p][:, None] + np.arange(data.shape[1])[None, :])[valid]] = data[valid]
    return out, np.cumsum(row_len)


def _constant(content: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tile(np.frombuffer(content, np.uint8), (n, 1)), np.full(n, len(content), np.int64)


def serialize(arrays: dict[str, np.ndarray]) -> list[bytes]:
    """Row i of each array -> one serialized tf.train.Example, in the schema above.

    The protobuf wire format is assembled with numpy for the whole batch at once (packed varints for int64 lists,
    little-endian floats, length-delimited fields): building tf.train.Example objects one by one was 60 % of the
    generator's time. `tests/test_data_gen.py` parses the bytes back with `tf.io.parse_single_example` and compares
    them, message for message, with `tf.train.Example`.
    """
    n = len(arrays["input_ids"])
    if n == 0:
        return []
    pieces = []
    for key in _FIELDS:
        values = np.asarray(arrays[key]).reshape(n, -1)
        if key == "masked_lm_weights":
            data = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(n, -1)
            data_len = np.full(n, data.shape[1], np.int64)
            tag = b"\x12"  # Feature.float_list
        else:
            if (values < 0).any():
                raise ValueError(f"record field {key} must be non-negative")
            digits, sizes = _varint_matrix(values)  # [n, k, width]
            data_len = sizes.sum(1)
            flat = digits[np.arange(digits.shape[2]) < sizes[..., None]]  # row-major: each row's varints in order
            data = _rows_to_matrix(flat, data_len, n)
            tag = b"\x1a"  # Feature.int64_list
        packed_v, packed_vs = _varint_matrix(data_len)
        list_len = 1 + packed_vs + data_len  # Int64List/FloatList: field 1, packed
        list_v, list_vs = _varint_matrix(list_len)
        feature_len = 1 + list_vs + list_len  # Feature: the list in its oneof field
        feature_v, feature_vs = _varint_matrix(feature_len)
        key_field = b"\x0a" + bytes([len(key)]) + key.encode()
        entry_len = len(key_field) + 1 + feature_vs + feature_len  # map entry: key = 1, value = 2
        entry_v, entry_vs = _varint_matrix(entry_len)
        pieces += [_constant(b"\x0a", n), (entry_v, entry_vs), _constant(key_field + b"\x12", n),
                   (feature_v, feature_vs), _constant(tag, n), (list_v, list_vs), _constant(b"\x0a", n),
                   (packed_v, packed_vs), (data, data_len)]
    body, body_ends = _concat_rows(pieces, n)
    body_len = np.diff(np.concatenate([[0], body_ends]))
    body_v, body_vs = _varint_matrix(body_len)
    head, head_ends = _concat_rows([_constant(b"\x0a", n), (body_v, body_vs)], n)  # Example.features
    head_starts = np.concatenate([[0], head_ends[:-1]]).tolist()
    body_starts = np.concatenate([[0], body_ends[:-1]]).tolist()
    head_bytes, body_bytes = head.tobytes(), body.tobytes()
    return [head_bytes[hs:he] + body_bytes[bs:be] for hs, he, bs, be in
            zip(head_starts, head_ends.tolist(), body_starts, body_ends.tolist())]


def _rows_to_matrix(buffer: np.ndarray, lengths: np.ndarray, n: int) -> np.ndarray:
    """Flat ragged rows of the given lengths -> [n, max_len] zero-padded."""
    out = np.zeros((n, int(lengths.max())), np.uint8)
    out[np.arange(out.shape[1])[None, :] < lengths[:, None]] = buffer
    return out
