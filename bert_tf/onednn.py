"""TensorFlow's oneDNN CPU kernels: on by default for bert_tf on x86, and a warning when that came too late."""

import os
import platform
import sys
import warnings

VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN CPU kernels (imports TensorFlow)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def prefer_onednn():
    """Sets `TF_ENABLE_ONEDNN_OPTS=1` on x86 unless the user has set it; `import bert_tf` calls this first.

    TensorFlow has two CPU GEMMs, Eigen's and oneDNN's. It picks oneDNN by itself only on x86 CPUs with AVX-512
    VNNI/BF16 or AMX. On AVX2 CPUs (common in clouds, AMD EPYC among them) it runs Eigen's, and BERT's step is
    mostly GEMM: oneDNN's GEMM is the faster of the two there for training and batched inference, while batch-1
    latency is a little slower (BENCHMARKS.md, "TensorFlow's oneDNN kernels", has the A/B). TensorFlow reads the
    variable once, when it is imported. If it was imported before bert_tf with the kernels off, this warns and says
    how to turn them on; it never overrides a value the user set.
    Other architectures are left to TensorFlow's default (not measured here).
    """
    if VARIABLE in os.environ or platform.machine().lower() not in ("x86_64", "amd64"):
        return
    if "tensorflow" not in sys.modules:
        os.environ[VARIABLE] = "1"
        return
    try:
        enabled = onednn_enabled()
    except (ImportError, AttributeError):  # a TensorFlow build without this query: leave it alone
        return
    if not enabled:
        warnings.warn("TensorFlow was imported before bert_tf, so it runs its Eigen CPU kernels instead of oneDNN's "
                      "(slower training on AVX2 CPUs). Import bert_tf before tensorflow (or keras), or "
                      f"set {VARIABLE}=1 before the process starts; set {VARIABLE}=0 to keep Eigen's and silence this.",
                      stacklevel=3)
