"""SQuAD v1.1 and v2.0 (paper sections 4.2 and 4.3): examples from the official JSON, windowed features, and the
post-processing from start/end logits back to answer text in the original context.

Features follow the original run_squad.py: the question (at most `max_query_length` word pieces) then a window of
the context, windows `doc_stride` tokens apart; each context token remembers its original word, and whether this
window is the one where the token has the most context on both sides ("max context"), which decides which window
may predict an answer starting there. A span (i, j) scores S·T_i + E·T_j with i <= j; for v2.0 the null answer
scores S·C + E·C at [CLS], and "no answer" wins when null - best non-null exceeds the threshold τ.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.tasks.base import DataError, open_text, tfds_rows
from bert_tf.tokenization import basic_tokenize


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question: str
    doc_tokens: list[str]  # the context split on whitespace, as the original
    answer_text: str = ""
    start_word: int = -1
    end_word: int = -1
    is_impossible: bool = False
    context: str = ""  # the paragraph as given
    start_char: int = -1  # the answer's first and last character in `context` (-1: none)
    end_char: int = -1


def _is_space(ch: str) -> bool:
    return ch in " \t\r\n" or ord(ch) == 0x202F


def read_examples(path: str, is_training: bool, version_2: bool) -> tuple[list[SquadExample], list]:
    """(examples, the file's `data` list). Training answers whose text is not found at their offset are skipped
    with a count and the first ids in the log; a file that is not SQuAD JSON is one clear error."""
    try:
        with open_text(path) as f:
            data = json.load(f)["data"]
    except FileNotFoundError:
        raise DataError(f"{path}: not found") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a SQuAD JSON file with a 'data' list ({e})") from None
    return parse_examples(data, is_training, version_2, path), data


def tfds_data(name: str, split: str, data_dir: str | None = None) -> list:
    """A prepared TFDS SQuAD split (`squad/v1.1`, `squad/v2.0`) as the official JSON's `data` list."""
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir, download=False)
    except Exception as e:  # tfds raises assorted types for "not prepared"
        raise DataError(f"--tfds_name={name}: cannot load split {split} ({str(e).splitlines()[0]}); prepare it "
                        "with `tfds build` first, or pass the SQuAD JSON files") from None
    paragraphs, contexts = [], {}  # one string for each distinct context, however many questions share it
    for row in tfds_rows(dataset):
        answers = [{"text": t.decode("utf-8"), "answer_start": int(a)}
                   for t, a in zip(row["answers"]["text"], row["answers"]["answer_start"])]
        if row["context"] not in contexts:
            contexts[row["context"]] = row["context"].decode("utf-8")
        paragraphs.append({"context": contexts[row["context"]], "qas": [{
            "id": row["id"].decode("utf-8"), "question": row["question"].decode("utf-8"), "answers": answers,
            "is_impossible": bool(row.get("is_impossible", not answers))}]})
    return [{"title": name, "paragraphs": paragraphs}]


def _words(context: str) -> tuple[list[str], list[int]]:
    """The context's whitespace-separated words, and each character's word (-1 before the first), as the
    original."""
    doc_tokens, char_to_word, previous_space = [], [], True
    for ch in context:
        if _is_space(ch):
            previous_space = True
        else:
            if previous_space:
                doc_tokens.append(ch)
            else:
                doc_tokens[-1] += ch
            previous_space = False
        char_to_word.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word


def parse_examples(data: list, is_training: bool, version_2: bool, where: str) -> list[SquadExample]:
    """SQuAD JSON `data` -> examples (see `read_examples`); `where` names the source in messages."""
    path = where
    examples, misaligned = [], []
    # one split of each distinct paragraph, shared by its questions' examples (TFDS has a paragraph per question)
    words_of: dict = {}
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            if context not in words_of:
                words_of[context] = _words(context)
            doc_tokens, char_to_word = words_of[context]
            for qa in paragraph["qas"]:
                example = SquadExample(qa["id"], qa["question"], doc_tokens, context=context)
                if is_training:
                    example.is_impossible = bool(version_2 and qa.get("is_impossible", False))
                    if not example.is_impossible:
                        if len(qa.get("answers", [])) < 1:
                            raise DataError(f"{path}: question {qa['id']} has no answer; for SQuAD 2.0 data pass "
                                            "--version_2_with_negative")
                        answer = qa["answers"][0]
                        start, text = answer["answer_start"], answer["text"]
                        if start < 0 or start + len(text) > len(context) or not text:
                            misaligned.append(str(qa["id"]))
                            continue
                        example.start_word = char_to_word[start]
                        example.end_word = char_to_word[start + len(text) - 1]
                        found = " ".join(doc_tokens[example.start_word:example.end_word + 1])
                        if " ".join(text.split()) not in found:
                            misaligned.append(str(qa["id"]))
                            continue
                        example.answer_text = text
                        example.start_char, example.end_char = start, start + len(text) - 1
                examples.append(example)
    if misaligned:
        logging.warning("%s: skipped %d training question(s) whose answer text is not at its answer_start: %s%s",
                        path, len(misaligned), ", ".join(misaligned[:5]), " ..." if len(misaligned) > 5 else "")
    if not examples:
        raise DataError(f"{path}: no usable questions")
    return examples


