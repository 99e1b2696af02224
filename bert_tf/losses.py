"""Losses whose value does not depend on how the global batch is split across replicas.

Keras sums each replica's loss (its gradients, precisely) and expects every replica to return its share of the
global mean. A plain per-replica mean gives that share only when every replica has the same number of terms; the
masked-LM loss averages over masked positions, which differ per replica. Here each replica divides its sum by the
global count, summed across replicas, so one device and N replicas compute the same loss for the same global batch.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def replica_sum(value):
    """`value` summed over all replicas (itself outside a multi-replica step); no gradient flows through it."""
    context = tf.distribute.get_replica_context()
    value = tf.stop_gradient(value)
    if context is None or context.num_replicas_in_sync == 1:
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
