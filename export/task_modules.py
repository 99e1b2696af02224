"""End-to-end SavedModel modules for the token-level and multi-input tasks: raw strings in, answers out.

- `SpanQAModule` (SQuAD): `question`, `context` -> `answer` text with `start`/`end` character offsets into the
  context and `score`; long contexts windowed with the model's doc stride, every candidate read from the window
  that gives it the most context; SQuAD 2.0: empty answer when null score - best span score > the threshold
  chosen at fine-tuning (stored in the export), reported as `null_score_diff`.
- `TaggerModule` (NER): `text` -> per word (as BERT's basic tokenizer splits words) `words`, `tags`, `scores`,
  character offsets `start`/`end`; long inputs windowed like QA.
- `MultipleChoiceModule` (SWAG): `context` [batch] and `endings` [batch, choices] -> `probabilities`, `best`.
- `MaskedLMModule`: `text` with `[MASK]` written where a word piece is wanted -> the `top_k` most probable pieces
  and their probabilities for every mask.

Outputs are dense (TF Serving signatures cannot return ragged tensors); per-word and per-mask outputs are padded
with "" / -1 / 0 and come with a count (`num_words`, `num_masks`). Offsets count Unicode code points.
"""

from __future__ import annotations

from bert_tf.tokenization import pack_inputs_graph  # before TF: sets TF_ENABLE_ONEDNN_OPTS

import tensorflow as tf

from export import windows
from export.modules import hold, trim

NEG = -1e30  # "no candidate" score: finite, so that serving JSON stays valid


def _spec(name, rank=1):
    return tf.TensorSpec([None] * rank, tf.string, name=name)


