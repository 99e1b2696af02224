"""The benchmark harness: the FLOP count behind every "fraction of the matmul floor" figure, and the results files."""

import contextlib

import pytest
import tensorflow as tf

from bench.common import encoder_flops
from bert_tf import BertConfig, BertEncoder, onednn

from tests import forking


@pytest.mark.parametrize("preset,batch,seq", [("tiny", 2, 16), ("L2_H256", 3, 33)])
def test_encoder_flops_equal_tensorflows_own_count_of_the_encoder_graph(preset, batch, seq):
    """Reference: TF's v1 FLOP profiler over the traced encoder graph, summed over its MatMul/BatchMatMul nodes."""
    config = BertConfig.preset(preset, vocab_size=100)
    encoder = BertEncoder(config)
    spec = {name: tf.TensorSpec((batch, seq), tf.int32) for name in ("input_word_ids", "input_mask",
                                                                      "input_type_ids")}
    graph = tf.function(lambda x: encoder(x, training=False)).get_concrete_function(spec).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph, options=options)
    types = {op.name: op.type for op in graph.get_operations()}
    matmuls = [node for node in profile.children if types.get(node.name) in ("MatMul", "BatchMatMulV2")]
    assert len(matmuls) == config.num_hidden_layers * 8 + 1  # q, k, v, scores, context, out, ffn x2; pooler
    assert sum(node.float_ops for node in matmuls) == encoder_flops(config, batch, seq)


def test_report_keeps_old_rows_under_their_own_header_when_the_columns_change(tmp_path, monkeypatch):
    import csv

    from bench import common

    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    common.report("demo", [{"a": 1}], ["a"])
    common.report("demo", [{"a": 2}], ["a"])
    common.report("demo", [{"a": 3, "b": 4}], ["a", "b"])
    rotated = [p for p in tmp_path.iterdir() if p.name.startswith("demo-until-")]
    assert len(rotated) == 1
    with open(rotated[0], newline="") as f:
        old = list(csv.DictReader(f))
    with open(tmp_path / "demo.csv", newline="") as f:
        new = list(csv.DictReader(f))
    assert [r["a"] for r in old] == ["1", "2"] and "b" not in old[0]
    assert [(r["a"], r["b"]) for r in new] == [("3", "4")]


def test_paired_times_warms_each_up_once_then_interleaves_the_rounds_and_names_each_warm_up(capsys):
    from bench.common import paired_times

    order = []
    times = paired_times([lambda: order.append("a"), lambda: order.append("b")], repeats=2, names=["first", "second"])
    assert order == ["a", "b", "a", "b", "a", "b"] and [len(t) for t in times] == [2, 2]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["first", "second"]
    assert all(line.split(": ")[1].startswith("warm-up round ") and line.endswith(" s") for line in lines)
    paired_times([lambda: None], repeats=1)
    assert capsys.readouterr().out == ""  # without names, nothing printed


def test_paused_runs_one_round_per_call_raises_the_threads_error_and_close_finishes_the_body():
    """`bench.finetuning._Paused` times a round as one call: the body must advance exactly one round per call."""
    from bench.finetuning import _Paused

    done = []

    def body(pause):
        for round_ in range(3):
            done.append(round_)
            pause()
        done.append("end")

    run = _Paused(body)
    run()
    assert done == [0]
    run()
    assert done == [0, 1]
    run.close()
    assert done == [0, 1, 2, "end"] and not run._thread.is_alive()

    def failing(pause):
        pause()
        raise ValueError("boom in round 2")

    run = _Paused(failing)
    run()
    with pytest.raises(ValueError, match="boom in round 2"):
        run()
    run = _Paused(lambda pause: None)
    with pytest.raises(RuntimeError, match="ended before the benchmark's last round"):
        run()
    with pytest.raises(RuntimeError, match="no round left"):
        run()


def test_finetuning_rounds_of_our_loop_are_exactly_steps_updates(tmp_path):
    """Each timed round of our loop (`training.train` paused at its progress report) runs exactly `steps` updates,
    as examples/s = batch x steps / round time assumes, and `close` lets the run finish (its final checkpoint)."""
    from bench.finetuning import ours
    from bench.model_speed import make_batch

    config = BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=64)
    run = ours(config, make_batch(12, 16), "fp32", 4, 3, 2, str(tmp_path))
    updates = []
    for _ in range(2):
        run()
        updates.append(int(run.model.optimizer.iterations.numpy()))
    assert updates == [3, 6]
    assert tf.train.latest_checkpoint(str(tmp_path)) is None  # nothing written inside the timed rounds
    run.close()
    assert not run._thread.is_alive() and tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-6")


def test_the_compiled_updates_thunks_are_found_by_name_in_a_trace(tmp_path):
    """`bench.profile.compiled_update_thunks` names the thunks that a traced update of the default optimizer runs
    (so `bench.finetuning` counts them as the optimizer's), and none of the training GELU's."""
    import keras
    import numpy as np

    from bench.profile import compiled_update_thunks, op_times
    from bert_tf.optimization import create_optimizer

    variables = [keras.Variable(np.ones((64, 32), np.float32), name="kernel")]
    opt = create_optimizer(1e-3, 10)
    opt.build(variables)
    step = tf.function(lambda: opt.apply([tf.ones((64, 32))], variables))
    step()
    tf.profiler.experimental.start(str(tmp_path))
    step()
    tf.profiler.experimental.stop()
    by_type, _ = op_times(str(tmp_path))
    names = compiled_update_thunks()
    assert names and all(by_type[name] > 0 for name in names), (names, sorted(by_type))


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_the_ffn_gemm_bias_and_gelu_run_as_one_fused_op(policy, tmp_path):
    """What `BertTransformerBlock._intermediate` is for. Where TensorFlow's oneDNN runs the policy's dtype (float32
    on any x86 CPU; bfloat16 only with AVX-512 or AVX-NE-CONVERT, as TensorFlow decides), the traced graph keeps, in
    each layer, a 2-D MatMul, its BiasAdd and the GELU's ops reading the BiasAdd next to each other (needed for the
    fusion; not enough for it: Keras's own Dense makes the same chain and is not fused, which the trace below
    catches), and the encoder as it runs (a profiler trace of one forward pass) has the GEMM, bias and GELU as one
    oneDNN op and no Tanh on its own (with Keras's Dense they ran as separate ops). Elsewhere a bfloat16 GELU reads
    a float32 cast of the BiasAdd."""
    import keras
    from tensorflow.python.util import _pywrap_utils

    from bench.profile import op_times
    from bert_tf.onednn import onednn_enabled

    assert onednn_enabled()  # bert_tf turns TensorFlow's oneDNN kernels on for x86 (bert_tf.onednn)
    config = BertConfig.preset("tiny", vocab_size=100)
    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        encoder = BertEncoder(config)
    finally:
        keras.config.set_dtype_policy(old)
    ids = tf.constant([[5, 6, 7, 8, 9, 0]] * 2)
    forward = tf.function(lambda: encoder({"input_word_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
                                           "input_type_ids": tf.zeros_like(ids)}, training=False))
    graph = forward.get_concrete_function().graph
    bias_adds = [op for op in graph.get_operations() if op.type == "BiasAdd" and op.inputs[0].op.type == "MatMul"
                 and op.inputs[0].shape.rank == 2 and op.inputs[0].shape[-1] == config.intermediate_size]
    assert len(bias_adds) == config.num_hidden_layers

    def reads_gelu(op):
        return any("/Gelu/" in c.name for c in op.outputs[0].consumers())

    if policy == "mixed_bfloat16" and not _pywrap_utils.IsDataTypeSupportedByOneDNNOnThisCPU(tf.bfloat16):
        # TensorFlow keeps bfloat16 GEMMs out of oneDNN on this CPU, so it fuses nothing in them, and the GELU runs
        # in float32 on a cast of the bias add (`bert_tf.layers.activations.get_activation`)
        assert not any(reads_gelu(op) for op in bias_adds)
        assert all(any(c.type == "Cast" and c.outputs[0].dtype == tf.float32 and reads_gelu(c)
                       for c in op.outputs[0].consumers()) for op in bias_adds)
        return
    assert all(reads_gelu(op) for op in bias_adds)
    forward()
    tf.profiler.experimental.start(str(tmp_path))
    forward()
    tf.profiler.experimental.stop()
    by_type, by_name = op_times(str(tmp_path))
    fused_gelu = [name for name in by_name if "Gelu" in name and "FusedMatMul" in name]
    assert fused_gelu and "Tanh" not in by_type, sorted(by_type)


