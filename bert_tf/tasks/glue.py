"""The GLUE tasks (paper section 4.1): their TSV files as distributed by the GLUE benchmark, or their TFDS copies,
their labels and official metrics, and the GLUE submission format of test predictions.

Each task is a `GlueTask` with a column spec per split; the readers skip malformed rows of training and dev files
(QQP has a few) with a count in the log, and stop with a message naming file and line when a label is not one of the
task's, or when a test file has a malformed row (its predictions are one line per row, and a skipped row would move
every later line onto the wrong example).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys

from absl import logging

from bert_tf import fileio, staging
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import DataError, Example, Task, malformed_test_row, open_text, tfds_rows

_METRICS = {"accuracy": metrics_lib.accuracy, "f1": metrics_lib.f1, "mcc": metrics_lib.matthews_corrcoef,
            "pearson": metrics_lib.pearson, "spearman": metrics_lib.spearman}


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a split's fields are in its TSV: column indexes of text A, text B (None: single sentence) and the
    label (None: unlabelled), the id column (None: the line number) and whether the first line is a header."""

    text_a: int
    text_b: int | None
    label: int | None
    guid: int | None = None
    header: bool = True


@dataclasses.dataclass(frozen=True)
class GlueTask(Task):
    """A GLUE task: `files` maps split -> TSV name, `columns` split -> `Columns` ("train" also serves "dev");
    `tfds` is its TFDS name with the feature keys of text A and B; `submission` the file names of the GLUE
    server's test predictions per test split."""

    files: dict = dataclasses.field(default_factory=dict)
    columns: dict = dataclasses.field(default_factory=dict)
    tfds: tuple = ()
    submission: dict = dataclasses.field(default_factory=dict)

    # ---------------------------------------------------------------------------------------------- reading
    def examples(self, data_dir: str, split: str) -> list[Example]:
        if split not in self.files:
            raise DataError(f"{self.name} has no split {split!r}; it has {', '.join(self.files)}")
        path = os.path.join(data_dir, self.files[split])
        if not fileio.exists(path):
            raise DataError(f"{path}: not found; --data_dir must hold the GLUE files of {self.name} "
                            f"({', '.join(self.files.values())})")
        columns = self.columns.get(split) or self.columns[split.split("_")[0] if split.startswith("test") else
                                                           "train"]
        examples, malformed = [], 0
        csv.field_size_limit(sys.maxsize)
        with open_text(path) as f:
            for number, row in enumerate(csv.reader(f, delimiter="\t", quotechar=None), start=1):
                if columns.header and number == 1:
                    continue
                needed = max(c for c in (columns.text_a, columns.text_b, columns.label, columns.guid)
                             if c is not None)  # a label at -1 (the last column) needs no more
                if not row:  # a blank line: no example and nothing to shift, as at the end of a file
                    continue
                if len(row) <= needed:
                    if split.startswith("test"):
                        raise DataError(malformed_test_row(path, number, len(row), needed + 1))
                    malformed += 1
                    continue
                label = None if columns.label is None else row[columns.label]
                examples.append(Example(guid=row[columns.guid] if columns.guid is not None else f"{split}-{number}",
                                        text_a=row[columns.text_a],
                                        text_b=None if columns.text_b is None else row[columns.text_b],
                                        label=self._label(label, path, number)))
        if malformed:
            logging.warning("%s: skipped %d malformed line(s) with too few columns", path, malformed)
        if not examples:
            raise DataError(f"{path}: no usable examples ({malformed} malformed line(s))")
        return examples

    def _label(self, value, path, number):
        if value is None:
            return None
        if self.regression:
            try:
                return float(value)
            except ValueError:
                raise DataError(f"{path}:{number}: score {value!r} is not a number") from None
        if value not in self.labels:
            raise DataError(f"{path}:{number}: label {value!r} is not one of {self.name}'s labels "
                            f"{list(self.labels)}")
        return value

    def tfds_examples(self, tfds_name: str, split: str, data_dir: str | None = None) -> list[Example]:
        """Examples from the TFDS copy (`--tfds_name=glue/mrpc`), which must already be downloaded."""
        import tensorflow_datasets as tfds

        tfds_split = {"dev": "validation", "test": "test", "train": "train", "dev_mismatched":
                      "validation_mismatched", "test_mismatched": "test_mismatched"}[split]
        if self.name == "mnli" and split in ("dev", "test"):
            tfds_split += "_matched"
        try:
            dataset, info = tfds.load(tfds_name, split=tfds_split, data_dir=data_dir, with_info=True,
                                      download=False)
        except Exception as e:  # tfds raises assorted types for "not prepared"
            raise DataError(f"--tfds_name={tfds_name}: cannot load split {tfds_split} ({str(e).splitlines()[0]}); "
                            "prepare it with `tfds build` first, or pass --data_dir with the GLUE files") from None
        key_a, key_b = self.tfds
        label_feature = info.features["label"]
        examples = []
        for row in tfds_rows(dataset):
            raw = row["label"]
            if self.regression:
                label = float(raw) if split.startswith(("train", "dev")) else None
            elif raw < 0:
                label = None
            else:
                name = label_feature.int2str(int(raw))
                label = name if name in self.labels else str(int(raw))  # 0/1 tasks name their classes in TFDS
            examples.append(Example(guid=str(row["idx"]), text_a=row[key_a].decode("utf-8"),
                                    text_b=row[key_b].decode("utf-8") if key_b else None,
                                    label=self._label(label, tfds_name, int(row["idx"]))))
        if not examples:
            raise DataError(f"--tfds_name={tfds_name}: split {tfds_split} is empty")
        # TFDS stores a split in an order of its own; `idx` is the row's place in the GLUE file, whose order the
        # test predictions (test_results.tsv) follow
        return sorted(examples, key=lambda example: int(example.guid))

    # ---------------------------------------------------------------------------------------------- scoring
    def metrics(self, predictions, labels) -> dict[str, float]:
        return {name: _METRICS[name](predictions, labels) for name in self.metric_names}

    def write_submission(self, directory: str, split: str, guids, predictions) -> str:
        """The GLUE server's format: `index<TAB>prediction`, labels by name (STS-B: the score in [0, 5])."""
        fileio.makedirs(directory)
        path = os.path.join(directory, self.submission[split])
        with staging.atomic_write(path) as f:
            f.write("index\tprediction\n")
            for guid, prediction in zip(guids, predictions):
                value = f"{min(max(float(prediction), 0.0), 5.0):.3f}" if self.regression \
                    else self.labels[int(prediction)]
                f.write(f"{guid}\t{value}\n")
        return path


