"""The one task registry shared by training, evaluation, prediction and export: `get_task("mrpc")`."""

from __future__ import annotations

from bert_tf.tasks.base import DataError, Example, Task

_REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
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


from bert_tf.tasks import glue  # noqa: E402  (registers the GLUE tasks)
from bert_tf.tasks.ner import NerTask  # noqa: E402
from bert_tf.tasks.swag import SwagTask  # noqa: E402
from bert_tf.tasks.xnli import LANGUAGES, XnliTask  # noqa: E402

for _language in LANGUAGES:
    register(XnliTask(f"xnli-{_language}", labels=("contradiction", "entailment", "neutral"), language=_language))
register(XnliTask("xnli", labels=("contradiction", "entailment", "neutral"), language="zh"))  # the original default
register(NerTask("conll2003", kind="tagging", metric_names=("precision", "recall", "f1"), main_metric="f1"))
register(SwagTask("swag", kind="multiple_choice", labels=("0", "1", "2", "3")))
register(Task("squad", kind="span_qa", metric_names=("exact", "f1"), main_metric="f1", splits=("train", "dev")))
# Derived from any corpus without hand labels, by the quickstart: is the sentence as written, or are its words
# shuffled? TSVs with a header: label, sentence.
register(glue.GlueTask("word_order", labels=("original", "shuffled"), splits=("train", "dev"),
                       files={"train": "train.tsv", "dev": "dev.tsv"}, columns={"train": glue.Columns(1, None, 0)}))
register(Task("squad2", kind="span_qa", metric_names=("exact", "f1"), main_metric="f1", splits=("train", "dev")))

__all__ = ["DataError", "Example", "Task", "get_task", "register", "task_names"]