@dataclasses.dataclass(eq=False)
class SquadFeature:
    """One window of one example as post-processing reads it: rows of arrays shared by every window (views, not
    copies), where Python lists and dicts per window held several times the model inputs' memory
    (`bench.squad_postprocess`). `token_to_word`, `max_context` and the `input_*` lists give them in the original's
    form, made when read."""
    example_index: int
    ids: np.ndarray  # [seq] the window's input_word_ids
    mask: np.ndarray  # [seq] its input_mask
    type_ids: np.ndarray  # [seq] its input_type_ids
    offset: int  # the window position of its first context piece
    words: np.ndarray  # [its context pieces] each piece's original word index
    best: np.ndarray  # [its context pieces] whether this window is the piece's max-context window
    start_position: int = 0
    end_position: int = 0

    @property
    def input_word_ids(self) -> list[int]:
        return self.ids.tolist()

    @property
    def input_mask(self) -> list[int]:
        return self.mask.tolist()

    @property
    def input_type_ids(self) -> list[int]:
        return self.type_ids.tolist()

    @property
    def token_to_word(self) -> dict:
        """Window position -> original word index, for each context piece."""
        return {self.offset + j: int(word) for j, word in enumerate(self.words)}

    @property
    def max_context(self) -> dict:
        """Window position -> whether this window gives the piece its most context, for each context piece."""
        return {self.offset + j: bool(best) for j, best in enumerate(self.best)}


@functools.lru_cache(maxsize=4)
def _window_function(vocab_file, mtime, size, do_lower_case, max_seq_length, doc_stride, max_query_length):
    """`span_features` as a tf.function over batches of examples, built and traced once per process for a
    vocabulary file (as it is now: `mtime` and `size` are part of the key) and window settings, so run_squad's
    training and prediction share one trace."""
    import tensorflow as tf

    from bert_tf.tasks.span_features import span_features
    from bert_tf.tokenizer_layer import BertTokenizerLayer

    del mtime, size
    layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
    cls, sep = layer.vocab.index("[CLS]"), layer.vocab.index("[SEP]")
    strings = tf.TensorSpec([None], tf.string)
    ints = tf.TensorSpec([None], tf.int64)

    @tf.function(autograph=False, input_signature=[strings, strings, ints, ints, strings])
    def run(question, context, start, end, text):
        out = span_features(layer, cls, sep, question, context, seq_length=max_seq_length,
                            max_query_length=max_query_length, doc_stride=doc_stride, answer_start=start,
                            answer_end=end, answer_text=text)
        query = tf.reduce_max(tf.concat([layer(question)[:, :max_query_length].row_lengths(), [0]], 0))
        return {k: v for k, v in out.items() if k not in ("doc", "piece_start", "piece_end")}, query

    return run


def _window_chunks(examples, vocab_file: str, do_lower_case: bool, max_seq_length: int, doc_stride: int,
                   max_query_length: int, is_training: bool, chunk: int):
    """(index of the chunk's first example, its windows: `span_features`' outputs as NumPy arrays), for `chunk`
    examples at a time."""
    import tensorflow as tf

    stat = fileio.stat(vocab_file)
    run = _window_function(fileio.absolute(vocab_file), stat.st_mtime_ns, stat.st_size, do_lower_case,
                           max_seq_length, doc_stride, max_query_length)
    for begin in range(0, len(examples), chunk):
        part = examples[begin:begin + chunk]
        answered = [is_training and not e.is_impossible and e.start_char >= 0 for e in part]
        out, query = run(tf.constant([e.question for e in part]), tf.constant([e.context for e in part]),
                         tf.constant([e.start_char if a else -1 for e, a in zip(part, answered)], tf.int64),
                         tf.constant([e.end_char if a else -1 for e, a in zip(part, answered)], tf.int64),
                         tf.constant([e.answer_text if a else "" for e, a in zip(part, answered)]))
        if max_seq_length - int(query) - 3 < 1:
            raise DataError(f"--max_seq_length={max_seq_length} leaves no room for the context after a question of "
                            f"{int(query)} pieces; raise it or lower --max_query_length")
        yield begin, {k: v.numpy() for k, v in out.items()}


