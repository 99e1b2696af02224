"""The one in-graph feature path of span QA: (questions, contexts[, answers]) -> the windows' model inputs, what
post-processing needs, and the training labels. `run_squad` training, `run_squad` prediction and the exported
`SpanQAModule` all call `span_features`, so the export cannot drift from training.

The rules are the original run_squad.py's (kept in plain Python in tests/reference/squad_features.py, which the
tests hold this function equal to): the context is tokenized whole (the same pieces as the original's per-word
WordPiece, since its whitespace words split on a subset of the tokenizer's whitespace); each piece belongs to the
whitespace word (space, tab, CR, LF, U+202F) holding its first byte; the question is cut to `max_query_length`
pieces; windows of `seq_length - len(question) - 3` pieces start every `doc_stride` pieces (`windows.plan`); the
answer's characters give its first and last word, those words' pieces the answer's piece span, and that span is
narrowed to the first sub-span whose pieces are the answer text's own pieces (the original's
`_improve_answer_span`). A window's label is the answer's position in it, or 0 ([CLS]) when the answer is not wholly
inside it or there is none.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.tasks import windows
from bert_tf.tokenization import pack_inputs_graph, row_ids

SPACES = (32, 9, 13, 10, 0x202F)  # the original's _is_whitespace in read_squad_examples


def _word_of_char(context):
    """(code points ragged [batch, (chars)], flat word index of every character): the whitespace word a character
    is in, or for a space the word before it (-1 before the first), as the original's char_to_word_offset."""
    chars, char_bytes = tf.strings.unicode_decode_with_offsets(context, "UTF-8", errors="replace")
    flat = chars.flat_values
    space = tf.reduce_any(tf.equal(flat[:, None], tf.constant(SPACES, flat.dtype)[None, :]), axis=1)
    row_start = tf.equal(tf.ragged.range(chars.row_lengths()).flat_values, 0)
    previous_space = tf.concat([[True], space[:-1]], 0) | row_start
    starts = tf.cast(~space & previous_space, tf.int64)
    total = tf.cumsum(starts)
    before_row = tf.gather(tf.concat([[0], total], 0), chars.row_splits[:-1])
    return chars, char_bytes, total - tf.gather(before_row, row_ids(chars)) - 1


