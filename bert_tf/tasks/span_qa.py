"""The span-QA family: extractive question answering as SQuAD v1.1 and v2.0 (paper sections 4.2 and 4.3).

`run_squad` fine-tunes and predicts as the original run_squad.py; its windows and labels, and the exported
`SpanQAModule`'s windows, all come from one in-graph function, `bert_tf.tasks.span_features.span_features` (held
equal to the original algorithm by the tests). `SpanQAModule` also picks answers by `squad.postprocess`'s rules,
which the tests hold equal to `run_squad`'s predictions.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from bert_tf import fileio, finetuning
from bert_tf.config import check_fits
from bert_tf.serving import hold, string_spec
from bert_tf.tasks import squad, squad_eval, windows
from bert_tf.tasks.base import DataError, Family
from bert_tf.tasks.span_features import span_features
from bert_tf.tokenization import drop_invalid_utf8
from bert_tf.training import write_results

SPAN_LOSS_WEIGHTS = {"start_logits": 0.5, "end_logits": 0.5}  # run_squad.py: (start_loss + end_loss) / 2
NEG = -1e30  # "no candidate" score: finite, so that serving JSON stays valid


class SpanQA(Family):
    kinds = ("span_qa",)
    export_kind = "span_qa"
    program = "run_squad"
    export_flags = frozenset({"doc_stride"})

    def build_model(self, task, config, dropout_rate: float, dtype=None, bilstm_head: bool = False):
        from bert_tf.models import BertEncoder, BertSpanQA

        return BertSpanQA(BertEncoder(config, dtype=dtype), dropout_rate=dropout_rate, bilstm_head=bilstm_head)

    def serving_module(self, model, info, preprocessor, *, doc_stride, scratch):
        return SpanQAModule(model, preprocessor, max_query_length=info.max_query_length,
                            doc_stride=info.doc_stride if doc_stride is None else doc_stride,
                            max_answer_length=info.max_answer_length,
                            version_2=info.version_2_with_negative, null_threshold=info.null_score_diff_threshold)


FAMILY = SpanQA()


@dataclasses.dataclass(frozen=True)
class SquadOptions(finetuning.FinetuneOptions):
    """`run_squad`'s settings: the original run_squad.py's defaults. `null_score_diff_threshold` None means: search
    τ on the predict file when it has answers (SQuAD 2.0), save it with the model, and use it."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float | None = None
    dropout_rate: float = 0.0  # on the token features; the original's span head has none
    bilstm_head: bool = False  # the paper's "+ BiLSTM" (Table 5): a BiLSTM between the encoder and the span head

    dev_flag = "do_predict"

    def check(self, replicas: int = 1, output_dir: str | None = None):
        if not (self.do_train or self.do_predict):
            raise ValueError("at least one of --do_train and --do_predict must be set")
        for flag in ("doc_stride", "max_query_length"):  # 0 would never move a window, or drop every question
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag}={getattr(self, flag)} must be at least 1")
        if self.null_score_diff_threshold is not None and not self.version_2_with_negative:
            raise ValueError(f"--null_score_diff_threshold={self.null_score_diff_threshold} is SQuAD 2.0's; add "
                             "--version_2_with_negative, or leave it out")
        self.check_training(replicas, output_dir)