def test_count_records_reads_the_tfrecord_framing(tmp_path):
    """`bench.data_gen` counts the original script's output from the file's framing; TF's reader is the reference."""
    from bench.data_gen import count_records

    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for size in (0, 1, 300, 70_000, 5):  # an empty record and one whose length needs three bytes
            writer.write(b"x" * size)
    assert count_records(path) == 5 == sum(1 for _ in tf.data.TFRecordDataset(path))


# A TF1 program in the style of google-research/bert's scripts (written for this test): flags, gfile, python_io,
# logging and app.run from `import tensorflow as tf`, and a sibling module found by a plain import.
TF1_SCRIPT = '''
import helper
import tensorflow as tf

flags = tf.flags
flags.DEFINE_string("output_file", None, "where")
flags.DEFINE_integer("count", 1, "how many")
FLAGS = flags.FLAGS


def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)
    with tf.gfile.GFile(FLAGS.output_file + ".txt", "w") as f:
        f.write(helper.WORD)
    writer = tf.python_io.TFRecordWriter(FLAGS.output_file)
    for i in range(FLAGS.count):
        writer.write(tf.train.Example(features=tf.train.Features(feature={"i": tf.train.Feature(
            int64_list=tf.train.Int64List(value=[i]))})).SerializeToString())
    writer.close()
    tf.logging.info("wrote %d", FLAGS.count)


if __name__ == "__main__":
    tf.app.run()
'''


def test_data_gen_measures_the_command_as_users_run_it(tmp_path):
    """`bench.data_gen` runs ours as the command's `run` in a fresh interpreter (its fork server first, then its own
    TensorFlow import, which the benchmark times) and reads what the child reports at exit: the import time (set
    only if the command's import ran through the timed hook) and the peak RSS, the workers' included."""
    from bench.common import uncased_vocab
    from bench.data_gen import measure, write_corpus

    corpus = tmp_path / "corpus.txt"
    write_corpus(str(corpus), 0.2)
    result = measure("ours", str(corpus), uncased_vocab(), 2, str(tmp_path), dupe_factor=1)
    assert result["instances"] > 100 and 0 < result["import_seconds"] < result["seconds"]
    assert result["peak_rss_mb"] > 300 and not list(tmp_path.glob("*.tfrecord"))


def test_the_original_script_runner_runs_tf1_code_unmodified_under_tensorflow_2(tmp_path):
    from bench.data_gen import ROOT, count_records

    checkout = tmp_path / "bert"
    checkout.mkdir()
    (checkout / "create_pretraining_data.py").write_text(TF1_SCRIPT)
    (checkout / "tokenization.py").write_text("")
    (checkout / "helper.py").write_text("import tensorflow as tf\nassert tf.gfile\nWORD = 'tf1'\n")
    out = tmp_path / "out.tfrecord"
    run = forking.python(["-m", "bench.original_script", str(checkout), "--", f"--output_file={out}", "--count=7"],
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert count_records(str(out)) == 7 and (tmp_path / "out.tfrecord.txt").read_text() == "tf1"
    assert "wrote 7" in run.stderr
    wrong = forking.python(["-m", "bench.original_script", str(tmp_path)], cwd=ROOT)
    assert wrong.returncode == 1 and wrong.stderr.strip().splitlines() == [
        f"--original_dir={tmp_path}: no create_pretraining_data.py and tokenization.py there; give the directory of "
        "a clone of https://github.com/google-research/bert"]


def test_accelerator_cell_halves_the_batch_on_out_of_memory_and_reads_the_rows(tmp_path, monkeypatch):
    """`bench.accelerator` retries a cell at half the batch when the run ran out of GPU memory, and reads the rows
    that `bench.pretraining --rows_out` wrote; here on the CPU, with the out-of-memory failure made up once. The
    child compiles its XLA step into the persistent cache that `xla_cache_env` names, and the next child, with
    keras-hub beside ours, loads it."""
    import argparse
    import subprocess
    import sys

    from bench import accelerator

    batches = []

    def run(command, **kwargs):
        batches.append(next(int(arg.split("=")[1]) for arg in command if arg.startswith("--batch=")))
        if len(batches) == 1:  # the last line TensorFlow prints there with bert_tf's quiet log level
            return subprocess.CompletedProcess(command, 1, "", "tensorflow.python.framework.errors_impl."
                                               "ResourceExhaustedError: Graph execution error:\n\nOOM when "
                                               "allocating tensor with shape[312,16,128,128] and type float")
        assert command[:2] == [sys.executable, "-m"] and kwargs == dict(stderr=subprocess.PIPE, text=True, env=env,
                                                                        timeout=None), command
        return forking.python(command[1:], env=env)

    monkeypatch.setattr(accelerator.subprocess, "run", run)
    monkeypatch.setenv("BENCH_RESULTS", str(tmp_path))
    env = accelerator.xla_cache_env(str(tmp_path / "xla"))
    args = argparse.Namespace(steps=1, repeats=1)
    # fp32, not the plan's fp16: the loss scale's branches add seconds to tracing the child's two steps, and
    # test_pretraining_benchmark_trains_in_the_precision_it_names runs fp16 already
    batch, rows = accelerator.run_cell("tiny", 32, "fp32", 4, args, "none", env)
    assert batches == [4, 2] and batch == 2
    assert [row["implementation"] for row in rows] == ["bert_tf", "bert_tf (jit_compile)"]
    assert all(row["batch"] == 2 and row["seq"] == 32 and row["predictions"] == 20 and row["precision"] == "fp32"
               and float(row["sequences_per_s"]) > 0 for row in rows)
    assert (tmp_path / "pretraining.csv").exists()  # the rows went where BENCH_RESULTS said, not into the repo
    cached = {path.name for path in (tmp_path / "xla").iterdir()}
    assert cached and all(name.startswith("xla_compile_cache") for name in cached), cached
    # the run with a peer built in the same process loads those entries: it compiles nothing new
    batch, rows = accelerator.run_cell("tiny", 32, "fp32", 2, args, "keras_hub", env)
    assert [row["implementation"] for row in rows] == ["bert_tf", "bert_tf (jit_compile)",
                                                       "keras-hub BertMaskedLM (MLM only)"]
    assert {path.name for path in (tmp_path / "xla").iterdir()} == cached


def test_accelerator_keeps_the_users_xla_cache_and_stops_a_run_at_the_deadline(monkeypatch, capsys):
    import argparse
    import subprocess

    from bench import accelerator

    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_persistent_cache_directory=/mine --tf_xla_auto_jit=0")
    assert accelerator.xla_cache_env("/plan")["TF_XLA_FLAGS"] == ("--tf_xla_persistent_cache_directory=/mine "
                                                                 "--tf_xla_auto_jit=0")
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    assert accelerator.xla_cache_env("/plan")["TF_XLA_FLAGS"] == ("--tf_xla_auto_jit=0 "
                                                                 "--tf_xla_persistent_cache_directory=/plan")

    def run(command, **kwargs):
        assert 0 < kwargs["timeout"] <= 30
        raise subprocess.TimeoutExpired(command, kwargs["timeout"], stderr=b"XLA still compiling")

    monkeypatch.setattr(accelerator.subprocess, "run", run)
    args = argparse.Namespace(steps=1, repeats=1)
    deadline = accelerator.time.monotonic() + 30
    assert accelerator.run_cell("tiny", 32, "fp32", 4, args, "none", None, deadline) == (4, accelerator.CUT_SHORT)
    printed = capsys.readouterr()
    assert "stopped: --budget_s ran out" in printed.out and "XLA still compiling" in printed.err
    # a child the system killed is a failure that says so
    monkeypatch.setattr(accelerator.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, -9, None, ""))
    assert accelerator.run_cell("tiny", 32, "fp32", 4, args, "none", None, deadline) == (4, None)
    assert "exit status -9 (SIGKILL, which the kernel's out-of-memory killer sends)" in capsys.readouterr().err
    # a deadline already past starts nothing (an out-of-memory retry checks it too)
    assert accelerator.run_cell("tiny", 32, "fp32", 2, args, "none", None, deadline - 60) == (2, accelerator.CUT_SHORT)


