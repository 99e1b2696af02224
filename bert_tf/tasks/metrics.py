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
    """Pearson correlation; 0.0 where either side is constant, where scipy's (GLUE's scorer) gives NaN, so that
    a grid can still rank a run whose model predicts one score."""
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


# ------------------------------------------------------------------------------------ entity-level (NER)
def _split_tag(tag: str) -> tuple[str, str]:
    if tag == "O" or not tag:
        return "O", ""
    prefix, _, kind = tag.partition("-")
    return (prefix, kind) if kind else ("I", prefix)  # a bare type counts as inside


def entities(tags) -> set[tuple[str, int, int]]:
    """(type, first, last) of every entity in a tag sequence, with the CoNLL evaluation's chunk rules: an entity
    starts at B (or S), at I/E after O or after another type, and ends before the next start or O. Works for IOB1,
    IOB2 and IOBES tags."""
    found, start, current = set(), None, ""
    previous = "O"
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split_tag(tag)
        ends = start is not None and (
            previous in ("E", "S") or prefix in ("B", "S", "O") or kind != current)
        if ends:
            found.add((current, start, index - 1))
            start = None
        if prefix != "O" and (start is None or prefix in ("B", "S")):
            start, current = index, kind
        previous = prefix
    return found


def _precision_recall_f1(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1_value = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1_value}


def entity_report(predicted, gold) -> dict[str, dict[str, float]]:
    """What conlleval reports for lists of tag sequences (one per sentence): under "all", the micro precision,
    recall and F1 over entities and the accuracy over tokens (every tag, O included); under each entity type, its
    precision, recall and F1 and how many entities of it the gold tags hold (`gold`)."""
    counts: dict[str, list[int]] = {}  # type -> [correct, predicted, gold]
    tokens = right = 0
    for p, g in zip(predicted, gold):
        p_entities, g_entities = entities(p), entities(g)
        for index, found in ((0, p_entities & g_entities), (1, p_entities), (2, g_entities)):
            for kind, _, _ in found:
                counts.setdefault(kind, [0, 0, 0])[index] += 1
        tokens += len(g)
        right += sum(a == b for a, b in zip(p, g))
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    report = {"all": {**_precision_recall_f1(*total), "accuracy": right / tokens if tokens else 0.0}}
    for kind in sorted(counts):
        report[kind] = {**_precision_recall_f1(*counts[kind]), "gold": counts[kind][2]}
    return report