def run_squad(config, vocab_file: str, output_dir: str, options: SquadOptions, train_file: str | None = None,
              predict_file: str | None = None, strategy=None, tfds_name: str | None = None,
              tfds_data_dir: str | None = None) -> dict:
    """Fine-tunes on SQuAD and/or predicts, as the original run_squad.py: writes `predictions.json`,
    `nbest_predictions.json`, `null_odds.json` (2.0), and with answers in the predict file the official figures in
    `eval_results.txt`. With `tfds_name` (e.g. "squad/v1.1", prepared) its train and validation splits replace the
    files. Returns the figures."""
    from bert_tf.tokenization import FullTokenizer

    from bert_tf.tasks import task_info

    info = task_info.read(output_dir) if not options.do_train else None
    if info is not None and info.version_2_with_negative is not None:  # predicting alone: as the model was trained
        if options.version_2_with_negative:
            finetuning.refuse_other_than_saved(output_dir, "version_2_with_negative", True,
                                               info.version_2_with_negative)
        options = dataclasses.replace(options, version_2_with_negative=info.version_2_with_negative)
    strategy = strategy or tf.distribute.get_strategy()
    options.check(strategy.num_replicas_in_sync, output_dir)
    check_fits(config, vocab_file, options.max_seq_length, do_lower_case=options.do_lower_case)
    tokenizer = FullTokenizer(vocab_file, do_lower_case=options.do_lower_case)
    version_2 = options.version_2_with_negative
    convert = dict(max_seq_length=options.max_seq_length, doc_stride=options.doc_stride,
                   max_query_length=options.max_query_length, do_lower_case=options.do_lower_case)
    def source(path, split, is_training):
        if tfds_name:
            data = squad.tfds_data(tfds_name, split, tfds_data_dir)
            return squad.parse_examples(data, is_training, version_2, f"{tfds_name}:{split}"), data
        if not path:
            flag = "train" if is_training else "predict"
            raise DataError(f"--do_{flag} needs --{flag}_file (or --tfds_name)")
        return squad.read_examples(path, is_training, version_2)

    train_examples = source(train_file, "train", True)[0] if options.do_train else None
    if options.do_predict:
        predict_examples, predict_data = source(predict_file, "validation", False)
        predict_features, predict_inputs = squad.window_features(predict_examples, vocab_file, **convert)
        has_answers = any(qa.get("answers") for a in predict_data for p in a["paragraphs"] for qa in p["qas"])
        scored_as_v2 = version_2 or squad_eval.has_unanswerable(predict_data)  # v2.0's script's rules
        cells = len(finetuning.grid(options))
        if options.do_train and cells > 1 and not has_answers:
            raise DataError(f"--predict_file={predict_file or tfds_name}: no answers to score the grid's {cells} "
                            "cells by; give a predict file with answers, or one value per grid flag")
    fileio.makedirs(output_dir)
    results: dict = {}

    def predict(model, threshold):
        outputs = finetuning.predict(model, predict_inputs, options.predict_batch_size)
        return squad.postprocess(predict_examples, predict_features, outputs["start_logits"],
                                 outputs["end_logits"], tokenizer, n_best_size=options.n_best_size,
                                 max_answer_length=options.max_answer_length, version_2=version_2,
                                 null_threshold=threshold, do_lower_case=options.do_lower_case)

    def figures(model):
        threshold = options.null_score_diff_threshold
        predictions, best_non_null, nbest, null_odds = predict(model, 0.0 if threshold is None else threshold)
        scores = {}
        if has_answers:
            if version_2 and threshold is None:  # the τ search on this data
                scores["best_f1"], threshold = squad_eval.best_threshold(predict_data, best_non_null, null_odds)
                scores["best_f1_thresh"] = threshold
                predictions = {q: "" if null_odds[q] > threshold else best_non_null[q] for q in best_non_null}
            scores.update(squad_eval.evaluate(predict_data, predictions, version_2=scored_as_v2))
        return scores, (predictions, nbest, null_odds), threshold

    build = lambda: FAMILY.build_model(None, config, options.dropout_rate, options.policy,  # noqa: E731
                                       bilstm_head=options.bilstm_head)
    grid = None
    if options.do_train:
        inputs = squad.window_arrays(train_examples, vocab_file, is_training=True, **convert)
        questions = len(train_examples)  # the original counts its steps from them, not from their windows
        del train_examples  # training reads the windows' arrays alone
        labels = finetuning.as_tensors({key: inputs.pop(key) for key in ("start_logits", "end_logits")})
        inputs = finetuning.as_tensors(inputs)
        grid = finetuning.grid_search(
            options, output_dir,
            lambda cell, directory: finetuning.fit(build, inputs, labels, options, cell, strategy, directory,
                                                   loss_weights=SPAN_LOSS_WEIGHTS, examples=questions),
            lambda m: figures(m)[0] if options.do_predict and has_answers else {}, "f1", build,
            finetuning.training_data(squad_task(version_2).name, inputs, labels))
        results.update(grid.figures())
        model = grid.model
    else:
        model = finetuning.existing_model(output_dir, build, options, config, vocab_file)
        if options.bilstm_head and not model.bilstm_head:
            raise DataError(f"--bilstm_head: the model in {output_dir} was trained without it; predict without "
                            "the flag (a model keeps its own head), or train one with it")

    threshold = options.null_score_diff_threshold
    if options.do_predict:
        if threshold is None and not has_answers and not options.do_train:
            threshold = _saved_threshold(output_dir)
            options = dataclasses.replace(options, null_score_diff_threshold=threshold)
        scores, (predictions, nbest, null_odds), threshold = figures(model)
        finetuning.write_json(os.path.join(output_dir, "predictions.json"), predictions)
        finetuning.write_json(os.path.join(output_dir, "nbest_predictions.json"), nbest)
        if version_2:
            finetuning.write_json(os.path.join(output_dir, "null_odds.json"), null_odds)
        if scores:
            write_results(os.path.join(output_dir, "eval_results.txt"),
                          {**scores, **finetuning.global_step(grid, output_dir)})
        results["predict"] = scores
    if options.do_train:
        finetuning.save(grid, squad_task(version_2), config, vocab_file, output_dir, options,
                        doc_stride=options.doc_stride, max_query_length=options.max_query_length,
                        max_answer_length=options.max_answer_length, version_2_with_negative=version_2,
                        null_score_diff_threshold=threshold if version_2 else None,
                        bilstm_head=options.bilstm_head or None)
    return results


def squad_task(version_2: bool):
    from bert_tf.tasks import get_task

    return get_task("squad2" if version_2 else "squad")


def _saved_threshold(directory):
    from bert_tf.tasks import task_info

    info = task_info.read(directory)
    value = info.null_score_diff_threshold if info is not None else None
    return 0.0 if value is None else float(value)


# ------------------------------------------------------------------------------------------------- serving
class SpanQAModule(tf.Module):
    """Extractive QA on raw text (see the module docstring). Exact with the library's `run_squad` prediction
    (`bert_tf.tasks.squad.window_features` + `postprocess`): the same windows, top-`n_best_size` starts and ends,
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
        self.serve = tf.function(self._serve, autograph=False,
                                 input_signature=[string_spec("question"), string_spec("context")])

    def _serve(self, question, context):
        pre = self.preprocessor
        seq = pre.seq_length
        context = drop_invalid_utf8(context)  # what the tokenizer reads, so that its offsets are into this text
        features = span_features(pre.tokenizer, pre._cls, pre._sep, question, context, seq_length=seq,
                                 max_query_length=self.max_query_length, doc_stride=self.doc_stride)
        doc, starts, ends = features["doc"], features["piece_start"], features["piece_end"]
        example, first, length = features["example"], features["first"], features["length"]
        outputs = self.model({key: features[key] for key in ("input_word_ids", "input_mask", "input_type_ids")})
        start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]  # [W, seq]
        offset = features["offset"]  # position of the window's first context piece
        best_context = features["max_context"]  # [W, seq], by context position

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
