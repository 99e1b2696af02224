"""Named-entity recognition on CoNLL-2003-style files (paper section 5.3, fine-tuning approach): a tag per word,
predicted at the word's first word piece (or, with `label_all_subtokens`, trained on every piece), entity-level
precision/recall/F1. The features (windows of word pieces) are `bert_tf.tasks.tag_features`.

Files: `train.txt`, `valid.txt`, `test.txt`, one `word ... tag` line per token (the tag in the last column, every
line with the same number of columns), a blank line between sentences, a `-DOCSTART-` line before each document.
The documents are kept: the paper encodes each sentence with "the maximal document context provided by the data"
(`run_ner --document_context`, `tag_features.SentenceEncoder`).
"""

from __future__ import annotations

import dataclasses
import os

from bert_tf import fileio
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import DataError, Task, open_text, tfds_rows

FILES = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}


@dataclasses.dataclass
class Sentence:
    words: list[str]
    tags: list[str]
    line: int  # where it starts, for messages
    document: int | None = None  # consecutive sentences with the same number are one document; None: not marked


def marks_documents(sentences) -> bool:
    return any(s.document is not None for s in sentences)


def read_sentences(path: str) -> list[Sentence]:
    if not fileio.exists(path):
        raise DataError(f"{path}: not found; --data_dir must hold {', '.join(FILES.values())}")
    sentences, words, tags, start = [], [], [], 1
    document, marked = 0, False  # sentences before the first -DOCSTART- line are a document too
    columns = None  # (count, line): every token line has as many columns as the file's first
    with open_text(path) as f:
        for number, line in enumerate(list(f) + [""], start=1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if words:
                    sentences.append(Sentence(words, tags, start, document))
                words, tags, start = [], [], number + 1
                if fields and sentences and sentences[-1].document == document:
                    document += 1
                marked = marked or bool(fields)
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
    if not marked:  # no -DOCSTART- line: the file does not say which sentences belong together
        for sentence in sentences:
            sentence.document = None
    return sentences


def tfds_sentences(name: str, split: str, data_dir: str | None = None) -> list[Sentence]:
    """A prepared TFDS split of a CoNLL-style dataset (`conll2003`: `tokens` and `ner` tags). Its builder drops the
    `-DOCSTART-` lines, so no documents are marked; it ends each file with an empty example, which is skipped."""
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
        prepared = set(builder.info.splits.keys())
        # conll2003 names its valid.txt split "dev"; other builders say "validation"
        tfds_split = next((s for s in ({"dev": ("dev", "validation")}.get(split, (split,))) if s in prepared), split)
        dataset = builder.as_dataset(split=tfds_split)
    except Exception as e:  # tfds raises assorted types for "not prepared"
        raise DataError(f"--tfds_name={name}: cannot load split {split} ({str(e).splitlines()[0]}); prepare "
                        "it with `tfds build` first, or pass --data_dir with the CoNLL files") from None
    names = builder.info.features["ner"].feature.names
    sentences = []
    for index, row in enumerate(tfds_rows(dataset)):
        if len(row["tokens"]) != len(row["ner"]):
            raise DataError(f"--tfds_name={name}: example {index} of {tfds_split} has {len(row['tokens'])} tokens "
                            f"but {len(row['ner'])} tags")
        if len(row["tokens"]):
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
        return metrics_lib.entity_report(predictions, labels)["all"]

    def report(self, predictions, labels) -> dict[str, float]:
        """`metrics` and each entity type's precision, recall, F1 and gold count (`<type>_f1`, ...), as the
        results files hold them."""
        report = metrics_lib.entity_report(predictions, labels)
        return {**report.pop("all"), **{f"{kind}_{name}": value for kind, figures in report.items()
                                        for name, value in figures.items()}}


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