def _model_arrays(out, is_training: bool) -> dict:
    """A chunk's model inputs, and when `is_training` its labels `start_logits` / `end_logits`."""
    arrays = {key: out[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}
    if is_training:
        arrays.update(start_logits=out["start_positions"].astype(np.int32),
                      end_logits=out["end_positions"].astype(np.int32))
    return arrays


def _concatenate(parts: list, max_seq_length: int, is_training: bool) -> dict:
    """The chunks' arrays (emptied on the way) joined, one key at a time, so at most one key is held twice."""
    keys = ("input_word_ids", "input_mask", "input_type_ids") + (("start_logits", "end_logits") if is_training else ())
    if not parts:
        return {k: np.zeros((0, max_seq_length) if k.startswith("input") else (0,), np.int32) for k in keys}
    return {k: np.concatenate([part.pop(k) for part in parts]) for k in keys}  # each chunk's copy freed as it goes


def window_arrays(examples, vocab_file: str, do_lower_case: bool = True, max_seq_length=384, doc_stride=128,
                  max_query_length=64, is_training=False, chunk: int = 256) -> dict:
    """`window_features`' `arrays` alone: the model inputs (and when `is_training` the labels) of every window,
    without the per-window `SquadFeature`s that only post-processing reads, which hold several times the arrays'
    memory in Python objects (`bench.squad_features`)."""
    parts = [_model_arrays(out, is_training) for _, out in _window_chunks(
        examples, vocab_file, do_lower_case, max_seq_length, doc_stride, max_query_length, is_training, chunk)]
    return _concatenate(parts, max_seq_length, is_training)


def window_features(examples, vocab_file: str, do_lower_case: bool = True, max_seq_length=384, doc_stride=128,
                    max_query_length=64, is_training=False, chunk: int = 256) -> tuple[list[SquadFeature], dict]:
    """Examples -> (features, arrays): one feature per window (one example may give several), made by the in-graph
    `bert_tf.tasks.span_features.span_features` that the export also runs; `arrays` holds the model inputs and,
    when `is_training`, the labels `start_logits` / `end_logits`, and the features' `ids`, `mask` and `type_ids`
    are rows of them. Examples go through the graph `chunk` at a time. Training needs `arrays` alone:
    `window_arrays`."""
    windows, parts = [], []  # per window: (example, offset, words, best, start, end), its rows of the arrays later
    for begin, out in _window_chunks(examples, vocab_file, do_lower_case, max_seq_length, doc_stride,
                                     max_query_length, is_training, chunk):
        parts.append(_model_arrays(out, is_training))
        word, best = out["word"].astype(np.int32), out["max_context"]
        for w in range(len(out["example"])):
            length = int(out["length"][w])
            windows.append((begin + int(out["example"][w]), int(out["offset"][w]), word[w, :length],
                            best[w, :length], int(out["start_positions"][w]), int(out["end_positions"][w])))
    arrays = _concatenate(parts, max_seq_length, is_training)
    rows = zip(arrays["input_word_ids"], arrays["input_mask"], arrays["input_type_ids"])
    features = [SquadFeature(example, ids, mask, type_ids, offset, words, best, start, end)
                for (example, offset, words, best, start, end), (ids, mask, type_ids) in zip(windows, rows)]
    return features, arrays


# ------------------------------------------------------------------------------------------- post-processing
def final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """Map the de-tokenized prediction back onto the original words' text (keeping their case and punctuation),
    as the original `get_final_text`: align the two with the spaces removed; fall back to `orig_text`."""
    tokenized = " ".join(basic_tokenize(orig_text, do_lower_case))
    start = tokenized.find(pred_text)
    end = start + len(pred_text) - 1
    unaligned = len(orig_text) - orig_text.count(" ") != len(tokenized) - tokenized.count(" ")  # without spaces
    if start == -1 or not pred_text or unaligned or tokenized[start] == " " or tokenized[end] == " ":
        return orig_text
    kept = [i for i, ch in enumerate(orig_text) if ch != " "]  # position without spaces -> position in orig_text
    return orig_text[kept[start - tokenized.count(" ", 0, start)]:kept[end - tokenized.count(" ", 0, end)] + 1]


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    return [e / sum(exps) for e in exps]


def _best_indexes(logits, n):
    """The `n` positions of the largest logits, a lower position first among equal ones (the original sorts its
    (position, logit) pairs stably)."""
    return np.argsort(-np.asarray(logits, np.float64), kind="stable")[:n].tolist()


def postprocess(examples, features, start_logits, end_logits, tokenizer, *, n_best_size=20, max_answer_length=30,
                version_2=False, null_threshold=0.0, do_lower_case=True):
    """(predictions, best non-null predictions, n-best lists, null odds): answer text per question id, as the
    original's `write_predictions` makes them: logits as Python floats (sums in double precision), candidates in
    window, start, end order and sorted stably (ties go to the earlier one), the null answer (the windows' lowest
    [CLS] score) among the candidates before the n-best cut, and appended after it when it did not make it.

    `predictions` applies the v2.0 threshold (empty text when null - best non-null > `null_threshold`);
    `best_non_null` does not, for the threshold search; `null_odds` holds null - best non-null per question. Where
    the original fails (v2.0 with no valid non-null span), the best non-null score is taken as -1e9.
    """
    broken = int(np.sum(~np.isfinite(start_logits).all(-1) | ~np.isfinite(end_logits).all(-1)))
    if broken:
        raise ValueError(f"the model's start or end logits are not finite (NaN or infinite) in {broken} of "
                         f"{len(features)} window(s): it has diverged, and no answer can be read from them")
    by_example = collections.defaultdict(list)
    for index, feature in enumerate(features):
        by_example[feature.example_index].append(index)
    predictions, best_non_null, nbest_json, null_odds = {}, {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates, null = [], None  # (window or None for the null answer, start, end, start logit, end logit)
        for index in by_example[example_index]:
            feature = features[index]
            starts, ends = start_logits[index], end_logits[index]
            if version_2 and (null is None or float(starts[0]) + float(ends[0]) < null[3] + null[4]):
                null = (None, 0, 0, float(starts[0]), float(ends[0]))
            s, e = (np.asarray(_best_indexes(logits, n_best_size), np.int64) for logits in (starts, ends))
            js, je = s - feature.offset, e - feature.offset  # as context pieces of the window
            start_ok, end_ok = ((j >= 0) & (j < len(feature.words)) for j in (js, je))
            start_ok[start_ok] = feature.best[js[start_ok]]  # and this window is the start's max-context one
            keep = (start_ok[:, None] & end_ok[None, :] & (e[None, :] >= s[:, None])
                    & (e[None, :] - s[:, None] < max_answer_length))
            for i, j in zip(*np.nonzero(keep)):  # in the original's order: by start, then by end
                candidates.append((index, int(s[i]), int(e[j]), float(starts[s[i]]), float(ends[e[j]])))
        if null is not None:
            candidates.append(null)
        candidates.sort(key=lambda c: c[3] + c[4], reverse=True)
        nbest, seen = [], set()
        for index, s, e, start_logit, end_logit in candidates:
            if len(nbest) >= n_best_size:
                break
            text = ""
            if index is not None:
                feature = features[index]
                pieces = tokenizer.convert_ids_to_tokens(feature.ids[s:e + 1].tolist())
                piece_text = " ".join(pieces).replace(" ##", "").replace("##", "")
                piece_text = " ".join(piece_text.strip().split())
                first, last = feature.words[s - feature.offset], feature.words[e - feature.offset]
                words = example.doc_tokens[first:last + 1]
                text = final_text(piece_text, " ".join(words), do_lower_case)
                if text in seen:
                    continue
            seen.add(text)
            nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit})
        if null is not None and "" not in seen:
            nbest.append({"text": "", "start_logit": null[3], "end_logit": null[4]})
        if not nbest:
            nbest = [{"text": "empty", "start_logit": 0.0, "end_logit": 0.0}]
        for item, probability in zip(nbest, _softmax([i["start_logit"] + i["end_logit"] for i in nbest])):
            item["probability"] = probability
        non_null = next((item for item in nbest if item["text"]), None)
        best_non_null[example.qas_id] = non_null["text"] if non_null else ""
        if version_2:
            null_score = null[3] + null[4]
            diff = null_score - non_null["start_logit"] - non_null["end_logit"] if non_null else null_score + 1e9
            null_odds[example.qas_id] = diff
            predictions[example.qas_id] = "" if diff > null_threshold else best_non_null[example.qas_id]
        else:
            predictions[example.qas_id] = nbest[0]["text"]
        nbest_json[example.qas_id] = [{key: item[key] for key in ("text", "probability", "start_logit", "end_logit")}
                                      for item in nbest]
    return predictions, best_non_null, nbest_json, null_odds
