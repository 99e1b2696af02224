"""The options of the library's tf.data inputs: autotuning off, so that freeing an iterator is immediate.

An autotuned iterator runs a model thread that sleeps between optimizations, for a period that doubles up to a
minute. Freeing the iterator cancels that thread, but TensorFlow's cancellation marks itself done only after it has
woken the sleeper, which can look too early, see no cancellation and sleep out the rest of its period: the free, and
so the end of a `training.train`, a `predict` or a vocabulary count, then waits, at random, for up to as long as
the iterator has lived, at most a minute. Without autotuning there is no such thread. Each `AUTOTUNE` parallelism is
then the number of cores (at most 16) and `prefetch(AUTOTUNE)` still grows its buffer as it is drained, which keeps
the library's inputs far ahead of the model (`python -m bench.input_pipeline` measures both sides).
"""

from __future__ import annotations

import tensorflow as tf


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning model off (its other options kept)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