def test_accelerator_runs_the_published_cells_alone_first_then_the_peers_until_the_budget_is_spent(
        tmp_path, monkeypatch):
    """The order that makes a plan cut short keep what matters most: every run alone before any run with the peers,
    the cells NVIDIA has a figure for (BERT-Large fp16) first; once --budget_s is spent nothing more starts, and the
    line that ends the plan names what failed and what did not run or was cut short. A made-up GPU and clock, each
    run taking 100 s; base bf16's run alone fails."""
    import csv

    from bench import accelerator, common

    clock = [0.0]
    calls = []

    def run_cell(preset, seq, precision, batch, args, peers, env, deadline):
        calls.append((preset, precision, peers, batch))
        assert deadline == 500 and "--tf_xla_persistent_cache_directory=" in env["TF_XLA_FLAGS"]
        clock[0] += 100
        if (preset, precision) == ("base", "bf16"):
            return batch, None
        rows = [{"implementation": "bert_tf", "sequences_per_s": "100.0"},
                {"implementation": "bert_tf (jit_compile)", "sequences_per_s": "400.0"}]
        return batch // 2, rows + ([{"implementation": "HF torch BertForPreTraining", "sequences_per_s": "160.0"}]
                                   if peers != "none" else [])

    monkeypatch.setattr(common, "tf_gpu_names", lambda: ["Made-up GPU"])
    monkeypatch.setattr(accelerator, "run_cell", run_cell)
    monkeypatch.setattr(accelerator.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    monkeypatch.setattr("sys.argv", ["bench.accelerator", "--presets", "base,large", "--seqs", "128",
                                     "--precisions", "bf16,fp16", "--peers", "hf_torch", "--budget_s", "500"])
    with pytest.raises(SystemExit) as exit_info:
        accelerator.main()
    assert calls == [("large", "fp16", "none", 312), ("base", "bf16", "none", 312), ("base", "fp16", "none", 312),
                     ("large", "bf16", "none", 312), ("large", "fp16", "hf_torch", 156)]
    assert str(exit_info.value) == ("failed: base seq 128 bf16; not run or cut short, --budget_s=500 spent: base seq "
                                    "128 fp16 with the peers, large seq 128 bf16 with the peers")
    with open(tmp_path / "accelerator.csv", newline="") as f:
        rows = {(row["preset"], row["precision"]): row for row in csv.DictReader(f)}
    assert set(rows) == {("large", "fp16"), ("base", "fp16"), ("large", "bf16")}
    large = rows["large", "fp16"]
    assert (large["batch"], large["ours_vs_nvidia"], large["peers_batch"], large["ours_vs_hf_torch"]) == (
        "156", f"{400 / 485.59:.2f}x", "78", "2.50x")
    assert rows["base", "fp16"]["ours_vs_nvidia"] == rows["base", "fp16"]["ours_vs_hf_torch"] == "-"

    # a run the deadline cuts short is listed as such, not as failed
    clock[0], calls[:] = 0.0, []
    monkeypatch.setattr("sys.argv", ["bench.accelerator", "--presets", "large", "--seqs", "128", "--precisions",
                                     "fp16", "--peers", "hf_torch", "--budget_s", "450"])

    def stopped(preset, seq, precision, batch, *rest):
        calls.append(preset)
        return batch, accelerator.CUT_SHORT

    monkeypatch.setattr(accelerator, "run_cell", stopped)
    with pytest.raises(SystemExit, match=r"^not run or cut short, --budget_s=450 spent: large seq 128 fp16$"):
        accelerator.main()
    assert calls == ["large"]


def test_accelerator_refuses_a_machine_without_a_gpu_in_one_line(monkeypatch):
    from bench import accelerator, common

    monkeypatch.setattr(common, "tf_gpu_names", lambda: [])
    monkeypatch.setattr("sys.argv", ["bench.accelerator"])
    with pytest.raises(SystemExit, match="TensorFlow sees no GPU on this machine; the GPU plan needs one"):
        accelerator.main()


def _tiny_rows(path):
    import csv

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert all(row["preset"] == "tiny" for row in rows)
    return rows


def test_serving_benchmark_runs_end_to_end_at_tiny_size(tmp_path):
    """A benchmark calls into the library and into other benchmarks' helpers; a changed signature on either side
    must fail here, not in the next full benchmark run. Its rows land in BENCH_RESULTS with figures in them."""
    import os

    done = forking.python(["-m", "bench.serving", "--preset", "tiny", "--repeats", "1"], cwd=forking.ROOT,
                          env={**os.environ, "BENCH_RESULTS": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = _tiny_rows(tmp_path / "serving.csv")
    assert len(rows) == 3 and all(float(row["export_raw_text_ms"]) > 0 for row in rows)
    for row in rows:  # the overhead is the quotient of the two times shown, within their rounding to 0.1 ms
        export, keras = float(row["export_raw_text_ms"]), float(row["keras_on_ids_ms"])
        overhead = float(row["overhead"].rstrip("%")) / 100
        assert (export - 0.05) / (keras + 0.05) - 1 - 5e-4 <= overhead <= (export + 0.05) / (keras - 0.05) - 1 + 5e-4


def test_data_gen_speedups_are_recomputed_from_the_seconds_and_import_seconds_of_the_row():
    """BENCHMARKS.md derives every data_gen ratio from the columns shown: end to end from `seconds`, after imports
    from `seconds` less `import_s`, of MB/s (text) and instances/s."""
    from bench.data_gen import _row

    script = {"seconds": 61.0, "import_seconds": 2.4, "instances": 215454, "corpus_mb": 20.0, "dupe_factor": 2,
              "peak_rss_mb": 1358}
    ours = {"seconds": 5.1, "import_seconds": 2.4, "instances": 194756, "corpus_mb": 20.0, "dupe_factor": 2,
            "peak_rss_mb": 836}
    row = _row("bert_tf data_gen", 2, ours, {"": script, "_vs_script": None})
    assert row["text_speedup"] == f"{61.0 / 5.1:.2f}"
    assert row["text_speedup_after_import"] == f"{(61.0 - 2.4) / (5.1 - 2.4):.2f}" == "21.70"
    assert row["speedup_after_import"] == f"{(61.0 - 2.4) / (5.1 - 2.4) * 194756 / 215454:.2f}"
    assert row["text_speedup_vs_script"] == "" and row["seconds"] == "5.1" and row["import_s"] == "2.4"


def _fork_children(monkeypatch, module, tmp_path):
    """Runs `module`'s main in this process with its rows written to `tmp_path`, and the child processes it starts
    (`python -m <module> --child ...`, by `subprocess.run(..., capture_output=True, text=True)`) forked from the
    tests' server: what a fresh interpreter adds, TensorFlow's import, is not what these tests check. Returns the
    list of the children's `--child` values, filled as they run."""
    import sys

    from bench import common

    children = []

    def run(command, **kwargs):
        assert command[:3] == [sys.executable, "-m", module.__name__] and kwargs == dict(capture_output=True,
                                                                                          text=True), command
        children.append(command[command.index("--child") + 1])
        return forking.python(command[1:])

    monkeypatch.setattr(module.subprocess, "run", run)
    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    return children


def test_memory_benchmark_runs_each_case_in_a_child_at_tiny_size(tmp_path, monkeypatch):
    """As above, for `bench.memory`: its four cases, each in a child process, ours and HF torch's, each with a peak
    above its framework's."""
    from bench import memory

    children = _fork_children(monkeypatch, memory, tmp_path)
    monkeypatch.setattr("sys.argv", ["bench.memory", "--preset", "tiny", "--batch", "2", "--seq", "32"])
    memory.main()
    rows = _tiny_rows(tmp_path / "memory.csv")
    assert [row["case"] for row in rows] == children == list(memory.CASES)
    assert all(float(row["peak_mb"]) >= float(row["framework_mb"]) > 0 for row in rows)


@pytest.mark.parametrize("precision,policy,scaled", [("fp32", "float32", False), ("bf16", "mixed_bfloat16", False),
                                                     ("fp16", "mixed_float16", True)])
def test_pretraining_benchmark_trains_in_the_precision_it_names(precision, policy, scaled):
    import keras

    from bench import pretraining

    config = BertConfig.preset("tiny", vocab_size=pretraining.VOCAB)
    data = pretraining.make_batch(2, 32)
    for run in (pretraining.ours(config, data, 1, precision), pretraining.keras_hub_mlm(config, data, 1, precision)):
        run()
        assert run.model.dtype_policy.name == policy
        assert isinstance(run.model.optimizer, keras.optimizers.LossScaleOptimizer) == scaled
        assert int(run.model.optimizer.iterations.numpy()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--seqs", "128,x"], "--seqs=128,x: the plan's cells are 128, 512"),
    (["--precisions", "fp8"], "--precisions=fp8: choose from fp32, bf16, fp16"),
    (["--peers", "torch"], "--peers=torch: choose from keras_hub, hf_torch, or none"),
    (["--presets", "huge"], "--presets: unknown huge"),
    (["--steps", "0"], "--steps and --repeats must be at least 1"),
    (["--budget_s", "-5"], "--budget_s=-5.0: give seconds, or 0 for no limit"),
    (["--budget_s", "inf"], "--budget_s=inf: give seconds, or 0 for no limit"),
    (["--presets", "large,base,large"], "--presets=large,base,large: each may be named once"),
    (["--seqs", "128,128"], "--seqs=128,128: each may be named once"),
])
def test_accelerator_refuses_bad_flags_in_one_line(argv, message, monkeypatch, capsys):
    from bench import accelerator

    monkeypatch.setattr("sys.argv", ["bench.accelerator", *argv])
    with pytest.raises(SystemExit) as exit_info:
        accelerator.main()
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def _bench_worktrees(prefix):
    """This repository's git worktrees in a benchmark's scratch directories (named `prefix`...): other sessions'
    worktrees and HEAD's commit may change while a test runs, these must not."""
    import subprocess

    from bench import common

    listed = subprocess.run(["git", "-C", common.ROOT, "worktree", "list", "--porcelain"], capture_output=True,
                            text=True).stdout
    return {line for line in listed.splitlines() if line.startswith("worktree ") and prefix in line}


def _refused_in_one_line(bench, args, message, monkeypatch, capsys):
    """`bench.main()` with `args` stops with `message` on its last line (argparse's or SystemExit's), no traceback."""
    monkeypatch.setattr("sys.argv", [bench.__name__, *args])
    with pytest.raises(SystemExit) as refused:
        bench.main()
    error = str(refused.value.code) if refused.value.code != 2 else capsys.readouterr().err
    assert message in error.strip().splitlines()[-1] and "Traceback" not in error, (args, error)


def test_export_speed_compares_this_checkout_with_a_revision_and_refuses_bad_flags(tmp_path, monkeypatch, capsys):
    """`bench.export_speed` against HEAD (a temporary git worktree, removed afterwards): every measure has a figure
    for both sides; a bad revision, preset or repeat count is one line; no scratch directory is left behind."""
    import csv

    from bench import common, export_speed

    scratch = _scratch("bench_export_")
    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    worktrees = _bench_worktrees("bench_export_")
    monkeypatch.setattr("sys.argv", ["bench.export_speed", "--baseline", "HEAD", "--repeats", "1"])
    export_speed.main()
    with open(tmp_path / "export_speed.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["measure"] for row in rows] == ["export_cpu_s", "load_cpu_s", "saved_model_kb", "batch_1_ms",
                                                "batch_8_ms"]
    assert all(float(row["ours"]) > 0 and float(row["baseline"]) > 0 for row in rows)
    assert _bench_worktrees("bench_export_") == worktrees
    for args, message in ((["--baseline", "no-such-revision"], "--baseline=no-such-revision: "),
                          (["--baseline", "HEAD", "--preset", "huge"], "--preset: "),
                          (["--baseline", "HEAD", "--repeats", "0"], "--repeats must be at least 1")):
        _refused_in_one_line(export_speed, args, message, monkeypatch, capsys)
    assert _scratch("bench_export_") == scratch  # nothing left behind


def test_gemm_chain_times_the_encoders_gemms_against_the_floor_of_their_flops(monkeypatch):
    """`bench.profile --gemm_chain`: the chain runs every layer's GEMMs, and its floor is the encoder's FLOPs less the
    pooler's (which the chain leaves out) at the best rate measured (here fixed, so the arithmetic is checked)."""
    from bench import common, profile

    config = BertConfig.preset("tiny", vocab_size=100)
    monkeypatch.setattr(common, "matmul_rate", lambda dtype, shape, batch: 2e9)
    monkeypatch.setattr(common, "torch_matmul_rate", lambda dtype, shape, batch: 1e9)
    seconds, floor = profile.gemm_chain(config, 2, 16, "fp32", repeats=1)
    assert seconds > 0
    assert floor == pytest.approx((encoder_flops(config, 2, 16) - 2 * 2 * 128 * 128) / 2e9)


def test_dropout_rng_times_keras_and_ours_with_and_without_xla():
    """`bench.profile --dropout` on a tiny tensor: all four programs run and are timed."""
    from bench import profile

    times = profile.dropout_rng(2, 4, 8, repeats=1)
    assert set(times) == {(layer, mode) for layer in ("keras", "ours") for mode in ("xla", "graph")}
    assert all(seconds > 0 for seconds in times.values())


def test_layer_norm_ab_times_keras_layer_norm_against_ours_alone_and_in_the_model():
    """`bench.profile --layer_norm` at tiny size: each pair is timed, and the Keras side really traces Keras's
    element-wise LayerNorm (no oneDNN kernel in its graph) while ours traces the kernel where it runs here."""
    import tensorflow as tf

    from bench import profile
    from bert_tf.layers import LayerNorm
    from bert_tf.layers.layer_norm import kernel_available

    config = BertConfig.preset("tiny", vocab_size=profile.VOCAB)
    times = profile.layer_norm_ab(config, 2, 8, "bf16", repeats=1, chain=2)
    assert set(times) == {"one LayerNorm", "forward", "forward, batch 1", "train"}
    assert all(seconds > 0 for pair in times.values() for seconds in pair)
    layer = LayerNorm()
    layer.build((None, 8))
    traced = {}
    for name, context in (("keras", profile.keras_layer_norms()), ("ours", contextlib.nullcontext())):
        with context:
            graph = tf.function(layer.__call__).get_concrete_function(tf.ones((2, 8))).graph
        traced[name] = {op.type for op in graph.get_operations()}
    assert "_MklLayerNorm" not in traced["keras"] and "Mean" in traced["keras"]
    assert ("_MklLayerNorm" in traced["ours"]) == (kernel_available() and onednn.onednn_enabled())


def test_gelu_ab_times_keras_gelu_against_ours_alone_and_in_the_train_step():
    """`bench.profile --gelu` at tiny size: each pair is timed, and the Keras side's train step really traces
    TensorFlow's element-wise GELU (no XLA-compiled function in its graph) while ours traces the two kernels."""
    import tensorflow as tf

    from bench import profile
    from bert_tf.layers import BertTransformerBlock
    from tests.layers.test_gelu import xla_functions

    config = BertConfig.preset("tiny", vocab_size=profile.VOCAB)
    times = profile.gelu_ab(config, 2, 8, "bf16", repeats=1, chain=2)
    assert set(times) == {"one GELU", "train"}
    assert all(seconds > 0 for pair in times.values() for seconds in pair)
    block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16)
    x = tf.ones((2, 3, 8))
    compiled = {}
    for name, context in (("keras", profile.keras_gelus()), ("ours", contextlib.nullcontext())):
        with context:
            compiled[name] = xla_functions(tf.function(lambda x: block(x, training=True)), x)
    assert compiled == {"keras": 0, "ours": 1}


def test_softmax_ab_times_the_float32_softmax_against_ours_in_the_bf16_forward_pass():
    """`bench.profile --softmax` at tiny size: each pair is timed, and the reference really traces the float32
    softmax while ours hands oneDNN the bfloat16 scores where it takes them."""
    import keras
    import tensorflow as tf

    from bench import profile
    from bert_tf.layers import BertSelfAttention
    from tests.layers.test_attention import onednn_takes_bfloat16, softmax_dtypes

    config = BertConfig.preset("tiny", vocab_size=profile.VOCAB)
    times = profile.softmax_ab(config, 2, 8, repeats=1)
    assert set(times) == {"forward", "forward, batch 1"}
    assert all(seconds > 0 for pair in times.values() for seconds in pair)
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = BertSelfAttention(hidden_size=128, num_heads=2)
        layer.build((None, None, 128))
    finally:
        keras.config.set_dtype_policy("float32")
    x = tf.ones((2, 3, 128))
    softmaxes = {}
    for name, context in (("reference", profile.float32_softmaxes()), ("ours", contextlib.nullcontext())):
        with context:
            graph = tf.function(lambda x: layer(x, training=False)).get_concrete_function(x).graph.as_graph_def()
        softmaxes[name] = softmax_dtypes(graph)
    assert softmaxes == {"reference": {"float32"}, "ours": {"bfloat16" if onednn_takes_bfloat16() else "float32"}}


def test_adam_ab_times_the_op_by_op_update_against_the_compiled_one_in_the_train_step():
    """`bench.profile --adam` at tiny size: the pair is timed, and the reference's train step really traces the
    op-by-op update while ours calls the compiled one."""
    from unittest import mock

    from bench import profile
    from bert_tf import BertClassifier, adam_updates

    config = BertConfig.preset("tiny", vocab_size=profile.VOCAB)
    with mock.patch.object(adam_updates, "original_update", wraps=adam_updates.original_update) as compiled:
        times = profile.adam_ab(config, 2, 8, "fp32", repeats=1)
    assert set(times) == {"train, original_adamw"}
    assert all(seconds > 0 for pair in times.values() for seconds in pair)
    # each step traced once: the reference's calls none, ours one per (float32) variable
    assert compiled.call_count == len(BertClassifier(BertEncoder(config), num_classes=2).trainable_weights)


def test_profile_refuses_flags_its_measurement_does_not_read(monkeypatch, capsys):
    """`bench.profile`: --gemm, --gemm_chain, --dropout, --layer_norm, --gelu, --softmax and --adam are one
    measurement each, and a trace flag given to one that does not read it is refused in one line rather than
    ignored."""
    from bench import profile

    for args, message in ((["--dropout", "--xla"], "--xla is not read with --dropout"),
                          (["--dropout", "--precision", "bf16"], "--precision is not read with --dropout"),
                          (["--gemm", "--mode", "forward"], "--mode is not read with --gemm"),
                          (["--gemm_chain", "--top", "3"], "--top is not read with --gemm_chain"),
                          (["--layer_norm", "--mode", "forward"], "--mode is not read with --layer_norm"),
                          (["--gelu", "--xla"], "--xla is not read with --gelu"),
                          (["--softmax", "--precision", "bf16"], "--precision is not read with --softmax"),
                          (["--adam", "--mode", "forward"], "--mode is not read with --adam"),
                          (["--gelu", "--layer_norm"], "--layer_norm and --gelu are separate measurements"),
                          (["--gemm", "--dropout"], "--gemm and --dropout are separate measurements")):
        monkeypatch.setattr("sys.argv", ["bench.profile", *args])
        with pytest.raises(SystemExit):
            profile.main()
        error = capsys.readouterr().err
        assert message in error.strip().splitlines()[-1] and "Traceback" not in error, (args, error)


def test_optimizer_step_builds_each_optimizer_it_compares():
    """bench.optimizer_step's callables on two small variables: each update and each first update runs (a changed
    create_optimizer or Keras AdamW signature fails here), compiled or op by op as it says, the first updates'
    compiled functions new each time. Twice each: the warmup's first rate is 0."""
    from unittest import mock

    import keras
    import numpy as np

    from bench import optimizer_step
    from bert_tf import adam_updates

    variables = [keras.Variable(np.ones((3, 2), "float32"), name="kernel"),
                 keras.Variable(np.ones(2, "float32"), name="bias")]
    kinds = [("keras_adamw", True), ("adamw", True), ("original_adamw", False), ("original_adamw", True)]
    for kind, compiled in kinds:
        before = variables[0].numpy()
        first_update = optimizer_step.first_update_fn(kind, variables, compiled)
        with mock.patch.object(adam_updates, "_assign", side_effect=adam_updates._assign) as traced:
            first_update(), first_update()
        # a trace per variable per first update: the compiled functions are new each time
        assert traced.call_count == (4 if compiled and kind == "original_adamw" else 0), (kind, compiled)
        assert not np.array_equal(variables[0].numpy(), before), kind
    for kind, compiled in kinds[1:]:
        before = variables[1].numpy()
        with mock.patch.object(adam_updates, "original_update", wraps=adam_updates.original_update) as called:
            update = optimizer_step.update_fn(kind, variables, compiled)
            update(), update()
        # traced once, a call per variable
        assert called.call_count == (2 if compiled and kind == "original_adamw" else 0), (kind, compiled)
        assert not np.array_equal(variables[1].numpy(), before), kind


def test_ffn_fusion_ab_runs_both_variants_in_children_and_refuses_bad_flags(tmp_path, monkeypatch, capsys):
    """`bench.ffn_fusion` at tiny size, its children forked (as in the memory test); a row per shape with both
    variants timed; a bad shape or count is one line."""
    from bench import ffn_fusion

    variants = _fork_children(monkeypatch, ffn_fusion, tmp_path)
    monkeypatch.setattr("sys.argv", ["bench.ffn_fusion", "--preset", "tiny", "--shapes", "2x8", "--rounds", "2",
                                     "--calls", "2"])
    ffn_fusion.main()
    assert variants == ["fused", "unfused", "unfused", "fused"]  # alternating order
    rows = _tiny_rows(tmp_path / "ffn_fusion.csv")
    assert len(rows) == 1 and float(rows[0]["fused_ms"]) > 0 and float(rows[0]["unfused_ms"]) > 0
    for argv, message in ((["--shapes", "8"], "--shapes: '8': give batch x seq pairs"),
                          (["--calls", "0"], "--rounds and --calls must be at least 1")):
        monkeypatch.setattr("sys.argv", ["bench.ffn_fusion", *argv])
        with pytest.raises(SystemExit) as exit_info:
            ffn_fusion.main()
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_vocab_learner_benchmark_learns_the_same_vocabulary_both_ways(tmp_path, monkeypatch, capsys):
    """`bench.vocab_learner` at a tiny size: both learners run on the built-in corpus and agree, and the rows say so."""
    import csv
    import sys

    from bench import common, vocab_learner

    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["vocab_learner", "--megabytes", "0.03", "--vocab_size", "400", "--repeats", "1"])
    vocab_learner.main()
    with open(tmp_path / "vocab_learner.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["impl"] for row in rows] == ["data_gen.wordpiece_learner", "tensorflow-text learner"]
    assert all(row["identical_vocab"] == "True" and 200 < int(row["tokens"]) <= 400 for row in rows)
    assert all(float(row["seconds"]) > 0 and float(row["ratio_vs_tf_text"]) > 0 for row in rows)
    for argv, message in ((["--repeats", "0"], "--repeats at least 1"),
                          (["--megabytes", "0.03", "--vocab_size", "50"], "--vocab_size=50 leaves no room")):
        monkeypatch.setattr(sys, "argv", ["vocab_learner", *argv])
        with pytest.raises(SystemExit):
            vocab_learner.main()
        assert message in capsys.readouterr().err


def test_inference_policy_ab_times_three_policies_with_identical_bfloat16_outputs(tmp_path, monkeypatch, capsys):
    """`bench.inference_policy` at tiny size: one row per shape with each policy timed, and the inference policy's
    outputs equal to mixed_bfloat16's; a bad count is one line."""
    from bench import common, inference_policy

    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    monkeypatch.setattr("sys.argv", ["bench.inference_policy", "--preset", "tiny", "--shapes", "2x8,1x16",
                                     "--rounds", "2", "--calls", "2"])
    inference_policy.main()
    rows = _tiny_rows(tmp_path / "inference_policy.csv")
    assert [(row["batch"], row["seq"]) for row in rows] == [("2", "8"), ("1", "16")]
    assert all(row["identical"] == "True" and float(row["bfloat16_ms"]) > 0 and float(row["float32_ms"]) > 0
               for row in rows)
    monkeypatch.setattr("sys.argv", ["bench.inference_policy", "--rounds", "0"])
    with pytest.raises(SystemExit) as exit_info:
        inference_policy.main()
    assert exit_info.value.code == 2 and "--rounds and --calls must be at least 1" in capsys.readouterr().err


def test_input_pipeline_benchmark_frees_the_librarys_iterators_at_once(tmp_path):
    """`bench.input_pipeline` end to end at a small size: both settings read records data_gen wrote, and none of
    the library's iterator frees (autotuning off, `bert_tf.tf_data`) is a stall."""
    import csv
    import os

    done = forking.python(["-m", "bench.input_pipeline", "--megabytes", "0.3", "--batches", "20", "--rounds", "1",
                           "--seconds", "0.5", "--frees", "3"], cwd=forking.ROOT,
                          env={**os.environ, "BENCH_RESULTS": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "input_pipeline.csv", newline="") as f:
        rows = {row["setting"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"autotuned", "ours"} and all(float(row["batches_per_s"]) > 0 for row in rows.values())
    assert rows["ours"]["stalls"] == "0" and float(rows["ours"]["longest_free_s"]) < 0.1
    refused = forking.python(["-m", "bench.input_pipeline", "--frees", "0"], cwd=forking.ROOT,
                             env={**os.environ, "BENCH_RESULTS": str(tmp_path)})
    assert refused.returncode == 2 and "--frees and --replicas must be at least 1" in refused.stderr


def test_squad_features_benchmark_runs_every_route(tmp_path):
    """`bench.squad_features` end to end at a small size: training's route, prediction's, the original algorithm's
    and training's on a baseline commit (HEAD here) each read every question of the SQuAD file it writes and make
    as many windows (that the windows are the same is tests/tasks/test_squad.py's), the baseline's worktree is
    removed; bad sizes and routes are refused in one line."""
    import csv
    import os

    env = {**os.environ, "BENCH_RESULTS": str(tmp_path)}
    scratch = _scratch("bench_squad_features_")
    worktrees = _bench_worktrees("bench_squad_features_")
    done = forking.python(["-m", "bench.squad_features", "--questions", "40", "--rounds", "1", "--seq", "96",
                           "--doc_stride", "24", "--baseline", "HEAD"], cwd=forking.ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "squad_features.csv", newline="") as f:
        rows = {row["route"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"window_arrays", "window_features", "reference", "window_arrays@HEAD"}
    assert len({row["windows"] for row in rows.values()}) == 1 and int(rows["reference"]["windows"]) > 80
    assert {row["doc_stride"] for row in rows.values()} == {"24"}
    assert _bench_worktrees("bench_squad_features_") == worktrees
    assert _scratch("bench_squad_features_") == scratch
    assert rows["window_arrays"]["time_vs_ours"] == "1.00" and all(float(r["seconds"]) > 0 for r in rows.values())
    for argv, message in ((["--questions", "0"], "--questions=0: must be at least 1"),
                          (["--seq", "64"], "--seq=64: must be at least 72"),
                          (["--doc_stride", "0"], "--doc_stride=0: must be at least 1"),
                          (["--routes", "reference"], "--routes=reference: a comma list of")):
        refused = forking.python(["-m", "bench.squad_features", *argv], cwd=forking.ROOT, env=env)
        assert refused.returncode == 2 and message in refused.stderr


def _scratch(prefix):
    """The scratch directories named `prefix`... in the temporary directory."""
    import glob
    import os
    import tempfile

    return set(glob.glob(os.path.join(tempfile.gettempdir(), prefix + "*")))


def _against_head(bench, prefix, argv, tmp_path, monkeypatch):
    """The CSV rows of `bench.main()` run against HEAD with `argv`, which must leave no worktree or scratch
    directory (named `prefix`...) behind."""
    import csv

    from bench import common

    before, worktrees = _scratch(prefix), _bench_worktrees(prefix)
    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    monkeypatch.setattr("sys.argv", [bench.__name__, "--baseline", "HEAD", *argv])
    bench.main()
    assert _bench_worktrees(prefix) == worktrees and _scratch(prefix) == before
    with open(tmp_path / (bench.__name__.split(".")[-1] + ".csv"), newline="") as f:
        return list(csv.DictReader(f))


def test_squad_postprocess_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.squad_postprocess` against HEAD at a small size: every measure has figures for both sides (whose
    outputs it requires to be the same: a baseline that answers otherwise stops it), the worktree is removed, and bad
    flags are one line."""
    from bench import common, squad_postprocess

    scratch = _scratch("bench_squad_post_")
    rows = _against_head(squad_postprocess, "bench_squad_post_", ["--questions", "12", "--rounds", "1"], tmp_path,
                         monkeypatch)
    assert [row["measure"] for row in rows] == ["features_s", "features_peak_rss_growth_mb", "postprocess_s",
                                                "tokenize_s"]
    assert all(float(row["ours"]) > 0 and float(row["baseline"]) > 0 for row in rows if row["measure"].endswith("_s"))
    assert float(rows[1]["ours"]) >= 0 and float(rows[1]["baseline"]) >= 0  # a tiny input's growth can be 0
    assert rows[0]["size"].endswith(" windows") and int(rows[0]["size"].split()[0]) >= 12
    for args, message in ((["--baseline", "no-such-revision"], "--baseline=no-such-revision: "),
                          (["--baseline", "HEAD", "--questions", "0"], "--questions=0: must be at least 1"),
                          (["--baseline", "HEAD", "--rounds", "0"], "--rounds=0: must be at least 1")):
        _refused_in_one_line(squad_postprocess, args, message, monkeypatch, capsys)
    real = squad_postprocess.run_in_checkout  # a baseline whose answers differ stops the benchmark
    monkeypatch.setattr(squad_postprocess, "run_in_checkout", lambda code, checkout, *a: {
        **real(code, checkout, *a), **({"answers_digest": "other"} if checkout != common.ROOT else {})})
    _refused_in_one_line(squad_postprocess, ["--baseline", "HEAD", "--questions", "5", "--rounds", "1"],
                         "HEAD and this checkout differ in answers", monkeypatch, capsys)
    assert _scratch("bench_squad_post_") == scratch


def test_extract_features_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.extract_features` against HEAD at a small size: both sides timed and their written values compared
    (the same weights: at most float32 rounding apart), nothing left behind; bad flags are one line, and so is
    output whose tokens differ."""
    import json

    from bench import extract_features

    (row,) = _against_head(extract_features, "bench_extract_", ["--lines", "6", "--rounds", "1"], tmp_path,
                           monkeypatch)
    assert row["lines"] == "6" and float(row["ours_s"]) > 0 and float(row["baseline_s"]) > 0
    assert float(row["largest_value_difference"]) < 1e-4
    for args, message in ((["--baseline", "no-such-revision"], "--baseline=no-such-revision: "),
                          (["--baseline", "HEAD", "--lines", "0"], "--lines=0: must be at least 1")):
        _refused_in_one_line(extract_features, args, message, monkeypatch, capsys)
    record = {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [0.5]}]}]}
    for name, token in (("a", "[CLS]"), ("b", "[SEP]")):
        record["features"][0]["token"] = token
        (tmp_path / name).write_text(json.dumps(record) + "\n")
    with pytest.raises(SystemExit, match="line 0 has other tokens or layers"):
        extract_features.largest_difference(tmp_path / "a", tmp_path / "b")
    assert extract_features.largest_difference(tmp_path / "a", tmp_path / "a") == 0


def test_task_files_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.task_files` against HEAD at a small size: an MNLI-format file that the task reads whole in both
    checkouts (a count read otherwise stops it), both measures with figures for both sides, nothing left behind;
    bad flags are one line."""
    from bench import common, task_files

    scratch = _scratch("bench_task_files_")
    rows = _against_head(task_files, "bench_task_files_", ["--examples", "300", "--rounds", "1"], tmp_path,
                         monkeypatch)
    assert [row["measure"] for row in rows] == ["read_s", "peak_rss_growth_mb"]
    assert rows[0]["examples"] == "300" and float(rows[0]["ours"]) > 0 and float(rows[0]["baseline"]) > 0
    for args, message in ((["--baseline", "no-such-revision"], "--baseline=no-such-revision: "),
                          (["--baseline", "HEAD", "--examples", "0"], "--examples=0: must be at least 1")):
        _refused_in_one_line(task_files, args, message, monkeypatch, capsys)
    real = task_files.run_in_checkout  # a checkout that reads another number of examples stops the benchmark
    monkeypatch.setattr(task_files, "run_in_checkout", lambda code, checkout, *a: {
        **real(code, checkout, *a), **({"examples": 1} if checkout != common.ROOT else {})})
    _refused_in_one_line(task_files, ["--baseline", "HEAD", "--examples", "5", "--rounds", "1"],
                         "the runs read [1, 5] examples of the 5 written", monkeypatch, capsys)
    assert _scratch("bench_task_files_") == scratch


def test_finetune_memory_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.finetune_memory` against HEAD at a small size: both checkouts fine-tune for the steps asked (a
    count trained otherwise stops it), both measures with figures for both sides, nothing left behind; bad flags
    are one line."""
    from bench import common, finetune_memory

    scratch = _scratch("bench_finetune_memory_")
    rows = _against_head(finetune_memory, "bench_finetune_memory_",
                         ["--examples", "96", "--steps", "2", "--rounds", "1"], tmp_path, monkeypatch)
    assert [row["measure"] for row in rows] == ["run_s", "peak_rss_growth_mb"]
    assert rows[0]["steps"] == "2" and float(rows[0]["ours"]) > 0 and float(rows[0]["baseline"]) > 0
    for args, message in ((["--baseline", "HEAD", "--steps", "0"], "--steps=0: must be at least 1"),
                          (["--baseline", "HEAD", "--examples", "40", "--steps", "2"],
                           "--steps=2 of 32 examples is more than one epoch of --examples=40")):
        _refused_in_one_line(finetune_memory, args, message, monkeypatch, capsys)
    real = finetune_memory.run_in_checkout  # a checkout that trains another number of steps stops the benchmark
    monkeypatch.setattr(finetune_memory, "run_in_checkout", lambda code, checkout, *a: {
        **real(code, checkout, *a), **({"steps": 7} if checkout != common.ROOT else {})})
    _refused_in_one_line(finetune_memory, ["--baseline", "HEAD", "--examples", "64", "--steps", "1", "--rounds", "1"],
                         "the runs trained [1, 7] steps, not 1", monkeypatch, capsys)
    assert _scratch("bench_finetune_memory_") == scratch


def test_tfds_read_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.tfds_read` against HEAD at a small size: both readers timed and the SQuAD examples measured on both
    sides (which must read the same examples: a baseline that reads others stops it), nothing left behind; bad
    flags are one line."""
    from bench import common, tfds_read

    rows = _against_head(tfds_read, "bench_tfds_read_", ["--mnli", "40", "--squad", "30", "--rounds", "1"], tmp_path,
                         monkeypatch)
    assert [(row["measure"], row["rows"]) for row in rows] == [("mnli_s", "40"), ("squad_s", "30"),
                                                               ("squad_examples_peak_rss_growth_mb", "30")]
    assert all(float(row["ours"]) > 0 and float(row["baseline"]) > 0 for row in rows[:2])
    assert float(rows[2]["ours"]) >= 0 and float(rows[2]["baseline"]) >= 0  # a tiny input's growth can be 0
    _refused_in_one_line(tfds_read, ["--baseline", "HEAD", "--squad", "0"], "--squad=0: must be at least 1",
                         monkeypatch, capsys)
    real = tfds_read.run_in_checkout
    monkeypatch.setattr(tfds_read, "run_in_checkout", lambda code, checkout, *a: {
        **real(code, checkout, *a), **({"squad_digest": "other"} if checkout != common.ROOT else {})})
    _refused_in_one_line(tfds_read, ["--baseline", "HEAD", "--mnli", "5", "--squad", "5", "--rounds", "1"],
                         "HEAD and this checkout read other squad examples", monkeypatch, capsys)


def test_checkpoint_restore_benchmark_compares_this_checkout_with_a_revision(tmp_path, monkeypatch, capsys):
    """`bench.checkpoint_restore` against HEAD at a tiny width: a checkpoint with Adam slots that both checkouts
    load whole (the same count of weights), both measures with figures for both sides, nothing left behind; bad
    flags are one line."""
    from bench import checkpoint_restore

    rows = _against_head(checkpoint_restore, "bench_checkpoint_restore_",
                         ["--layers", "1", "--hidden", "64", "--rounds", "1"], tmp_path, monkeypatch)
    assert [row["measure"] for row in rows] == ["load_s", "peak_rss_growth_mb"]
    assert rows[0]["checkpoint_tensors"] == str(3 * (16 + 5 + 2) + 1)  # a layer's, the embeddings', the pooler's
    assert float(rows[0]["ours"]) > 0 and float(rows[0]["baseline"]) > 0
    for args, message in ((["--baseline", "HEAD", "--layers", "0"], "--layers=0: must be at least 1"),
                          (["--baseline", "HEAD", "--hidden", "100"], "--hidden=100: must be a multiple of 64")):
        _refused_in_one_line(checkpoint_restore, args, message, monkeypatch, capsys)


def test_docstring_text_is_the_same_whatever_the_process_imported_before():
    """`docstring_lines`, the text of many test fixtures, in a fresh process before and after importing standard
    library submodules that become attributes of the modules it reads (http.server, logging.handlers, ...)."""
    code = ("from bench.common import docstring_lines\n"
            "before = docstring_lines()\n"
            "import email.mime.text, http.server, logging.handlers, unittest.mock\n"
            "assert docstring_lines() == before and len(before) > 1000, len(before)\n")
    done = forking.python(["-c", code], cwd=forking.ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
