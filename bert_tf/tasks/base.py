"""What every fine-tuning task provides: examples from its files, its labels, its head and its official metric."""

from __future__ import annotations

import dataclasses
import io


class DataError(ValueError):
    """Task data that cannot be used: missing or malformed files, unknown labels, empty splits."""


def open_text(path: str, newline: str | None = None) -> io.StringIO:
    """A UTF-8 text file as a file object (`newline` as for `open`; "" for the csv module), read whole first so
    that bytes that are not UTF-8 are one `DataError` naming the file, line and byte rather than a decoding error
    that names neither."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise DataError(f"{path}:{line}: byte 0x{data[e.start]:02x} (column {column}) is not UTF-8; convert the file "
                        "to UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    return io.StringIO(text, newline=newline)


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
