"""What importing `bert_tf` sets for the process: TensorFlow's oneDNN CPU kernels on (x86), unless the user said
otherwise, and a warning when TensorFlow was imported first with them off; the garbage collector as it was; and when
a traced GEMM fuses the activation after it."""

import os
import subprocess
import sys
import warnings

import pytest

from bert_tf import onednn

PROBE = ("import warnings\n"
         "warnings.simplefilter('always')\n"
         "{first}\n"
         "with warnings.catch_warnings(record=True) as caught:\n"
         "    import bert_tf\n"
         "from bert_tf.onednn import onednn_enabled\n"
         "print('onednn', onednn_enabled())\n"
         "print('warned', any('imported before bert_tf' in str(w.message) for w in caught))\n"
         "import gc; gc.freeze()  # an exit without collections over TensorFlow's objects, as bert_tf's commands\n")


def probe(setting=None, first=""):
    env = {k: v for k, v in os.environ.items() if k != onednn.VARIABLE}
    if setting is not None:
        env[onednn.VARIABLE] = setting
    out = subprocess.run([sys.executable, "-c", PROBE.format(first=first)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return "onednn True" in out.stdout, "warned True" in out.stdout


@pytest.mark.parametrize("setting, expected", [(None, True), ("0", False)])
def test_importing_bert_tf_first_turns_on_onednn_unless_the_variable_is_set(setting, expected):
    assert probe(setting) == (expected, False)


def test_tensorflow_imported_first_warns_exactly_when_it_left_onednn_off():
    enabled, warned = probe(first="import tensorflow")
    assert warned == (not enabled)  # off on an AVX2 CPU (this project's reference machine): warned
    assert probe("0", first="import tensorflow")[1] is False  # the user chose Eigen's kernels: no warning


def test_other_architectures_and_user_settings_are_left_alone(monkeypatch):
    monkeypatch.delenv(onednn.VARIABLE, raising=False)
    monkeypatch.setattr(onednn.platform, "machine", lambda: "aarch64")
    onednn.prefer_onednn()
    assert onednn.VARIABLE not in os.environ
    monkeypatch.setattr(onednn.platform, "machine", lambda: "x86_64")
    monkeypatch.setenv(onednn.VARIABLE, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # TensorFlow is already imported here: any warning would fail
        onednn.prefer_onednn()
    assert os.environ[onednn.VARIABLE] == "0"


HEAP_PROBE = """
import gc, weakref
{before}
class Node: pass
cycle = Node(); cycle.self = cycle; alive = weakref.ref(cycle); del cycle  # the caller's garbage, made before
import bert_tf
young = len(gc.get_objects(0)) + len(gc.get_objects(1))
print("enabled", gc.isenabled(), "frozen", gc.get_freeze_count(), "young share below 1 %",
      young < len(gc.get_objects()) / 100)
gc.collect()
print("caller's cycle freed", alive() is None)
"""


@pytest.mark.parametrize("before, enabled", [("", True), ("gc.disable()", False)])
def test_importing_bert_tf_leaves_the_collector_as_it_was_and_its_objects_old(before, enabled):
    """The import runs without collections (`bert_tf.heap`) but leaves the collector as the caller had it, does
    not freeze the caller's objects (a command freezes its own: `test_cli`), and leaves its own objects in the
    oldest generation, where the young collections after it do not walk them; the caller's garbage is still
    collected."""
    out = subprocess.run([sys.executable, "-c", HEAP_PROBE.format(before=before)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [f"enabled {enabled} frozen 0 young share below 1 % True",
                                       "caller's cycle freed True"]


def test_a_caller_that_froze_its_objects_keeps_them_frozen():
    """Promoting TensorFlow's objects to the oldest generation goes through the permanent one; a caller's frozen
    objects are not handed back to the collector on the way."""
    probe = ("import gc\nkept = [[]]\ngc.freeze()\nimport bert_tf\n"
             "print(gc.get_freeze_count() > 0, id(kept) in {id(o) for o in gc.get_objects()})")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False"]  # still frozen: out of every generation the collector walks


def test_collector_paused_restores_the_collector_even_when_the_block_fails():
    import gc

    from bert_tf.heap import collector_paused

    assert gc.isenabled()
    with pytest.raises(ImportError):
        with collector_paused():
            assert not gc.isenabled()
            import a_module_that_does_not_exist  # noqa: F401 (the import fails)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("cpu_runs_bfloat16", [True, False])
def test_an_activation_counts_as_fused_only_in_a_traced_graph_without_xla_where_onednn_runs_its_dtype(
        cpu_runs_bfloat16, monkeypatch):
    """`fuses_activation_in_float32` lets the encoder leave its GELU to the oneDNN GEMM's float32 epilogue; anywhere
    TensorFlow would run it op by op in bfloat16 (eagerly, under XLA, with the remapper off, on a CPU where oneDNN
    leaves bfloat16 alone) or may (a graph traced for another machine) it must say no. TensorFlow's answer for this
    CPU is replaced by each of its two answers. That the fusion then happens is `test_bench`'s profiler test."""
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_utils

    monkeypatch.setattr(_pywrap_utils, "IsDataTypeSupportedByOneDNNOnThisCPU", lambda dtype: cpu_runs_bfloat16)
    seen, in_float32 = {}, {}

    def probe(where, dtype=tf.bfloat16):
        seen[where] = onednn.fuses_activation_in_float32(dtype)
        in_float32[where] = onednn.runs_bfloat16_in_float32(dtype)
        return tf.constant(0)

    probe("eager")
    tf.function(lambda: probe("graph"))()
    tf.function(lambda: probe("graph float32", tf.float32))()
    tf.function(lambda: probe("graph float16", tf.float16))()
    tf.function(lambda: probe("xla"), jit_compile=True)()
    with onednn.traced_to_run_elsewhere():
        tf.function(lambda: probe("for elsewhere"))()
    tf.function(lambda: probe("after"))()
    tf.config.optimizer.set_experimental_options({"remapping": False})
    try:
        tf.function(lambda: probe("remapper off"))()
    finally:
        tf.config.optimizer.set_experimental_options({"remapping": True})
    assert onednn.onednn_enabled()
    assert seen == {"eager": False, "graph": cpu_runs_bfloat16, "graph float32": False, "graph float16": False,
                    "xla": False, "for elsewhere": False, "after": cpu_runs_bfloat16, "remapper off": False}
    # oneDNN's softmax takes bfloat16 (`runs_bfloat16_in_float32`) wherever the fusion does, remapper or not
    assert in_float32 == dict(seen, **{"remapper off": cpu_runs_bfloat16})


def test_a_graph_runs_on_this_cpu_and_onednn_only_where_traced_for_this_process_cpu(monkeypatch):
    """`graph_runs_on_this_cpu` lets a layer trace an XLA-compiled function of its own (`bert_tf.layers.gelu`), and
    `graph_runs_onednn_here` oneDNN's own ops (`bert_tf.layers.LayerNorm`): only in a graph that this process runs
    (with oneDNN), never eagerly, under XLA, for another machine or in a SavedModel."""
    import tensorflow as tf

    from bert_tf.serving import traced_for_saving

    seen = {}

    def probe(where):
        seen[where] = (onednn.graph_runs_on_this_cpu(), onednn.graph_runs_onednn_here())
        return tf.constant(0)

    probe("eager")
    tf.function(lambda: probe("graph"))()
    tf.function(lambda: probe("xla"), jit_compile=True)()
    with onednn.traced_to_run_elsewhere():
        tf.function(lambda: probe("for elsewhere"))()
    with traced_for_saving():
        tf.function(lambda: probe("saving"))()
    tf.function(lambda: probe("after"))()
    assert onednn.onednn_enabled()
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: False)
    tf.function(lambda: probe("oneDNN off"))()
    no, yes = (False, False), (True, True)
    assert seen == {"eager": no, "graph": yes, "xla": no, "for elsewhere": no, "saving": no, "after": yes,
                    "oneDNN off": (True, False)}


def test_traced_to_run_elsewhere_covers_graphs_traced_in_other_threads():
    """A `tf.distribute` strategy traces each replica's function in a thread of its own (MirroredStrategy does), so
    the context must hold for every thread while it is open, and for none after."""
    import threading

    import tensorflow as tf

    def traced_in_a_thread():
        seen = []
        thread = threading.Thread(target=lambda: tf.function(
            lambda: seen.append(onednn.graph_runs_on_this_cpu()) or tf.constant(0)).get_concrete_function())
        thread.start()
        thread.join()
        return seen[0]

    with onednn.traced_to_run_elsewhere():
        inside = traced_in_a_thread()
    assert (inside, traced_in_a_thread()) == (False, True)


DEFERRED_MATPLOTLIB = """
import sys, types
package, plt, patches = (sys.modules[name] for name in ("matplotlib", "matplotlib.pyplot", "matplotlib.patches"))
# what Keras imported while TensorFlow loaded, none of it run
assert all(type(m) is not types.ModuleType for m in (package, plt, patches)), "matplotlib's code ran at start-up"
assert "use" not in vars(package) and "subplots" not in vars(plt) and "Rectangle" not in vars(patches)
import matplotlib.pyplot
from matplotlib import pyplot, patches as imported_patches
assert matplotlib.pyplot is plt and pyplot is plt and imported_patches is patches, "an import made other modules"
assert "use" not in vars(package) and "subplots" not in vars(plt), "an import ran their code"
import matplotlib
matplotlib.use("Agg")  # runs matplotlib's code, and switches the backend of an imported pyplot: runs its code
assert type(package) is types.ModuleType and type(plt) is types.ModuleType and plt.get_backend().lower() == "agg"
assert type(patches) is types.ModuleType  # pyplot's code imports from it
figure, axes = plt.subplots()
axes.plot([0, 1], [1, 0])
axes.add_patch(patches.Rectangle((0.2, 0.2), 0.5, 0.5))
figure.savefig(sys.argv[1])
"""


# matplotlib itself imported before bert_tf (here: loaded, and its two modules forgotten): pyplot and patches are
# still deferred, under the package as it is
PACKAGE_FIRST = """
import sys, types
import matplotlib
assert matplotlib.__version__ and type(matplotlib) is types.ModuleType  # its code has run
for name in ("pyplot", "patches"):
    del sys.modules["matplotlib." + name], vars(matplotlib)[name]
from bert_tf.deferred_imports import defer_matplotlib
assert defer_matplotlib() and sys.modules["matplotlib"] is matplotlib
from matplotlib import pyplot as plt, patches
assert type(plt) is not types.ModuleType and type(patches) is not types.ModuleType and "subplots" not in vars(plt)
matplotlib.use("Agg")
figure, axes = plt.subplots()
axes.add_patch(patches.Rectangle((0.2, 0.2), 0.5, 0.5))
figure.savefig(sys.argv[1])
assert not defer_matplotlib()  # pyplot imported: nothing left to defer
"""


def test_matplotlib_runs_at_first_use_not_at_start_up_and_then_plots(tmp_path):
    from tests import forking

    path = tmp_path / "plot.png"
    done = forking.python(["-c", DEFERRED_MATPLOTLIB, str(path)])  # forked from an interpreter that imported bert_tf
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_with_matplotlib_imported_first_pyplot_is_still_deferred_and_plots(tmp_path):
    from tests import forking

    path = tmp_path / "plot.png"
    done = forking.python(["-c", PACKAGE_FIRST, str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_deferred_submodule_runs_at_its_first_attribute_and_only_where_nothing_of_it_is_imported(tmp_path,
                                                                                                    monkeypatch):
    import types

    from bert_tf.deferred_imports import defer_submodule

    ran = tmp_path / "ran.txt"
    (tmp_path / "deferpkg" / "inner").mkdir(parents=True)
    # the package imports its subpackage's module, as tensorflow_text's __init__ imports tensorflow_text.python.keras
    (tmp_path / "deferpkg" / "__init__.py").write_text("from deferpkg.inner import heavy\n")
    (tmp_path / "deferpkg" / "inner" / "__init__.py").write_text("")
    (tmp_path / "deferpkg" / "inner" / "heavy.py").write_text(f"open({str(ran)!r}, 'a').write('x')\nVALUE = 42\n")
    (tmp_path / "nsdefer" / "inner").mkdir(parents=True)  # namespace packages: no __init__.py
    (tmp_path / "nsdefer" / "inner" / "heavy.py").write_text("")
    (tmp_path / "flat.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("deferpkg", "deferpkg.inner", "deferpkg.inner.heavy", "nsdefer", "nsdefer.inner", "flat")
    try:
        assert not defer_submodule("deferpkg.inner.missing") and not defer_submodule("flat.sub")
        assert not defer_submodule("nsdefer.inner.heavy")
        assert defer_submodule("deferpkg.inner.heavy")
        import deferpkg

        assert type(deferpkg.heavy) is not types.ModuleType and not ran.exists()  # imported, not run
        assert deferpkg.heavy.VALUE == 42 and ran.read_text() == "x"
        assert type(sys.modules["deferpkg.inner.heavy"]) is types.ModuleType
        assert not defer_submodule("deferpkg.inner.heavy")  # imported
        del sys.modules["deferpkg.inner.heavy"]
        assert not defer_submodule("deferpkg.inner.heavy")  # its package is imported
    finally:
        for name in names:
            sys.modules.pop(name, None)


# Two processors of an Intel Xeon with AVX-512 and no AVX512_BF16 (as this machine's /proc/cpuinfo shows them,
# most fields left out), then the bfloat16 flag that an AMD EPYC Zen 4 adds.
CPUINFO = ("processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
           "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni{extra}\n"
           "bugs\t\t: spectre_v1\n\n")


@pytest.mark.parametrize("extra, has_bf16", [("", False), (" avx512_bf16", True), (" amx_bf16 amx_tile", True)])
def test_cpu_flags_are_read_from_cpuinfo_and_unknown_elsewhere(tmp_path, monkeypatch, extra, has_bf16):
    from bert_tf import cpu_precision

    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.format(n=0, extra=extra) + CPUINFO.format(n=1, extra=extra))
    monkeypatch.setattr(cpu_precision.platform, "machine", lambda: "x86_64")
    flags = cpu_precision.cpu_flags(str(path))
    assert {"avx512f", "avx512_vnni"} <= flags and "spectre_v1" not in flags and "processor" not in flags
    assert bool(flags & {"avx512_bf16", "amx_bf16"}) == has_bf16
    assert cpu_precision.cpu_flags(str(tmp_path / "none")) is None
    path.write_text("processor\t: 0\n")  # no flags line (a container that hides them)
    assert cpu_precision.cpu_flags(str(path)) is None
    monkeypatch.setattr(cpu_precision.platform, "machine", lambda: "aarch64")  # its flags mean other things
    assert cpu_precision.cpu_flags(str(path)) is None


def test_a_16_bit_dtype_warns_only_on_a_cpu_without_its_arithmetic():
    from bert_tf.cpu_precision import emulation_warning

    avx512 = frozenset({"avx2", "avx512f", "avx512_vnni"})
    message = emulation_warning("bf16", "mixed_bfloat16", avx512)
    assert message.startswith("--dtype=bf16: this CPU has no bfloat16 arithmetic (AVX512_BF16 or AMX_BF16)")
    assert message.endswith("use --dtype=fp32 on this machine") and "\n" not in message
    assert "float16 arithmetic (AVX512_FP16 or AMX_FP16)" in emulation_warning("mixed_float16", "mixed_float16",
                                                                               avx512 | {"avx512_bf16"})
    assert emulation_warning("bf16", "mixed_bfloat16", avx512 | {"avx512_bf16"}) is None
    assert emulation_warning("bf16", "mixed_bfloat16", avx512 | {"amx_bf16"}) is None
    assert emulation_warning("fp16", "mixed_float16", avx512 | {"avx512_fp16"}) is None
    assert emulation_warning("fp32", "float32", avx512) is None
    assert emulation_warning("bf16", "mixed_bfloat16", None) is None  # flags not known: nothing claimed
    assert emulation_warning("bf16", "mixed_bfloat16", avx512, jit_compile=True) is None  # XLA computes in float32
    assert emulation_warning("fp16", "mixed_float16", avx512, jit_compile=True).startswith("--dtype=fp16: this CPU")


@pytest.mark.parametrize("kind", ["pretraining", "finetuning"])
def test_training_options_warn_of_an_emulated_dtype_on_the_cpu_but_not_with_a_gpu(monkeypatch, caplog, kind):
    import tensorflow as tf

    from bert_tf import cpu_precision
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.pretraining import PretrainingOptions

    def check(dtype, jit_compile=False):
        caplog.clear()
        if kind == "pretraining":
            PretrainingOptions(dtype=dtype, jit_compile=jit_compile).check(1)
        else:
            FinetuneOptions(do_train=True, dtype=dtype, init_checkpoint="model", jit_compile=jit_compile).check(1)
        return [record.getMessage() for record in caplog.records if "arithmetic" in record.getMessage()]

    devices = []
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: devices if kind == "GPU" else [])
    monkeypatch.setattr(cpu_precision, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    (message,) = check("bf16")
    assert message.startswith("--dtype=bf16: this CPU has no bfloat16 arithmetic")
    (message,) = check("mixed_float16")
    assert message.startswith("--dtype=mixed_float16: this CPU has no float16 arithmetic")
    assert check("fp32") == [] and check("bf16", jit_compile=True) == []
    devices.append(tf.config.LogicalDevice("/device:GPU:0", "GPU"))  # the GPU computes the model: nothing to say
    assert check("bf16") == []
    devices.clear()
    monkeypatch.setattr(cpu_precision, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert check("bf16") == []