class SpanQAModule(tf.Module):
    """Extractive QA on raw text (see the module docstring). Exact with the library's `run_squad` prediction
    (`bert_tf.tasks.squad.convert_examples` + `postprocess`): the same windows, top-`n_best_size` starts and ends,
    answer-length limit and max-context rule."""

    def __init__(self, model, preprocessor, *, max_query_length=64, doc_stride=128, max_answer_length=30,
                 n_best_size=20, version_2=False, null_threshold=0.0, name="span_qa"):
        super().__init__(name=name)
        room = preprocessor.seq_length - max_query_length - 3
        if room < 1:
            raise ValueError(f"--seq_length={preprocessor.seq_length} leaves no room for the context after a "
                             f"question of up to {max_query_length} pieces")
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.max_query_length, self.doc_stride = max_query_length, doc_stride
        self.max_answer_length, self.n_best_size = max_answer_length, n_best_size
        self.version_2 = version_2
        self.null_threshold = tf.Variable(float(null_threshold or 0.0), trainable=False, name="null_threshold")
        self.serve = tf.function(self._serve, input_signature=[_spec("question"), _spec("context")])

    def _serve(self, question, context):
        pre = self.preprocessor
        seq = pre.seq_length
        query = pre.tokenizer(question)[:, :self.max_query_length]
        doc, starts, ends = pre.tokenizer.tokenize_with_offsets(context)
        example, first, length = windows.plan(doc.row_lengths(), seq - query.row_lengths() - 3, self.doc_stride)
        inputs = pack_inputs_graph([tf.gather(query, example), windows.gather_windows(doc, example, first, length)],
                                   seq, pre._cls, pre._sep)
        outputs = self.model(inputs)
        start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]  # [W, seq]
        offset = tf.gather(query.row_lengths(), example) + 2  # position of the window's first context piece
        best_context = windows.max_context(example, first, length, seq)  # [W, seq], by context position

        k = min(self.n_best_size, seq)
        start_values, start_at = tf.math.top_k(start_logits, k)
        end_values, end_at = tf.math.top_k(end_logits, k)
        start_at, end_at = tf.cast(start_at, tf.int64), tf.cast(end_at, tf.int64)

        def in_context(position):
            return (position >= offset[:, None]) & (position < (offset + length)[:, None])

        start_ok = in_context(start_at) & tf.gather(best_context, tf.clip_by_value(start_at - offset[:, None], 0,
                                                                                   seq - 1), batch_dims=1)
        span = end_at[:, None, :] - start_at[:, :, None]  # [W, k, k]
        valid = (start_ok[:, :, None] & in_context(end_at)[:, None, :] & (span >= 0)
                 & (span < self.max_answer_length))
        scores = tf.where(valid, start_values[:, :, None] + end_values[:, None, :], NEG)
        flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
        pick = tf.argmax(flat, axis=-1, output_type=tf.int64)
        window_best = tf.reduce_max(flat, axis=-1)
        start_pos = tf.gather(start_at, pick // k, batch_dims=1)
        end_pos = tf.gather(end_at, pick % k, batch_dims=1)

        batch = tf.size(question, out_type=tf.int64)
        best = tf.math.unsorted_segment_max(window_best, example, batch)
        window_ids = tf.range(tf.size(example, out_type=tf.int64))
        chosen = tf.math.unsorted_segment_min(tf.where(window_best >= tf.gather(best, example), window_ids,
                                                       tf.int64.max), example, batch)
        found = best > NEG / 2
        chosen = tf.where(found, chosen, 0)
        # window position -> piece of the context -> byte span in the context
        base = tf.gather(doc.row_splits, tf.gather(example, chosen)) + tf.gather(first, chosen)
        piece_start = base + tf.gather(start_pos, chosen) - tf.gather(offset, chosen)
        piece_end = base + tf.gather(end_pos, chosen) - tf.gather(offset, chosen)
        last = tf.maximum(tf.size(starts.flat_values, out_type=tf.int64) - 1, 0)
        safe = lambda values, i: tf.gather(tf.concat([values, [0]], 0), tf.clip_by_value(i, 0, last))  # noqa
        byte_start = tf.where(found, safe(starts.flat_values, piece_start), 0)
        byte_end = tf.where(found, safe(ends.flat_values, piece_end), 0)
        result = {"score": tf.where(found, best, NEG)}
        if self.version_2:
            null = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], example, batch)
            diff = null - tf.where(found, best, -1e9)
            found &= diff <= self.null_threshold
            result["null_score_diff"] = diff
            result["score"] = tf.where(found, best, null)
        char = windows.char_offsets(context, tf.stack([byte_start, byte_end], axis=1))
        result["answer"] = tf.where(found, tf.strings.substr(context, byte_start, byte_end - byte_start), "")
        result["start"] = tf.where(found, char[:, 0], -1)
        result["end"] = tf.where(found, char[:, 1], -1)
        return result

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class TaggerModule(tf.Module):
    """Word tags on raw text (see the module docstring): a word's tag is read at its first piece, from the window
    that gives that piece the most context."""

    def __init__(self, model, preprocessor, tags, doc_stride=None, name="tagger"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.tag_names = tf.constant(list(tags))
        self.doc_stride = doc_stride or max(1, (preprocessor.seq_length - 2) // 2)
        self.serve = tf.function(self._serve, input_signature=[_spec("text")])

    def _serve(self, text):
        pre = self.preprocessor
        seq = pre.seq_length
        ids, word_starts, word_ends, _, _ = pre.tokenizer.tokenize_words_with_offsets(text)
        pieces = ids.merge_dims(1, 2)
        example, first, length = windows.plan(pieces.row_lengths(), seq - 2, self.doc_stride)
        inputs = pack_inputs_graph([windows.gather_windows(pieces, example, first, length)], seq, pre._cls,
                                   pre._sep)
        probabilities = tf.nn.softmax(self.model(inputs)["logits"][:, 1:, :], axis=-1)  # [W, seq - 1, tags]
        width = seq - 2
        owner = windows.max_context(example, first, length, width)
        where = tf.where(owner)  # (window, position) pairs: exactly one per piece
        piece = tf.gather_nd(windows.global_index(pieces, example, first, width), where)
        per_piece = tf.scatter_nd(piece[:, None], tf.gather_nd(probabilities, where),
                                  tf.stack([tf.size(pieces.flat_values, out_type=tf.int64),
                                            tf.shape(probabilities, out_type=tf.int64)[-1]]))
        word_probabilities = tf.gather(per_piece, ids.values.row_splits[:-1])  # first piece of every word
        best = tf.argmax(word_probabilities, axis=-1)
        by_word = word_starts.with_flat_values
        byte_start, byte_end = word_starts.to_tensor(0), word_ends.to_tensor(0)
        char = windows.char_offsets(text, tf.concat([byte_start, byte_end], axis=1))
        present = tf.sequence_mask(word_starts.row_lengths(), tf.shape(byte_start)[1])
        count = tf.shape(byte_start, out_type=tf.int64)[1]
        return {"tags": by_word(tf.gather(self.tag_names, best)).to_tensor(""),
                "scores": by_word(tf.reduce_max(word_probabilities, axis=-1)).to_tensor(0.0),
                "words": tf.where(present, tf.strings.substr(tf.broadcast_to(text[:, None], tf.shape(byte_start)),
                                                             byte_start, byte_end - byte_start), ""),
                "start": tf.where(present, char[:, :count], -1),
                "end": tf.where(present, char[:, count:], -1),
                "num_words": word_starts.row_lengths()}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class MultipleChoiceModule(tf.Module):
    """Multiple choice on raw text: each (context, ending) pair packed like `run_swag` and scored."""

    def __init__(self, model, preprocessor, name="multiple_choice"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.serve = tf.function(self._serve, input_signature=[_spec("context"), _spec("endings", 2)])

    def _serve(self, context, endings):
        pre = self.preprocessor
        choices = tf.shape(endings)[1]
        packed = trim(pre.serve_pairs(tf.repeat(context, choices), tf.reshape(endings, [-1])))
        inputs = {key: tf.reshape(value, [-1, choices, tf.shape(value)[-1]]) for key, value in packed.items()}
        probabilities = tf.nn.softmax(self.model(inputs)["logits"], axis=-1)
        return {"probabilities": probabilities, "best": tf.argmax(probabilities, axis=-1)}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class MaskedLMModule(tf.Module):
    """`[MASK]` fill-ins on raw text with a pretraining model's MLM head. The literal `[MASK]` is cut out before
    tokenization (which would split it) and replaced by the mask id; masks beyond `seq_length` are dropped."""

    def __init__(self, pretrainer, preprocessor, top_k=5, name="masked_lm"):
        super().__init__(name=name)
        hold(self, "model", pretrainer)
        self.preprocessor, self.top_k = preprocessor, top_k
        self.vocab = tf.constant(preprocessor.tokenizer.vocab)
        self._mask = preprocessor.tokenizer.vocab.index("[MASK]")
        self.serve = tf.function(self._serve, input_signature=[_spec("text")])

    def _serve(self, text):
        pre = self.preprocessor
        parts = tf.strings.split(text, "[MASK]")  # [batch, (parts)]
        pieces = pre.tokenizer(parts.flat_values)  # [parts, (pieces)]
        not_last = tf.not_equal(tf.ragged.range(parts.row_lengths()).flat_values + 1,
                                tf.repeat(parts.row_lengths(), parts.row_lengths()))
        masks = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(tf.cast(not_last, tf.int64))],
                                                         tf.constant(self._mask, tf.int64)),
                                                 tf.cast(not_last, tf.int64))
        ids = parts.with_flat_values(tf.concat([pieces, masks], axis=1)).merge_dims(1, 2)
        inputs = pack_inputs_graph([ids], pre.seq_length, pre._cls, pre._sep)
        is_mask = tf.equal(inputs["input_word_ids"], self._mask)
        positions = tf.ragged.boolean_mask(tf.broadcast_to(tf.range(pre.seq_length), tf.shape(is_mask)), is_mask)
        inputs["masked_lm_positions"] = tf.cast(positions.to_tensor(0), tf.int32)
        logits = self.model(inputs)["mlm_logits"]
        probabilities, top = tf.math.top_k(tf.nn.softmax(logits, axis=-1), self.top_k)
        present = tf.sequence_mask(positions.row_lengths(), tf.shape(top)[1])[:, :, None]
        return {"top_tokens": tf.where(present, tf.gather(self.vocab, top), ""),
                "top_probabilities": tf.where(present, probabilities, 0.0),
                "num_masks": positions.row_lengths()}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class MaskedLMSubModule(tf.Module):
    """The TF-Hub encoder's optional `mlm` sub-object: encoder inputs + `masked_lm_positions` -> `mlm_logits` (and
    the encoder outputs), for exports from a checkpoint that has the MLM head."""

    def __init__(self, pretrainer, name="mlm"):
        super().__init__(name=name)
        hold(self, "model", pretrainer)
        spec = {key: tf.TensorSpec([None, None], tf.int32, name=key)
                for key in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
        self.__call__ = tf.function(self._call, input_signature=[spec])

    def _call(self, inputs):
        return {"mlm_logits": self.model(inputs)["mlm_logits"]}
