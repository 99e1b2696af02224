"""TensorFlow's oneDNN CPU kernels: on by default for bert_tf on x86, a warning when that came too late, whether a
graph traced here runs on this CPU and with them, and whether a traced bfloat16 GEMM computes the activation after it
in float32 (by fusing it)."""

import contextlib
import os
import platform
import sys
import threading
import warnings

VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
# How many `traced_to_run_elsewhere` contexts are open, in any thread: process-wide, because TensorFlow traces a
# tf.distribute replica's function in a thread of its own.
_elsewhere_open = 0
_elsewhere_lock = threading.Lock()


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


def runs_bfloat16_in_float32(dtype) -> bool:
    """Whether TensorFlow, running the graph being traced here, hands `dtype` GEMMs and softmaxes to oneDNN, which
    computes a bfloat16 one in float32 and rounds its output once. It does so only where `graph_runs_onednn_here`,
    with oneDNN running `dtype` on this CPU (as TensorFlow decides: AVX-512, AVX-NE-CONVERT or AMX); for bfloat16
    only (float16 is not checked here). Anywhere else a bfloat16 op may run in bfloat16 step by step, and a caller
    that wants float32 must cast."""
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_utils

    if tf.as_dtype(dtype) != tf.bfloat16 or not graph_runs_onednn_here():
        return False
    return bool(_pywrap_utils.IsDataTypeSupportedByOneDNNOnThisCPU(dtype))


def fuses_activation_in_float32(dtype) -> bool:
    """Whether TensorFlow, running the graph being traced here, fuses an element-wise activation on the output of a
    `dtype` 2-D MatMul + BiasAdd into that GEMM, as a oneDNN post-op computed in float32 on the float32
    accumulator and rounded once: where `runs_bfloat16_in_float32` and its graph optimizer's remapper is on (the
    fusion of bfloat16 is what `tests/test_bench.py` checks). Anywhere else the activation runs op by op in `dtype`,
    and a caller that wants it in float32 must cast."""
    import tensorflow as tf

    options = tf.config.optimizer.get_experimental_options()
    if options.get("disable_meta_optimizer") or options.get("remapping") is False:
        return False
    return runs_bfloat16_in_float32(dtype)


def graph_runs_on_this_cpu() -> bool:
    """Whether the graph being traced here runs on this process's CPU, op by op: a graph (not eager), not compiled
    by XLA (`jit_compile`, auto-clustering, a TPU), with no GPU to place its ops on, and traced neither under
    `traced_to_run_elsewhere` nor by `tf.saved_model.save` (which traces the tf.functions it saves again, Keras's
    `model.export` included; a concrete function traced before the save is saved as it was). Only there may a layer
    trace what this process's TensorFlow runs and another may not: oneDNN's own ops (`graph_runs_onednn_here`), or
    an XLA-compiled function of its own (`bert_tf.layers.gelu`). The answer is fixed when a graph is traced: a graph
    traced here and then run elsewhere (converted, or called inside an XLA function) must be traced under
    `traced_to_run_elsewhere`."""
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util
    from tensorflow.python.saved_model import save_context

    if tf.executing_eagerly() or _elsewhere_open or save_context.in_save_context():
        return False
    if tf.config.optimizer.get_jit():
        return False
    if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        return False
    return not tf.config.list_logical_devices("GPU")


def graph_runs_onednn_here() -> bool:
    """Whether the graph being traced here runs on this process's CPU (`graph_runs_on_this_cpu`) with TensorFlow's
    oneDNN kernels: only there may a layer trace oneDNN's own ops or count on TensorFlow's oneDNN fusions."""
    return graph_runs_on_this_cpu() and onednn_enabled()


@contextlib.contextmanager
def traced_to_run_elsewhere():
    """Graphs traced inside (SavedModels for TF Serving) make no use of oneDNN or of XLA-compiled functions
    (`graph_runs_on_this_cpu` is false): the machine and TensorFlow build that run them may not fuse, or have no
    oneDNN ops or XLA, so they trace TensorFlow's portable ops and cast to float32 themselves. It holds for every
    thread while open, so that the replicas a `tf.distribute` strategy traces in threads of their own are covered;
    a graph that another thread traces meanwhile for this process is portable too, only slower."""
    global _elsewhere_open
    with _elsewhere_lock:
        _elsewhere_open += 1
    try:
        yield
    finally:
        with _elsewhere_lock:
            _elsewhere_open -= 1
