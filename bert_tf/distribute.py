"""One function from command-line choices to a `tf.distribute` strategy."""

from __future__ import annotations

import json
import os

import tensorflow as tf
from absl import logging

from bert_tf.tf_log import python_logger_at

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")


def get_strategy(strategy: str | None = None, tpu: str | None = None, num_gpus: int | None = None,
                 devices: list[str] | None = None, tpu_zone: str | None = None, gcp_project: str | None = None,
                 num_tpu_cores: int | None = None) -> tf.distribute.Strategy:
    """The strategy for `--strategy` / `--tpu` / `--num_gpus` and the original's TPU flags.

    - `tpu` (a TPU name, a `grpc://` address, or "local" on a TPU VM) selects `TPUStrategy`, and connects and
      initializes the TPU system; `strategy="tpu"` without a name uses "local". A name is looked up in `tpu_zone` of
      `gcp_project` (`TPUClusterResolver(tpu, zone, project)`, as the original); an address or "local" needs no
      look-up, so a zone or project given with one is refused rather than ignored. `num_tpu_cores`, when given, must
      be the number of cores the TPU reports (its replicas).
    - "mirrored": `MirroredStrategy` over `num_gpus` GPUs (all visible ones when not given; the CPU when there are
      none) or over explicit `devices`. `num_gpus` with the default strategy means mirrored.
    - "multi_worker": `MultiWorkerMirroredStrategy`; the cluster comes from the `TF_CONFIG` environment variable.
    - "one_device": the first GPU, else the CPU.
    - "default" / None: `MirroredStrategy` when more than one GPU is visible, else TensorFlow's default strategy.

    An argument the chosen strategy would not use is an error (ValueError), never silently dropped.
    Call it before any other TensorFlow work: TPU and multi-worker set-up must run first.
    """
    if tpu:
        strategy = "tpu"
    strategy = strategy or "default"
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy={strategy!r}: expected one of {', '.join(STRATEGIES)}")
    if strategy != "tpu":
        unused = [f"--{name}={value}" for name, value in (("tpu_zone", tpu_zone), ("gcp_project", gcp_project),
                                                          ("num_tpu_cores", num_tpu_cores)) if value is not None]
        if unused:
            raise ValueError(f"{', '.join(unused)}: TPU settings, but no TPU is selected; add --tpu=NAME (or "
                             "--use_tpu --tpu_name=NAME), or drop them")
    if num_gpus is not None and strategy not in ("default", "mirrored"):
        raise ValueError(f"--num_gpus={num_gpus} only applies to --strategy=mirrored, not --strategy={strategy}")
    if strategy == "default" and num_gpus is not None:
        strategy = "mirrored"
    # physical devices: listing logical ones would start TensorFlow, after which multi-worker set-up fails
    gpus = [f"/gpu:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]
    if strategy == "tpu":
        return _tpu_strategy(tpu or "local", tpu_zone, gcp_project, num_tpu_cores)
    if strategy == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            logging.warning("--strategy=multi_worker without TF_CONFIG: this process trains alone")
        else:
            task = json.loads(os.environ["TF_CONFIG"]).get("task", {})
            logging.info("multi-worker task %s", task)
        return tf.distribute.MultiWorkerMirroredStrategy()
    if strategy == "mirrored":
        if devices is not None and num_gpus is not None:
            raise ValueError("give num_gpus or devices, not both")
        if num_gpus is not None:
            if num_gpus > len(gpus):
                raise ValueError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")
            devices = gpus[:num_gpus] or ["/cpu:0"]
        return tf.distribute.MirroredStrategy(devices)
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def _tpu_strategy(tpu: str, zone: str | None, project: str | None, num_cores: int | None):
    """`TPUStrategy` on the TPU `tpu` (name, grpc:// address or "local"), checked against `num_cores`."""
    if (zone or project) and (tpu == "local" or "://" in tpu):
        given = ", ".join(f"--{n}={v}" for n, v in (("tpu_zone", zone), ("gcp_project", project)) if v)
        raise ValueError(f"{given}: a zone and project locate a TPU by name, but the TPU is {tpu!r}, which needs no "
                         "look-up; drop them or name the TPU with --tpu / --tpu_name")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone, project=project)
        if tpu != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        with python_logger_at("WARNING"):
            tf.tpu.experimental.initialize_tpu_system(resolver)
        logging.info("TPU %r initialized", tpu)
    except (tf.errors.OpError, ValueError, OSError, RuntimeError) as e:  # no such TPU, no TPU here, no network
        reason = (str(e).splitlines() or [type(e).__name__])[0].split(". ")[0][:200]
        raise ValueError(f"TPU {tpu!r}: cannot reach or start it ({reason}); check the TPU's name or address "
                         "(--tpu, or --use_tpu with --tpu_name and --tpu_zone / --gcp_project, or --master), or "
                         "leave the TPU flags out to run here") from None
    strategy = tf.distribute.TPUStrategy(resolver)
    if num_cores is not None and num_cores != strategy.num_replicas_in_sync:
        raise ValueError(f"--num_tpu_cores={num_cores}, but TPU {tpu!r} has {strategy.num_replicas_in_sync} cores; "
                         f"pass --num_tpu_cores={strategy.num_replicas_in_sync} or drop the flag")
    return strategy
