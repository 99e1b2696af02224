"""One function from command-line choices to a `tf.distribute` strategy."""

from __future__ import annotations

import json
import os

import tensorflow as tf
from absl import logging

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")


def get_strategy(strategy: str | None = None, tpu: str | None = None, num_gpus: int | None = None,
                 devices: list[str] | None = None) -> tf.distribute.Strategy:
    """The strategy for `--strategy` / `--tpu` / `--num_gpus`.

    - `tpu` (a TPU name or address, or "local" on a TPU VM) selects `TPUStrategy`, and connects and initializes the
      TPU system; `strategy="tpu"` without a name uses "local".
    - "mirrored": `MirroredStrategy` over `num_gpus` GPUs (all visible ones when not given; the CPU when there are
      none) or over explicit `devices`.
    - "multi_worker": `MultiWorkerMirroredStrategy`; the cluster comes from the `TF_CONFIG` environment variable.
    - "one_device": the first GPU, else the CPU.
    - "default" / None: `MirroredStrategy` when more than one GPU is visible, else TensorFlow's default strategy.

    Call it before any other TensorFlow work: TPU and multi-worker set-up must run first.
    """
    if tpu:
        strategy = "tpu"
    strategy = strategy or "default"
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy={strategy!r}: expected one of {', '.join(STRATEGIES)}")
    # physical devices: listing logical ones would start TensorFlow, after which multi-worker set-up fails
    gpus = [f"/gpu:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]
    if strategy == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "local")
        if (tpu or "local") != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if strategy == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            logging.warning("--strategy=multi_worker without TF_CONFIG: this process trains alone")
        else:
            task = json.loads(os.environ["TF_CONFIG"]).get("task", {})
            logging.info("multi-worker task %s", task)
        return tf.distribute.MultiWorkerMirroredStrategy()
    if strategy == "mirrored":
        if devices is None and num_gpus is not None:
            if num_gpus > len(gpus):
                raise ValueError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")
            devices = gpus[:num_gpus] or None
        return tf.distribute.MirroredStrategy(devices)
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()