_PAIR_TEST = Columns(text_a=1, text_b=2, label=None, guid=0)
_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")

TASKS = [
    GlueTask("cola", labels=_BINARY, metric_names=("mcc", "accuracy"), main_metric="mcc",
             files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(3, None, 1, header=False), "test": Columns(1, None, None, guid=0)},
             tfds=("sentence", None), submission={"test": "CoLA.tsv"}),
    GlueTask("sst-2", labels=_BINARY, files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(0, None, 1), "test": Columns(1, None, None, guid=0)},
             tfds=("sentence", None), submission={"test": "SST-2.tsv"}),
    GlueTask("mrpc", labels=_BINARY, metric_names=("accuracy", "f1"), main_metric="f1",
             files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(3, 4, 0), "test": Columns(3, 4, None, guid=0)},
             tfds=("sentence1", "sentence2"), submission={"test": "MRPC.tsv"}),
    GlueTask("sts-b", regression=True, metric_names=("pearson", "spearman"), main_metric="spearman",
             files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(7, 8, 9), "test": Columns(7, 8, None, guid=0)},
             tfds=("sentence1", "sentence2"), submission={"test": "STS-B.tsv"}),
    GlueTask("qqp", labels=_BINARY, metric_names=("accuracy", "f1"), main_metric="f1",
             files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(3, 4, 5), "test": _PAIR_TEST},
             tfds=("question1", "question2"), submission={"test": "QQP.tsv"}),
    GlueTask("mnli", labels=("contradiction", "entailment", "neutral"),
             splits=("train", "dev", "test", "dev_mismatched", "test_mismatched"),
             files={"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv",
                    "dev_mismatched": "dev_mismatched.tsv", "test_mismatched": "test_mismatched.tsv"},
             columns={"train": Columns(8, 9, -1), "test": Columns(8, 9, None, guid=0)},
             tfds=("premise", "hypothesis"), submission={"test": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
    GlueTask("qnli", labels=_NLI, files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(1, 2, 3), "test": _PAIR_TEST},
             tfds=("question", "sentence"), submission={"test": "QNLI.tsv"}),
    GlueTask("rte", labels=_NLI, files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(1, 2, 3), "test": _PAIR_TEST},
             tfds=("sentence1", "sentence2"), submission={"test": "RTE.tsv"}),
    GlueTask("wnli", labels=_BINARY, files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             columns={"train": Columns(1, 2, 3), "test": _PAIR_TEST},
             tfds=("sentence1", "sentence2"), submission={"test": "WNLI.tsv"}),
]
