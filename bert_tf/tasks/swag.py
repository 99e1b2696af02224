"""SWAG (paper section 4.4): a sentence and four possible continuations; the model scores `[CLS] sent1 [SEP]
sent2 ending [SEP]` for each and a softmax over the four picks one. Reads the SWAG CSV files (train.csv, val.csv,
test.csv with columns sent1, sent2, ending0-3, label)."""

from __future__ import annotations

import csv
import dataclasses
import os

from absl import logging

from bert_tf import fileio
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import DataError, Example, Task, open_text

FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}
ENDINGS = tuple(f"ending{i}" for i in range(4))


@dataclasses.dataclass(frozen=True)
class SwagTask(Task):
    """Multiple choice over four endings; the label is the index of the right one; accuracy."""

    def examples(self, data_dir: str, split: str) -> list[Example]:
        path = os.path.join(data_dir, FILES[split])
        if not fileio.exists(path):
            raise DataError(f"{path}: not found; --data_dir must hold SWAG's {', '.join(FILES.values())}")
        examples, malformed = [], 0
        with open_text(path) as f:
            reader = csv.DictReader(f)
            missing = {"sent1", "sent2", *ENDINGS} - set(reader.fieldnames or ())
            if missing:
                raise DataError(f"{path}: not a SWAG file (no column {', '.join(sorted(missing))})")
            for number, row in enumerate(reader, start=2):
                if any(row.get(key) is None for key in ("sent1", "sent2", *ENDINGS)):
                    malformed += 1
                    continue
                label = row.get("label") or None
                if label is not None and label not in self.labels:
                    raise DataError(f"{path}:{number}: label {label!r} is not one of {list(self.labels)}")
                guid = row.get("") or row.get("fold-ind") or f"{split}-{number}"
                examples.append(Example(guid, row["sent1"], label=label,
                                        choices=tuple(f"{row['sent2']} {row[key]}" for key in ENDINGS)))
        if malformed:
            logging.warning("%s: skipped %d malformed line(s)", path, malformed)
        if not examples:
            raise DataError(f"{path}: no usable examples")
        return examples

    def metrics(self, predictions, labels) -> dict[str, float]:
        return {"accuracy": metrics_lib.accuracy(predictions, labels)}
