"""XNLI in the original run_classifier.py's input format: training on the machine-translated MultiNLI of one
language (`multinli/multinli.train.<lang>.tsv`), evaluation on that language's rows of `xnli.dev.tsv`
(and `xnli.test.tsv`)."""

from __future__ import annotations

import csv
import dataclasses
import os
import sys

from absl import logging

from bert_tf import fileio
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import DataError, Example, Task, malformed_test_row, open_text

LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")


@dataclasses.dataclass(frozen=True)
class XnliTask(Task):
    language: str = "zh"

    def examples(self, data_dir: str, split: str) -> list[Example]:
        csv.field_size_limit(sys.maxsize)
        if split == "train":
            path = os.path.join(data_dir, "multinli", f"multinli.train.{self.language}.tsv")
            rows, columns = self._rows(path), 3
            examples = [Example(f"train-{n}", row[0], row[1], self._label(row[2], path, n))
                        for n, row in rows if len(row) >= columns]
        else:
            path = os.path.join(data_dir, f"xnli.{split}.tsv")
            rows, columns = self._rows(path), 8
            examples = [Example(f"{split}-{n}", row[6], row[7], self._label(row[1], path, n))
                        for n, row in rows if len(row) >= columns and row[0] == self.language]
        short = [n for n, row in rows if 0 < len(row) < columns]  # a blank line is no row
        # a short test row of this language would shift its predictions; another language's is not predicted
        ours = [n for n, row in rows if 0 < len(row) < columns and row[0] == self.language]
        if ours and split.startswith("test"):
            found = next(len(row) for n, row in rows if n == ours[0])
            raise DataError(malformed_test_row(path, ours[0], found, columns))
        malformed = len(short)
        if malformed:  # as the GLUE readers say it
            logging.warning("%s: skipped %d malformed line(s) with too few columns", path, malformed)
        if not examples:
            raise DataError(f"{path}: no usable examples for language {self.language!r}")
        return examples

    def _rows(self, path):
        if not fileio.exists(path):
            raise DataError(f"{path}: not found; --data_dir must hold XNLI (xnli.dev.tsv) and the translated "
                            "MultiNLI (multinli/multinli.train.<lang>.tsv)")
        with open_text(path) as f:
            return [(n, row) for n, row in enumerate(csv.reader(f, delimiter="\t", quotechar=None), start=1)
                    if n > 1]

    def _label(self, value, path, number):
        value = "contradiction" if value == "contradictory" else value  # the translated MultiNLI's spelling
        if value not in self.labels:
            raise DataError(f"{path}:{number}: label {value!r} is not one of {list(self.labels)}")
        return value

    def metrics(self, predictions, labels) -> dict[str, float]:
        return {"accuracy": metrics_lib.accuracy(predictions, labels)}