def span_features(tokenizer, cls_id: int, sep_id: int, question, context, *, seq_length: int,
                  max_query_length: int, doc_stride: int, answer_start=None, answer_end=None, answer_text=None):
    """Questions and contexts (string [batch]) -> dict of tensors, one row per window:

    `input_word_ids`, `input_mask`, `input_type_ids` int32 [W, seq_length]; `example` (the window's question),
    `first` (its first context piece), `length` (its context pieces), `offset` (the position of its first context
    piece), int64 [W]; `max_context` bool [W, seq_length] by context piece j of the window (the window gives piece j
    the most context); `word` int64 [W, seq_length], the whitespace word of context piece j (-1 past `length`);
    `doc` (ragged piece ids [batch, (pieces)]), `piece_start`, `piece_end` (ragged byte offsets of each piece).

    With `answer_start` / `answer_end` (int64 [batch], the answer's first and last character, -1 for none) and
    `answer_text` (string [batch]), also `start_positions` and `end_positions` int64 [W]: the labels (see the module
    docstring). `tokenizer` is a `BertTokenizerLayer`."""
    query = tokenizer(question)[:, :max_query_length]
    doc, piece_start, piece_end = tokenizer.tokenize_with_offsets(context)
    room = tf.maximum(seq_length - query.row_lengths() - 3, 1)  # callers reject a question that leaves no room
    example, first, length = windows.plan(doc.row_lengths(), room, doc_stride)
    features = pack_inputs_graph([tf.gather(query, example), windows.gather_windows(doc, example, first, length)],
                                 seq_length, cls_id, sep_id)
    offset = tf.gather(query.row_lengths(), example) + 2
    features.update(example=example, first=first, length=length, offset=offset, doc=doc, piece_start=piece_start,
                    piece_end=piece_end, max_context=windows.max_context(example, first, length, seq_length))

    # the word of every piece: the word of the character at the piece's first byte
    chars, char_bytes, char_word = _word_of_char(context)
    base = tf.cast(tf.cumsum(tf.strings.length(context), exclusive=True), tf.int64)  # each context's first byte
    char_global = char_bytes.flat_values + tf.gather(base, row_ids(char_bytes))
    piece_global = piece_start.flat_values + tf.gather(base, row_ids(piece_start))
    char_index = tf.searchsorted(char_global, piece_global, side="left", out_type=tf.int64)
    piece_word = doc.with_flat_values(tf.gather(tf.concat([char_word, [0]], 0), char_index))
    index = windows.global_index(doc, example, first, seq_length)
    inside = tf.range(seq_length, dtype=tf.int64)[None, :] < length[:, None]
    safe = tf.clip_by_value(index, 0, tf.maximum(tf.size(doc.flat_values, out_type=tf.int64) - 1, 0))
    features["word"] = tf.where(inside, tf.gather(tf.concat([piece_word.flat_values, [-1]], 0), safe), -1)
    if answer_start is None:
        return features

    answer_start, answer_end = tf.cast(answer_start, tf.int64), tf.cast(answer_end, tf.int64)
    has_answer = answer_start >= 0

    def word_at(char):
        at = tf.clip_by_value(chars.row_splits[:-1] + char, 0, tf.maximum(tf.size(char_word, tf.int64) - 1, 0))
        return tf.gather(tf.concat([char_word, [0]], 0), at)

    start_word, end_word = word_at(answer_start), word_at(answer_end)
    # per example, pieces before the start word and up to the end word, on the flat pieces (a ragged comparison
    # with [batch, 1] would build several hundred broadcasting ops)
    piece_row = row_ids(doc)
    count = lambda mask: tf.math.unsorted_segment_sum(  # noqa: E731
        tf.cast(mask, tf.int64), piece_row, tf.size(answer_start, tf.int64))
    a = count(piece_word.flat_values < tf.gather(start_word, piece_row))  # the start word's first piece
    b = count(piece_word.flat_values <= tf.gather(end_word, piece_row)) - 1  # the end word's last piece
    # _improve_answer_span: the first s in [a, b - L + 1] whose L pieces are the answer text's L pieces
    target = tokenizer(answer_text)
    size = target.row_lengths()
    candidates = tf.ragged.range(a, tf.maximum(a, tf.where(size > 0, b - size + 2, a)))
    candidate_row, candidate_s = row_ids(candidates), candidates.flat_values
    inner = tf.ragged.range(tf.gather(size, candidate_row))
    owner, i = row_ids(inner), inner.flat_values
    row = tf.gather(candidate_row, owner)
    equal = tf.equal(tf.gather(doc.flat_values, tf.gather(doc.row_splits, row) + tf.gather(candidate_s, owner) + i),
                     tf.gather(target.flat_values, tf.gather(target.row_splits, row) + i))
    wrong = tf.math.unsorted_segment_sum(tf.cast(~equal, tf.int64), owner, tf.size(candidate_s, tf.int64))
    best = tf.math.unsorted_segment_min(tf.where(wrong == 0, candidate_s, tf.int64.max), candidate_row,
                                        tf.size(a, tf.int64))
    improved = best < tf.int64.max
    a, b = tf.where(improved, best, a), tf.where(improved, best + size - 1, b)

    window_a, window_b = tf.gather(a, example), tf.gather(b, example)
    holds = tf.gather(has_answer, example) & (first <= window_a) & (window_b <= first + length - 1)
    features["start_positions"] = tf.where(holds, window_a - first + offset, 0)
    features["end_positions"] = tf.where(holds, window_b - first + offset, 0)
    return features
