"""The official metrics of the fine-tuning tasks, in numpy (GLUE: accuracy, F1, Matthews correlation, Pearson and
Spearman correlation, as the GLUE benchmark computes them)."""

from __future__ import annotations

import numpy as np


def accuracy(predictions, labels) -> float:
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    return float((predictions == labels).mean())


def f1(predictions, labels, positive=1) -> float:
    """Binary F1 of the `positive` class (0 when it is never predicted nor present)."""
    predictions, labels = np.asarray(predictions) == positive, np.asarray(labels) == positive
    tp = float(np.sum(predictions & labels))
    denominator = float(np.sum(predictions) + np.sum(labels))
    return 2 * tp / denominator if denominator else 0.0


def matthews_corrcoef(predictions, labels) -> float:
    """Matthews correlation of binary predictions (0 when a margin is empty, as scikit-learn defines it)."""
    p, y = np.asarray(predictions) == 1, np.asarray(labels) == 1
    tp, tn = float(np.sum(p & y)), float(np.sum(~p & ~y))
    fp, fn = float(np.sum(p & ~y)), float(np.sum(~p & y))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(predictions, labels) -> float:
    x, y = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(values) -> np.ndarray:
    """1-based ranks, ties getting the mean of the ranks they span."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return ranks


def spearman(predictions, labels) -> float:
    return pearson(_ranks(predictions), _ranks(labels))
