"""In-graph windowing of long inputs, as the original run_squad does it, for the span-QA and tagger exports.

A sequence of `n` word pieces that does not fit in `room` positions is cut into windows of `room` pieces that start
every `stride` pieces (the last window ends at the sequence's end); every piece is then read from the window that
gives it the most context: the largest min(left, right) + 0.01 * window length, the first such window on ties
(the original's `_check_is_max_context`, tests/reference/squad_features.py, computed for all windows at once). All
functions take and return tensors, so they run inside the exported serving functions; `room` may differ per example
(after the question in QA).
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.tokenization import row_ids


def plan(lengths, room, stride: int):
    """Windows of every example: (example index, first piece, number of pieces), each int64 [windows].

    `lengths` int64 [batch] pieces per example, `room` int64 [batch] (or scalar) pieces per window. An empty
    example gets one empty window, so that it has a prediction: the original run_squad's loop makes none, and its
    SQuAD 2.0 post-processing then fails on that example (it reads the example's first window)."""
    lengths = tf.cast(lengths, tf.int64)
    room = tf.broadcast_to(tf.cast(room, tf.int64), tf.shape(lengths, out_type=tf.int64))
    step = tf.minimum(room, stride)
    count = tf.where(lengths <= room, tf.ones_like(lengths), (lengths - room + step - 1) // step + 1)
    windows = tf.ragged.range(count)  # [examples, (windows)]: k, the window's number in its example
    example, k = row_ids(windows), windows.flat_values
    start = k * tf.gather(step, example)
    length = tf.minimum(tf.gather(lengths, example) - start, tf.gather(room, example))
    return example, start, length


def gather_windows(pieces, example, start, length):
    """The pieces of every window: ragged [batch, (n)] -> ragged [windows, (length)]."""
    first = tf.gather(pieces.row_splits, example) + start
    index = tf.ragged.range(first, first + length)
    return index.with_flat_values(tf.gather(pieces.flat_values, index.flat_values))


def global_index(pieces, example, start, width: int):
    """Flat index into `pieces.flat_values` of window position j, int64 [windows, width] (meaningful for j <
    length only)."""
    return (tf.gather(pieces.row_splits, example) + start)[:, None] + tf.range(width, dtype=tf.int64)[None, :]


def max_context(example, start, length, width):
    """bool [windows, width]: whether window w is the one that gives its j-th piece the most context (False for
    j >= length). Windows of an example are consecutive, and a piece lies in at most ceil(room / stride) + 1 of
    them, so each window is compared with that many neighbours on either side, one neighbour offset at a time: the
    memory is that of a few [windows, width] arrays at any stride (all offsets at once would take 2 room / stride
    times as much: gigabytes at a stride of a few pieces)."""
    windows = tf.size(example, out_type=tf.int64)
    span = tf.reduce_max(tf.concat([length, [1]], 0))
    gap = tf.reduce_min(tf.concat([tf.where(example[1:] == example[:-1], start[1:] - start[:-1], span), [span]],
                                  0))
    reach = span // tf.maximum(gap, 1) + 1
    position = start[:, None] + tf.range(width, dtype=tf.int64)[None, :]  # [W, J]: piece index in the example
    window = tf.range(windows)

    def score(offset):  # [W, J]: 100 x the original's float score in window w + offset, in integers so that ties
        other = window + offset  # are exact; -1 where that window does not hold the piece or is another example's
        inside = (other >= 0) & (other < windows)
        other = tf.clip_by_value(other, 0, tf.maximum(windows - 1, 0))
        same = inside & tf.equal(tf.gather(example, other), example)
        first, size = tf.gather(start, other)[:, None], tf.gather(length, other)[:, None]
        last = first + size - 1
        held = same[:, None] & (position >= first) & (position <= last)
        return tf.where(held, 100 * tf.minimum(position - first, last - position) + size, -1)

    def step(offset, best, is_self):  # the lowest window wins ties, as the original's first maximum
        scores = score(offset)
        better = scores > best
        return offset + 1, tf.where(better, scores, best), tf.where(better, tf.equal(offset, 0), is_self)

    shape = tf.shape(position)
    _, _, is_self = tf.while_loop(lambda offset, best, is_self: offset <= reach, step,
                                  (-reach, tf.fill(shape, tf.constant(-2, tf.int64)), tf.zeros(shape, tf.bool)))
    return is_self & (tf.range(width, dtype=tf.int64)[None, :] < length[:, None])


def char_offsets(text, byte_offsets):
    """Byte offsets into `text` [batch] (int64 [batch, n], dense) -> Unicode code-point offsets, same shape."""
    _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8", errors="replace")
    # a column past every text's end: searchsorted refuses a [0, 0] table (an empty batch)
    sorted_starts = tf.concat([char_starts.to_tensor(default_value=tf.int64.max),
                               tf.fill([tf.size(text), 1], tf.int64.max)], axis=1)
    return tf.searchsorted(sorted_starts, tf.cast(byte_offsets, tf.int64), side="left", out_type=tf.int64)
