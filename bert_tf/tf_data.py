"""The options of the library's tf.data inputs: autotuning off, so that freeing an iterator is immediate; and for an
input over data held in memory (fine-tuning's, `predict`'s), static rewrites off, so that it holds no copy of it.

An autotuned iterator runs a model thread that sleeps between optimizations, for a period that doubles up to a
minute. Freeing the iterator cancels that thread, but TensorFlow's cancellation marks itself done only after it has
woken the sleeper, which can look too early, see no cancellation and sleep out the rest of its period: the free, and
so the end of a `training.train`, a `predict` or a vocabulary count, then waits, at random, for up to as long as
the iterator has lived, at most a minute. Without autotuning there is no such thread. Each `AUTOTUNE` parallelism is
then the number of cores (at most 16) and `prefetch(AUTOTUNE)` still grows its buffer as it is drained, which keeps
the library's inputs far ahead of the model (`python -m bench.input_pipeline` measures both sides).

Under a strategy over devices (`MirroredStrategy`, `OneDeviceStrategy`, `MultiWorkerMirroredStrategy`, `TPUStrategy`,
and Keras's `fit` under them), TensorFlow's multi-device iterator feeds each device from a dataset of its own, a
generator of the input's elements and a prefetch of fixed size: nothing to tune, but made with default options, so
autotuned, with the same wait, one per device. No option of the input reaches it, so the first call here also wraps
TensorFlow's maker of those datasets (a private function of `multi_device_iterator_ops`, left alone if a TensorFlow
lacks it) to turn autotuning off in them, for every multi-device iterator of the process from then on, on CPUs and GPUs
(a TPU's are left as they are: TensorFlow registers the option's kernel for CPUs and GPUs only).

tf.data applies its static rewrites (operation fusions, added parallelism) when an iterator is made, to a
serialized copy of the dataset's graph, and builds the iterator from the rewritten copy. Tensors that the dataset's
functions capture, or that it slices, are constants in that graph, so the iterator would hold a copy of them: the
whole training set, for an input that gathers its batches from tensors in memory (`over_held_tensors`).
"""

from __future__ import annotations

import tensorflow as tf


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning model off (its other options kept)."""
    _per_device_datasets_without_autotuning()
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def over_held_tensors(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`without_autotuning(dataset)` without tf.data's static rewrites as well, for a dataset that reads tensors
    held in memory (captured by its functions, or sliced from them), of which they would make a copy (see the
    module's docstring)."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    return without_autotuning(dataset).with_options(options)


def _per_device_datasets_without_autotuning() -> None:
    from tensorflow.python.data.ops import multi_device_iterator_ops as module

    make = getattr(module, "_create_device_dataset", None)
    if make is None or getattr(make, "without_autotuning", False):
        return

    def make_without_autotuning(prototype, *args, **kwargs):
        dataset = make(prototype, *args, **kwargs)
        device = tf.DeviceSpec.from_string(prototype._variant_tensor.device or "").device_type
        return without_autotuning(dataset) if device in ("CPU", "GPU") else dataset

    make_without_autotuning.without_autotuning = True
    make_without_autotuning.wrapped = make
    module._create_device_dataset = make_without_autotuning
