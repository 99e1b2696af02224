"""Named-entity recognition on CoNLL-2003-style files (paper section 5.3, fine-tuning approach): a tag per word,
predicted at the word's first word piece (or, with `label_all_subtokens`, trained on every piece), sentences
longer than the model split into windows at word boundaries, entity-level precision/recall/F1.

Files: `train.txt`, `valid.txt`, `test.txt`, one `word ... tag` line per token (the tag in the last column, every
line with the same number of columns), a blank line between sentences, `-DOCSTART-` lines ignored.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import DataError, Task, open_text
from bert_tf.tokenization import pack_inputs

FILES = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}


@dataclasses.dataclass
class Sentence:
    words: list[str]
    tags: list[str]
    line: int  # where it starts, for messages


def read_sentences(path: str) -> list[Sentence]:
    if not os.path.exists(path):
        raise DataError(f"{path}: not found; --data_dir must hold {', '.join(FILES.values())}")
    sentences, words, tags, start = [], [], [], 1
    columns = None  # (count, line): every token line has as many columns as the file's first
    with open_text(path) as f:
        for number, line in enumerate(list(f) + [""], start=1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if words:
                    sentences.append(Sentence(words, tags, start))
                words, tags, start = [], [], number + 1
                continue
            if len(fields) < 2:
                raise DataError(f"{path}:{number}: expected 'word ... tag', got {line.strip()!r}")
            columns = columns or (len(fields), number)
            if len(fields) != columns[0]:
                raise DataError(f"{path}:{number}: {len(fields)} columns, but the file's token lines have "
                                f"{columns[0]} (line {columns[1]}): {line.strip()!r}; a word with a space in it, or a "
                                "missing column?")
            words.append(fields[0])
            tags.append(fields[-1])
    if not sentences:
        raise DataError(f"{path}: no sentences")
    return sentences


def tfds_sentences(name: str, split: str, data_dir: str | None = None) -> list[Sentence]:
    """A prepared TFDS split of a CoNLL-style dataset (`conll2003`: `tokens` and `ner` tags)."""
    import tensorflow_datasets as tfds

    tfds_split = {"dev": "validation"}.get(split, split)
    try:
        dataset, info = tfds.load(name, split=tfds_split, data_dir=data_dir, with_info=True, download=False)
    except Exception as e:  # tfds raises assorted types for "not prepared"
        raise DataError(f"--tfds_name={name}: cannot load split {tfds_split} ({str(e).splitlines()[0]}); prepare "
                        "it with `tfds build` first, or pass --data_dir with the CoNLL files") from None
    names = info.features["ner"].feature.names
    sentences = []
    for index, row in enumerate(tfds.as_numpy(dataset)):
        if len(row["tokens"]) != len(row["ner"]):
            raise DataError(f"--tfds_name={name}: example {index} of {tfds_split} has {len(row['tokens'])} tokens "
                            f"but {len(row['ner'])} tags")
        sentences.append(Sentence([w.decode("utf-8") for w in row["tokens"]], [names[t] for t in row["ner"]],
                                  index + 1))
    if not sentences:
        raise DataError(f"--tfds_name={name}: split {tfds_split} is empty")
    return sentences


@dataclasses.dataclass(frozen=True)
class NerTask(Task):
    """Token tagging; the tag set comes from the training file (kept with the model)."""

    def sentences(self, data_dir: str | None, split: str, tfds_name: str | None = None) -> list[Sentence]:
        if tfds_name:
            return tfds_sentences(tfds_name, split, data_dir)
        if not data_dir:
            raise DataError("give --data_dir (the CoNLL files) or --tfds_name")
        return read_sentences(os.path.join(data_dir, FILES[split]))

    def metrics(self, predictions, labels) -> dict[str, float]:
        return metrics_lib.entity_scores(predictions, labels)


def tag_set(sentences) -> list[str]:
    """The tags of the training data, "O" first, the rest sorted."""
    tags = sorted({tag for s in sentences for tag in s.tags} - {"O"})
    return ["O"] + tags


def check_tags(sentences, tags, path):
    known = set(tags)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag not in known:
                raise DataError(f"{path}:{sentence.line + offset}: tag {tag!r} does not occur in the training data "
                                f"(tags: {', '.join(tags)})")


def windows(sentences, tokenizer, max_seq_length: int):
    """Each sentence as one or more windows of whole words whose pieces fit `max_seq_length - 2`:
    (sentence index, first word, the words' pieces)."""
    budget = max_seq_length - 2
    out = []
    for index, sentence in enumerate(sentences):
        pieces = [tokenizer.tokenize(word) or ["[UNK]"] for word in sentence.words]
        start, used, current = 0, 0, []
        for word_index, word_pieces in enumerate(pieces):
            word_pieces = word_pieces[:budget]
            if current and used + len(word_pieces) > budget:
                out.append((index, start, current))
                start, used, current = word_index, 0, []
            current.append(word_pieces)
            used += len(word_pieces)
        out.append((index, start, current))
    return out


def encode(sentences, tokenizer, tags, max_seq_length, label_all_subtokens=False):
    """(inputs, tag ids [n, seq], weights [n, seq], windows): the tag of a word on its first piece (weight 1), the
    other pieces weight 0 unless `label_all_subtokens` (then they carry the word's tag, B- turned into I-)."""
    index = {tag: i for i, tag in enumerate(tags)}
    spans = windows(sentences, tokenizer, max_seq_length)
    n = len(spans)
    ids = np.zeros((n, max_seq_length), np.int32)
    mask = np.zeros((n, max_seq_length), np.int32)
    labels = np.zeros((n, max_seq_length), np.int32)
    weights = np.zeros((n, max_seq_length), np.float32)
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    for row, (sentence_index, first, words) in enumerate(spans):
        sentence = sentences[sentence_index]
        pieces, position = [], 1
        for offset, word_pieces in enumerate(words):
            tag = sentence.tags[first + offset] if sentence.tags else "O"
            for k, piece_id in enumerate(tokenizer.convert_tokens_to_ids(word_pieces)):
                pieces.append(piece_id)
                if k == 0 or label_all_subtokens:
                    inner = "I-" + tag[2:] if k and tag.startswith("B-") and ("I-" + tag[2:]) in index else tag
                    labels[row, position] = index.get(inner, 0)
                    weights[row, position] = 1.0
                position += 1
        packed = pack_inputs(pieces, None, max_seq_length, cls, sep)
        ids[row], mask[row] = packed["input_word_ids"], packed["input_mask"]
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    return inputs, labels, weights, spans


def word_tags(logits, spans, sentences, tags):
    """Per sentence, the predicted tag of every word (read at its first piece)."""
    predicted = [["O"] * len(s.words) for s in sentences]
    best = logits.argmax(-1)
    for row, (sentence_index, first, words) in enumerate(spans):
        position = 1
        for offset, word_pieces in enumerate(words):
            predicted[sentence_index][first + offset] = tags[int(best[row, position])]
            position += len(word_pieces)
    return predicted
