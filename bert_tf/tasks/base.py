"""What every fine-tuning task provides: examples from its files, its labels, its head and its official metric."""

from __future__ import annotations

import dataclasses


class DataError(ValueError):
    """Task data that cannot be used: missing or malformed files, unknown labels, empty splits."""


@dataclasses.dataclass(frozen=True)
class Example:
    """One labelled text (pair): `label` is a label name, a float for regression, or None (unlabelled test data).
    Multiple-choice examples list their candidate second segments in `choices` (each read after `text_a`)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None
    choices: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Task:
    """A fine-tuning task as the registry knows it.

    `kind` says which model serves it ("classification", "regression"); `labels` are the class names in output
    order; `metric_names` the official metrics, `main_metric` the one that chooses between hyper-parameters.
    Subclasses read their own file formats (`examples`) and compute their metrics (`metrics`).
    """

    name: str
    kind: str = "classification"
    labels: tuple[str, ...] = ()
    metric_names: tuple[str, ...] = ("accuracy",)
    main_metric: str = "accuracy"
    splits: tuple[str, ...] = ("train", "dev", "test")

    def examples(self, data_dir: str, split: str) -> list[Example]:
        raise NotImplementedError

    def metrics(self, predictions, labels) -> dict[str, float]:
        raise NotImplementedError

    @property
    def num_outputs(self) -> int:
        return 1 if self.kind == "regression" else len(self.labels)
