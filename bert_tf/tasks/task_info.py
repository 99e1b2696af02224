"""`task.json`: what a fine-tuned model directory says about its task, typed and versioned.

Fine-tuning writes it beside `model.keras`; evaluation-only runs and export read it to rebuild the same
preprocessing (sequence length, casing, SQuAD's windows and null threshold, label names). This module is the only
place that writes or parses it. Fields a family does not use stay None and are left out of the file, so a file
reads as the family wrote it. Files written before the format had a version read as version 1.
"""

from __future__ import annotations

import dataclasses
import json
import os

from bert_tf import fileio
from bert_tf.tasks.base import DataError

FILE = "task.json"
VERSION = 4  # 2: train_batch_size; 3: bilstm_head, feature_based, lstm_units; 4: document_context


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """One fine-tuned model's task and the settings it was trained with.

    `kind` is the task family's kind ("classification", "regression", "span_qa", "tagging", "multiple_choice"):
    the registry maps it back to the family. `labels` are the class or tag names in output order.
    """

    task: str
    kind: str
    labels: tuple[str, ...]
    max_seq_length: int
    do_lower_case: bool
    learning_rate: float | None = None
    seed: int | None = None
    num_train_epochs: float | None = None
    train_batch_size: int | None = None
    global_step: int | None = None
    # classification: whether the model reads sentence pairs
    pairs: bool | None = None
    # span QA: the windows and answer rules of run_squad (doc_stride: tagging's windows too)
    doc_stride: int | None = None
    max_query_length: int | None = None
    max_answer_length: int | None = None
    version_2_with_negative: bool | None = None
    null_score_diff_threshold: float | None = None
    bilstm_head: bool | None = None  # True: trained with run_squad --bilstm_head
    # tagging: whether every word piece was trained on its word's tag, and each sentence in its document's context;
    # the probe on frozen features, if one
    label_all_subtokens: bool | None = None
    document_context: bool | None = None
    feature_based: str | None = None
    lstm_units: int | None = None
    version: int = VERSION


_FIELDS = {field.name for field in dataclasses.fields(TaskInfo)}
_ALWAYS = {"task", "kind", "labels", "max_seq_length", "do_lower_case", "version"}


def write(directory: str, info: TaskInfo) -> None:
    """Writes `info` as `directory/task.json` (atomically)."""
    from bert_tf.training import write_lines

    values = {key: value for key, value in dataclasses.asdict(info).items() if value is not None or key in _ALWAYS}
    values["labels"] = list(info.labels)
    write_lines(os.path.join(directory, FILE), [json.dumps(values, indent=2, sort_keys=True)])


def read(directory: str) -> TaskInfo | None:
    """The TaskInfo in `directory`, or None where there is no task.json. A file this version cannot read (a newer
    format, unknown or missing keys) is a DataError naming it."""
    path = os.path.join(directory, FILE)
    if not fileio.exists(path):
        return None
    try:
        with fileio.open(path) as f:
            values = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not a task.json written by fine-tuning ({e}); fine-tune again into a new "
                        "--output_dir") from None
    if not isinstance(values, dict):
        raise DataError(f"{path}: not a task.json written by fine-tuning (a JSON object is expected)")
    version = values.setdefault("version", 1)
    if not isinstance(version, int) or version > VERSION:
        raise DataError(f"{path}: task.json version {version!r} is newer than this bert-tf reads ({VERSION}); "
                        "upgrade bert-tf")
    unknown, missing = sorted(set(values) - _FIELDS), sorted(_ALWAYS - {"version"} - set(values))
    if unknown or missing:
        raise DataError(f"{path}: " + "; ".join(part for part in (
            unknown and f"unknown key(s) {', '.join(unknown)}", missing and f"missing {', '.join(missing)}") if part)
            + "; it was not written by this bert-tf's fine-tuning")
    values["labels"] = tuple(values["labels"])
    return TaskInfo(**values)
