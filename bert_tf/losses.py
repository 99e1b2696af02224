"""Losses whose value does not depend on how the global batch is split across replicas.

Keras sums each replica's loss (its gradients, precisely) and expects every replica to return its share of the
global mean. A plain per-replica mean gives that share only when every replica has the same number of terms; the
masked-LM loss averages over masked positions, and a tagger's over labelled pieces, which differ per replica. Here
each replica divides its sum by the global count, summed across replicas, so one device and N replicas compute the
same loss for the same global batch (`weighted_share`, and `GlobalMean` for Keras-compiled losses).
"""

from __future__ import annotations

import contextlib
import threading

import keras
import tensorflow as tf

_HERE = threading.local()  # per thread: MirroredStrategy traces each replica's step in its own thread


@contextlib.contextmanager
def counted_here():
    """Inside (in this thread), `replica_sum` sums nothing across replicas: for a loop (gradient accumulation's)
    whose cross-replica counts are taken before it, since an all-reduce cannot run inside a loop's body."""
    _HERE.depth = getattr(_HERE, "depth", 0) + 1
    try:
        yield
    finally:
        _HERE.depth -= 1


def replica_sum(value):
    """`value` summed over all replicas (itself outside a multi-replica step, or inside `counted_here`); no gradient
    flows through it."""
    context = tf.distribute.get_replica_context()
    value = tf.stop_gradient(value)
    if context is None or context.num_replicas_in_sync == 1 or getattr(_HERE, "depth", 0):
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def weighted_share(per_example, weights=None, total=None):
    """This replica's share of the global weighted mean of `per_example` (weights default to 1): its weighted sum
    over `total`, the weights' sum across replicas (computed here when not given)."""
    per_example = tf.cast(per_example, tf.float32)
    weights = tf.ones_like(per_example) if weights is None else tf.cast(weights, tf.float32)
    if total is None:
        total = replica_sum(tf.reduce_sum(weights))
    return tf.math.divide_no_nan(tf.reduce_sum(per_example * weights), total)


def sparse_cross_entropy(labels, logits):
    """Per-example cross-entropy of integer `labels` against `logits` (computed in float32)."""
    return keras.ops.sparse_categorical_crossentropy(labels, tf.cast(logits, tf.float32), from_logits=True)


@keras.saving.register_keras_serializable(package="bert_tf")
class GlobalMean(keras.losses.Loss):
    """A Keras loss of the fine-tuning heads: cross-entropy of logits (`kind="cross_entropy"`) or squared error
    (`"squared_error"`, regression), averaged over the global batch's sample weights (every term weighing 1
    without them). Each replica returns its share (`weighted_share`), where Keras's own reductions average per
    replica and then over the replicas, which differs as soon as the replicas hold different weight sums (a
    tagger's labelled pieces) or different batch sizes (a last partial batch)."""

    KINDS = ("cross_entropy", "squared_error")

    def __init__(self, kind: str = "cross_entropy", name: str | None = None, **kwargs):
        if kind not in self.KINDS:
            raise ValueError(f"kind={kind!r}: expected one of {', '.join(self.KINDS)}")
        kwargs.pop("reduction", None)  # always this replica's share of the global mean
        super().__init__(name=name or kind, **kwargs)
        self.kind = kind

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.kind == "cross_entropy":  # one term per label: per example, or per token for a tagger
            terms = sparse_cross_entropy(y_true, y_pred)
        else:  # one output per example: [batch] or [batch, 1]
            y_true = tf.cast(y_true, tf.float32)
            terms = tf.square(y_true - tf.reshape(tf.cast(y_pred, tf.float32), tf.shape(y_true)))
        if sample_weight is None:
            return weighted_share(terms)
        return weighted_share(terms, tf.reshape(tf.cast(sample_weight, tf.float32), tf.shape(terms)))

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        return {**config, "kind": self.kind}
