"""The tagging family's features, in the graph: word pieces -> windows, training labels and where to read each
word's tag. `run_ner` (training and prediction) and the exported `TaggerModule` both call `tag_windows`, so an
export tags a sentence exactly as `run_ner` does.

A row's pieces (a sentence's, or a document's) are cut into windows of `seq_length - 2` pieces every `doc_stride`
pieces (`windows.plan`, the original run_squad's rule); a word's tag is read at its first piece, in the window that
gives that piece the most context (`windows.max_context`). In training every window is an example: a word's tag
sits on its first piece (weight 1) wherever that piece falls; the other pieces have weight 0 or, with
`label_all_subtokens`, carry the word's tag with B- made I-.

`SentenceEncoder` runs it on `run_ner`'s sentences (words already split, as in CoNLL files), a sentence or a whole
document a row; the export runs it on the words its tokenizer splits raw text into.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from bert_tf.tasks import windows
from bert_tf.tokenization import merge_words, pack_inputs_graph, row_ids


def tag_windows(pieces, seq_length: int, doc_stride: int, cls_id: int, sep_id: int, word_tags=None,
                inner_tags=None, label_all_subtokens: bool = False):
    """Windows of tagged sentences.

    Args:
      pieces: int ragged [batch, (words), (pieces)]; every word has at least one piece.
      seq_length, doc_stride: the window size (with [CLS] and [SEP]) and the step between window starts, in pieces.
      cls_id, sep_id: the special tokens' ids.
      word_tags: optional int ragged [batch, (words)] tag ids, for training labels.
      inner_tags: int [tags]: the tag id a word's later pieces carry (I-X for B-X), with `label_all_subtokens`.

    Returns a dict: `input_word_ids`, `input_mask`, `input_type_ids` [windows, seq_length]; `example` int64
    [windows], the sentence of each window; `read_window`, `read_position` int64 ragged [batch, (words)], where to
    read each word's tag; with `word_tags`, `labels` int32 and `weights` float32 [windows, seq_length].
    """
    pieces = tf.cast(pieces, tf.int64)
    flat = merge_words(pieces)  # [batch, (pieces)]
    width = seq_length - 2
    example, start, length = windows.plan(flat.row_lengths(), width, doc_stride)
    out = pack_inputs_graph([windows.gather_windows(flat, example, start, length)], seq_length, cls_id, sep_id)
    out["example"] = example
    index = windows.global_index(flat, example, start, width)  # [W, width]: flat piece index of each position
    inside = tf.range(width, dtype=tf.int64)[None, :] < length[:, None]
    total = tf.size(flat.flat_values, out_type=tf.int64)
    first_piece = pieces.values.row_splits[:-1]  # flat piece index of every word's first piece

    # Where each piece is read: the (window, position) of its max-context window; then each word's first piece.
    where = tf.where(windows.max_context(example, start, length, width))
    owner = tf.scatter_nd(tf.gather_nd(index, where)[:, None], where + [[0, 1]], tf.stack([total, 2]))
    read = tf.gather(owner, first_piece)
    out["read_window"] = tf.RaggedTensor.from_row_splits(read[:, 0], pieces.row_splits, validate=False)
    out["read_position"] = tf.RaggedTensor.from_row_splits(read[:, 1], pieces.row_splits, validate=False)

    if word_tags is not None:
        tags = tf.cast(word_tags.flat_values, tf.int64)  # [words]
        word_of_piece = row_ids(pieces.values)  # [pieces]
        is_first = tf.scatter_nd(first_piece[:, None], tf.ones_like(first_piece, tf.bool), [total])
        tag = tf.gather(tags, word_of_piece)
        if label_all_subtokens:
            piece_label = tf.where(is_first, tag, tf.gather(tf.cast(inner_tags, tf.int64), tag))
            piece_weight = tf.ones([total], tf.float32)
        else:
            piece_label = tf.where(is_first, tag, 0)
            piece_weight = tf.cast(is_first, tf.float32)
        safe = tf.where(inside, index, 0)
        labels = tf.where(inside, tf.gather(tf.concat([piece_label, [0]], 0), safe), 0)
        weights = tf.where(inside, tf.gather(tf.concat([piece_weight, [0.0]], 0), safe), 0.0)
        pad = [[0, 0], [1, 1]]  # [CLS] before the pieces, [SEP] after
        out["labels"] = tf.cast(tf.pad(labels, pad), tf.int32)
        out["weights"] = tf.pad(weights, pad)
    return out


def default_stride(seq_length: int) -> int:
    """Half a window: `run_ner`'s and the tagger export's stride unless told another."""
    return max(1, (seq_length - 2) // 2)


def word_pieces(tokenizer, words, unk_id: int):
    """Words [n] (strings, already split, as CoNLL's) -> int64 ragged [n, (pieces)]; a word that tokenizes to
    nothing (control characters only) becomes `[UNK]`, so that every word has a piece to carry its tag."""
    ids = tf.cast(tokenizer(words), tf.int64)
    n = tf.size(words, out_type=tf.int64)
    unk = tf.RaggedTensor.from_row_lengths(tf.fill([n], tf.cast(unk_id, tf.int64)), tf.ones([n], tf.int64),
                                           validate=False)
    keep = tf.maximum(ids.row_lengths(), 1)
    return tf.ragged.boolean_mask(tf.concat([ids, unk], axis=1), tf.ragged.range(ids.row_lengths() + 1) < keep[:, None])


@dataclasses.dataclass
class Encoded:
    """`tag_windows`' output for a list of sentences, as numpy: `inputs` [windows, seq], `labels` and `weights`
    [windows, seq] (meaningful where the sentences have tags), `read[i]` the (windows, positions) of sentence i's
    words."""

    inputs: dict
    labels: np.ndarray
    weights: np.ndarray
    read: list

    def word_tags(self, logits, tags) -> list[list[str]]:
        """Per sentence, the predicted tag of every word, from the model's logits [windows, seq, tags]."""
        best = np.asarray(logits).argmax(-1)
        return [[tags[int(t)] for t in best[w, p]] for w, p in self.read]


class SentenceEncoder:
    """Words and tags of sentences -> `Encoded`, through `tag_windows` traced once, `chunk` rows (sentences or
    documents) a call."""

    def __init__(self, vocab_file: str, do_lower_case: bool, tags, seq_length: int, doc_stride: int | None = None,
                 label_all_subtokens: bool = False, chunk: int = 512):
        from bert_tf.tokenizer_layer import BertTokenizerLayer

        layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
        cls, sep, unk = (layer.vocab.index(t) for t in ("[CLS]", "[SEP]", "[UNK]"))
        self.tags = {tag: i for i, tag in enumerate(tags)}
        inner = [self.tags.get("I-" + t[2:], i) if t.startswith("B-") else i for i, t in enumerate(tags)]
        self.chunk = chunk
        stride = doc_stride or default_stride(seq_length)

        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string),
                                                       tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64)])
        def encode(words, lengths, tag_ids):
            pieces = tf.RaggedTensor.from_row_lengths(word_pieces(layer, words, unk), lengths)
            return tag_windows(pieces, seq_length, stride, cls, sep,
                               word_tags=tf.RaggedTensor.from_row_lengths(tag_ids, lengths),
                               inner_tags=tf.constant(inner, tf.int64), label_all_subtokens=label_all_subtokens)

        self._encode = encode

    def __call__(self, sentences, document_context: bool = False) -> Encoded:
        """With `document_context`, consecutive sentences of one document (`ner.Sentence.document`, where marked)
        are encoded as one row, so that every window is filled with the words around it (paper section 5.3: "the
        maximal document context provided by the data"); each word's tag is still read once, from the window that
        gives it the most context. The result's `read` is per sentence either way."""
        rows: list[list] = []
        for sentence in sentences:
            if (document_context and rows and sentence.document is not None
                    and rows[-1][-1].document == sentence.document):
                rows[-1].append(sentence)
            else:
                rows.append([sentence])
        keys = ("input_word_ids", "input_mask", "input_type_ids", "labels", "weights")
        parts, read, offset = {k: [] for k in keys}, [], 0
        for begin in range(0, len(rows), self.chunk):
            part = rows[begin:begin + self.chunk]
            out = self._encode(tf.constant([w for row in part for s in row for w in s.words], tf.string),
                               tf.constant([sum(len(s.words) for s in row) for row in part], tf.int64),
                               tf.constant([self.tags.get(t, 0) for row in part for s in row
                                            for t in (s.tags or ["O"] * len(s.words))], tf.int64))
            for key in keys:
                parts[key].append(out[key].numpy())
            for row, row_windows, row_positions in zip(part, out["read_window"].to_list(),
                                                       out["read_position"].to_list()):
                row_windows = np.asarray(row_windows, np.int64) + offset
                row_positions = np.asarray(row_positions, np.int64)
                cuts = np.cumsum([len(s.words) for s in row])[:-1]
                read += list(zip(np.split(row_windows, cuts), np.split(row_positions, cuts)))
            offset += len(out["example"])
        arrays = {k: np.concatenate(v) for k, v in parts.items()}
        inputs = {k: arrays[k] for k in keys[:3]}
        return Encoded(inputs, arrays["labels"], arrays["weights"], read)
