"""The one task registry shared by training, evaluation, prediction and export.

`get_task("mrpc")` finds a task; `task.family` is the unit that trains, evaluates and exports it. The families
are listed here once (`FAMILIES`); `family_of_kind` maps task.json's kind back to one and `family_for_export`
maps an `export_saved_model --kind` to one. Nothing else switches on a task's kind.
"""

from __future__ import annotations

import dataclasses

from bert_tf.tasks.base import DataError, Example, Family, Task

_REGISTRY: dict[str, Task] = {}


def register(task: Task, family: Family) -> Task:
    """Adds `task`, trained, evaluated and exported by `family`; returns the registered task."""
    task = dataclasses.replace(task, family=family)
    _REGISTRY[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The task called `name` (case and '-'/'_' insensitive: "SST-2", "sst2" and "sst_2" are one task)."""
    key = _key(name)
    for task_name, task in _REGISTRY.items():
        if _key(task_name) == key:
            return task
    raise DataError(f"--task_name={name}: unknown task; choose one of {', '.join(sorted(_REGISTRY))}")


def task_names() -> list[str]:
    return sorted(_REGISTRY)


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


from bert_tf.tasks import classification, multiple_choice, span_qa, tagging  # noqa: E402
from bert_tf.tasks import glue, ner, swag, xnli  # noqa: E402

FAMILIES: tuple[Family, ...] = (classification.FAMILY, span_qa.FAMILY, tagging.FAMILY, multiple_choice.FAMILY)


def family_of_kind(kind: str) -> Family:
    """The family that wrote `kind` into a task.json."""
    for family in FAMILIES:
        if kind in family.kinds:
            return family
    raise DataError(f"task kind {kind!r} is not one of {', '.join(k for f in FAMILIES for k in f.kinds)}")


def family_for_export(export_kind: str) -> Family:
    """The family whose models `export_saved_model --kind=<export_kind>` exports."""
    for family in FAMILIES:
        if family.export_kind == export_kind:
            return family
    raise ValueError(f"--kind={export_kind!r}: no task family exports it")


def export_kinds() -> tuple[str, ...]:
    return tuple(family.export_kind for family in FAMILIES)


for _task in glue.TASKS:
    register(_task, classification.FAMILY)
for _language in xnli.LANGUAGES:
    register(xnli.XnliTask(f"xnli-{_language}", labels=("contradiction", "entailment", "neutral"),
                           language=_language), classification.FAMILY)
register(xnli.XnliTask("xnli", labels=("contradiction", "entailment", "neutral"), language="zh"),  # the original's
         classification.FAMILY)
register(ner.NerTask("conll2003", metric_names=("precision", "recall", "f1", "accuracy"), main_metric="f1"),
         tagging.FAMILY)
register(swag.SwagTask("swag", labels=("0", "1", "2", "3")), multiple_choice.FAMILY)
register(Task("squad", metric_names=("exact", "f1"), main_metric="f1", splits=("train", "dev")), span_qa.FAMILY)
register(Task("squad2", metric_names=("exact", "f1"), main_metric="f1", splits=("train", "dev")), span_qa.FAMILY)
# Derived from any corpus without hand labels, by the quickstart: is the sentence as written, or are its words
# shuffled? TSVs with a header: label, sentence.
register(glue.GlueTask("word_order", labels=("original", "shuffled"), splits=("train", "dev"),
                       files={"train": "train.tsv", "dev": "dev.tsv"}, columns={"train": glue.Columns(1, None, 0)}),
         classification.FAMILY)

__all__ = ["DataError", "Example", "FAMILIES", "Family", "Task", "export_kinds", "family_for_export",
           "family_of_kind", "get_task", "register", "task_names"]
