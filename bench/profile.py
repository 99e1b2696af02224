"""Where our step's time goes: a per-op-type breakdown from a `tf.profiler` trace of one forward pass or train step.

  python -m bench.profile [--cell base-128] [--mode train] [--xla] [--top 15]

  python -m bench.profile --gemm [--cell small-128]

  python -m bench.profile --gemm_chain [--cell base-128] [--precision bf16]

  python -m bench.profile --dropout [--cell base-128]

  python -m bench.profile --layer_norm [--cell base-128] [--precision bf16]

  python -m bench.profile --gelu [--cell base-128] [--precision bf16]

  python -m bench.profile --softmax [--cell small-128]

Runs `bench.model_speed`'s step for the cell once to warm up, traces one more under `tf.profiler.experimental`, and
reads the trace (`*.xplane.pb`) back: the time of every op event on TF's executor threads, summed by op type, and
the heaviest single ops (layer index folded, so `layer_N` sums the 12 layers). Op times on the two inter-op threads
overlap, so shares are of the summed op time, not of the wall time. Under `--xla` the breakdown is of XLA's thunks
instead (see `op_times`): in BERT's step `MatMul`/`dot` are the GEMMs, `call` the dropout masks' random numbers
(Philox, expanded by XLA into scalar 64-bit arithmetic on CPU) and `wrapped_reduce-window` LayerNorm's
reductions (XLA's CPU compiler splits each 512- or 768-wide row sum into a reduce-window of 32-wide pieces).

`--dropout` times one dropout of the cell's hidden states ([batch, seq, H]) compiled alone by XLA (`dropout_rng`):
Keras's `Dropout`, which leaves TF to pick the random-number generator, against ours, which names Philox (see
`bert_tf.layers.Dropout`), and each without XLA.

`--layer_norm` times Keras's element-wise LayerNorm against ours, one oneDNN kernel (`bert_tf.layers.LayerNorm`),
without XLA: one LayerNorm of the cell's [batch * seq, H] activations, the cell's forward pass, the same at batch 1,
and its train step, each pair in interleaved rounds (`layer_norm_ab`).

`--gelu` times the FFN's GELU in TensorFlow's element-wise ops (Keras's, with autodiff's gradient) against ours, two
XLA-compiled kernels (`bert_tf.layers.gelu`), without XLA around them: forward and gradient of the cell's
[batch * seq, 4H] activations, and its train step (`gelu_ab`). Inference is not timed: there the GELU is fused
into the GEMM either way.

`--softmax` times the bf16 forward pass with the attention's float32 softmax (its bfloat16 scores cast up, the
probabilities cast back) against ours, where oneDNN's softmax takes the bfloat16 scores (`softmax_ab`), at the cell's
batch and at batch 1.

`--adam` times the cell's train step with `create_optimizer`'s default optimizer (`original_adamw`, with its
clipping and schedule), its update op by op against compiled (`bert_tf.adam_updates`; `adam_ab`).

`--gemm`, `--gemm_chain`, `--dropout`, `--layer_norm`, `--gelu`, `--softmax` and `--adam` are one measurement each,
and refuse the trace flags they do not read.

`--gemm_chain` times the encoder's forward GEMMs alone (`gemm_chain`): how near the floor a forward pass with
nothing between its GEMMs would be. `--gemm` times instead the three GEMMs of the cell's FFN input layer (tokens x H x 4H) in TF (its oneDNN or Eigen
kernel), in XLA (`jit_compile`) and in torch: forward `x @ W`, input gradient `dy @ W^T` and weight gradient
`x^T @ dy`, the shapes a train step runs. TF's and XLA's GEMMs are chained through a scalar added to the input (one
element-wise pass, small against a GEMM, counted against them).
"""

import argparse
import collections
import contextlib
import glob
import os
import re
import tempfile
import time
from unittest import mock

from bench.model_speed import CELLS, VOCAB, make_batch, ours


def op_times(logdir):
    """(time by op type, time by op name with the layer index folded), in seconds, from the trace in `logdir`.

    Without XLA the events are TF ops on the executor threads (`tf_Compute`). An XLA-compiled step is one op there;
    its work shows as XLA's thunks on the Eigen threads, named after the HLO instruction (`MatMul.12`, `call.3`,
    `wrapped_reduce-window.7`): those are summed by name with the number dropped, outermost events only. An XLA
    function called inside a graph (`bert_tf.layers.gelu`) runs its thunks on the executor thread that calls it,
    inside its `CpuExecutable` event: counted the same way."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1], "rb") as f:
        space.ParseFromString(f.read())
    by_type, by_name = collections.Counter(), collections.Counter()

    def add_thunk(name, event):
        by_type[re.sub(r"\.\d+$", "", name)] += event.duration_ps / 1e12
        by_name[name] += event.duration_ps / 1e12

    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            executor = line.name.startswith("tf_Compute")  # TF executor threads: one event per op run
            if not executor and "_Eigen" not in line.name:
                continue
            cluster_end, thunk_end = -1, -1
            for event in sorted(line.events, key=lambda e: e.offset_ps):
                name = names.get(event.metadata_id, "")
                if name.startswith("CpuExecutable"):  # a whole XLA cluster: its thunks are counted, not it
                    cluster_end = event.offset_ps + event.duration_ps
                    continue
                if not executor or event.offset_ps < cluster_end:  # XLA thunks; a nested one is its caller's time
                    if name in ("ThunkExecutor::Execute", "BlockUntilReady", "ParallelFor") or name.startswith(
                            ("end: ", "Memory", "ThreadpoolListener")) or event.offset_ps < thunk_end:
                        continue
                    thunk_end = event.offset_ps + event.duration_ps
                    add_thunk(name, event)
                    continue
                if ":" not in name or name.startswith(("ThreadpoolListener", "ExecutorState")):
                    continue
                path, op_type = name.rsplit(":", 1)
                by_type[op_type] += event.duration_ps / 1e12
                folded = re.sub(r"while/body/_\d+/|while/", "", re.sub(r"layer_\d+", "layer_N", path))
                by_name[f"{folded} ({op_type})"] += event.duration_ps / 1e12
    return by_type, by_name


def compiled_update_thunks():
    """The names (numbers dropped, as `op_times` keys them by type) of the XLA thunks that the compiled optimizer
    update runs (`bert_tf.adam_updates`), less any that the training GELU's kernels also run. `op_times` cannot tell
    whose thunks run inside a graph (their `CpuExecutable` event names no op), so a trace's update time is found by
    these names."""
    import tensorflow as tf

    from bert_tf import adam_updates
    from bert_tf.layers import gelu

    def fusions(function, *args):
        hlo = function.experimental_get_compiler_ir(*args)(stage="optimized_hlo")
        return {re.sub(r"\.\d+$", "", name) for name in re.findall(r"^\s*(?:ROOT )?%([\w.-]+) = \S+ fusion\(", hlo,
                                                                      re.M)}

    handles = [tf.Variable(tf.ones((4, 3))).handle for _ in range(3)]
    x, zero, scalar = tf.ones((4, 3)), tf.constant(0), tf.constant(0.5)
    updates = set()
    for decay in (scalar, None):
        updates |= fusions(adam_updates.original_update, *handles, x, *[scalar] * 6, decay, zero)
    gelus = set()
    for approximate in (True, False):
        gelus |= fusions(gelu._forward, x, approximate) | fusions(gelu._gradient, x, x, approximate)
    return updates - gelus


def gemm_rates(tokens, h_in, h_out, repeats=20):
    """GFLOP/s of forward, input-gradient and weight-gradient GEMMs of a [h_in, h_out] dense layer, TF and torch."""
    import tensorflow as tf
    import torch

    from bench.common import paired_times

    torch.set_num_threads(os.cpu_count())
    tf.get_logger().setLevel("ERROR")  # six chains of one Python function: TF's retracing warning is expected
    x, w, dy = (tf.random.normal(s) for s in ((tokens, h_in), (h_in, h_out), (tokens, h_out)))
    tx, tw, tdy = (torch.from_numpy(t.numpy()) for t in (x, w, dy))
    cases = {"forward x @ W": (lambda e: tf.matmul(x + e, w), lambda: tx @ tw),
             "input grad dy @ W^T": (lambda e: tf.matmul(dy + e, w, transpose_b=True), lambda: tdy @ tw.T),
             "weight grad x^T @ dy": (lambda e: tf.matmul(x + e, dy, transpose_a=True), lambda: tx.T @ tdy)}
    flops = 2 * tokens * h_in * h_out
    for name, (tf_fn, torch_fn) in cases.items():
        def chain(tf_fn=tf_fn):  # each GEMM waits for the last (a scalar from it), so none is merged or overlapped
            e = tf.constant(0.0)
            for _ in range(repeats):
                e = tf_fn(e)[0, 0] * 0.0
            return e

        tf_chain, xla_chain = (tf.function(chain, autograph=False, jit_compile=jit) for jit in (False, True))
        times = paired_times([lambda: tf_chain().numpy(), lambda: xla_chain().numpy(),
                              lambda: [torch_fn() for _ in range(repeats)]], repeats=3)
        print(f"{name:<24}" + "".join(f" {label} {repeats * flops / min(t) / 1e9:6.0f} GFLOP/s  "
                                      for label, t in zip(("TF", "XLA", "torch"), times)))


def gemm_chain(config, batch, seq, precision, repeats=7):
    """Times the encoder's forward GEMMs and nothing else: per layer Q, K, V, the attention scores and context, the
    attention output and the two FFN GEMMs at BERT's shapes, chained, with weights already in `precision` (no casts,
    no bias, no transposes: the heads are reshaped in place, which keeps every GEMM's shape). Returns (seconds,
    floor seconds): how close the GEMMs alone come to the floor of `bench.model_speed`."""
    import tensorflow as tf

    from bench.common import encoder_flops, gemm_shapes, matmul_rate, median, paired_times, torch_matmul_rate

    dtype = "bfloat16" if precision == "bf16" else "float32"
    h, i, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    shapes = dict(q=(h, h), k=(h, h), v=(h, h), o=(h, h), i=(h, i), out=(i, h))
    w = {name: tf.cast(tf.random.normal(shape) * 0.02, dtype) for name, shape in shapes.items()}
    x = tf.cast(tf.random.normal((batch * seq, h)), dtype)

    @tf.function
    def chain(x):
        for _ in range(config.num_hidden_layers):
            q, k, v = (tf.reshape(x @ w[name], (batch, heads, seq, h // heads)) for name in "qkv")
            context = tf.matmul(tf.matmul(q, k, transpose_b=True), v)
            x = ((tf.reshape(context, (batch * seq, h)) @ w["o"]) @ w["i"]) @ w["out"]
        return x

    chain(x).numpy()
    seconds = median(paired_times([lambda: chain(x).numpy()], repeats=repeats)[0])
    rate = max(measure(dtype, shape=(m, k, n), batch=b) for measure in (matmul_rate, torch_matmul_rate)
               for _, b, m, k, n in gemm_shapes(config, batch, seq))
    return seconds, (encoder_flops(config, batch, seq) - batch * 2 * h * h) / rate


def dropout_rng(batch, seq, hidden, repeats=5):
    """Seconds of one training-mode dropout of a [batch, seq, hidden] float32 tensor, summed so none is skipped:
    {(layer, "xla" or "graph"): median seconds} for Keras's `Dropout` and ours, each the only dropout in its
    program."""
    import keras
    import tensorflow as tf

    from bench.common import median, paired_times
    from bert_tf.layers import Dropout

    x = tf.random.uniform((batch, seq, hidden))
    steps = {}
    for name, layer in (("keras", keras.layers.Dropout(0.1, seed=1)), ("ours", Dropout(0.1, seed=1))):
        for mode in ("xla", "graph"):
            step = tf.function(lambda layer=layer: tf.reduce_sum(layer(x, training=True)), jit_compile=mode == "xla")
            steps[name, mode] = lambda step=step: step().numpy()
    times = paired_times(list(steps.values()), repeats=repeats)
    return {key: median(t) for key, t in zip(steps, times)}


def keras_layer_norms():
    """A context inside which `bert_tf.layers.LayerNorm` traces Keras's element-wise LayerNorm, as it does off
    oneDNN."""
    from bert_tf.layers import LayerNorm

    return mock.patch.object(LayerNorm, "_one_kernel", lambda self, inputs: False)


def layer_norm_ab(config, batch, seq, precision, repeats=5, chain=24):
    """Seconds, Keras's element-wise LayerNorm against ours in one oneDNN kernel (`bert_tf.layers.LayerNorm`), in
    graphs without XLA: {"one LayerNorm": (Keras, ours) per LayerNorm of [batch * seq, H] in a chain of `chain`,
    "forward": (Keras, ours) per encoder forward pass, "forward, batch 1": the same for one sequence (latency),
    "train": (Keras, ours) per classifier train step}, each the median of interleaved rounds. The two models of a
    pair have the same shapes and policy."""
    import keras
    import tensorflow as tf

    from bench.model_speed import keras_policy
    from bert_tf.layers import LayerNorm

    data, runs = make_batch(batch, seq), {}
    with keras_policy(precision):
        x = tf.cast(tf.random.normal((batch * seq, config.hidden_size)), keras.config.dtype_policy().compute_dtype)
        for name in ("reference", "ours"):
            layer = LayerNorm(epsilon=config.layer_norm_eps)

            @tf.function
            def chained(layer=layer):
                y = x
                for _ in range(chain):
                    y = layer(y)
                return tf.reduce_sum(tf.cast(y, tf.float32))

            runs["one LayerNorm", name] = lambda chained=chained: chained().numpy()
    for what, mode, inputs in (("forward", "forward", data), ("forward, batch 1", "forward", make_batch(1, seq)),
                               ("train", "train", data)):
        for name in ("reference", "ours"):
            runs[what, name] = ours(config, inputs, mode, precision, False, 1)
    return reference_against_ours(runs, keras_layer_norms, repeats, {"one LayerNorm": chain})


def reference_against_ours(runs, reference_context, repeats, calls_per_run):
    """{what: (the reference's seconds, ours)} for `runs` = {(what, "reference" or "ours"): run}: each run traced
    once, the reference's under `reference_context()`, then the medians of `repeats` interleaved rounds, over the
    `calls_per_run[what]` calls a run makes (1 if not given)."""
    from bench.common import median, paired_times

    for (_, name), run in runs.items():
        with reference_context() if name == "reference" else contextlib.nullcontext():
            run()
    times = dict(zip(runs, (median(t) for t in paired_times(list(runs.values()), repeats=repeats))))
    return {what: (times[what, "reference"] / calls_per_run.get(what, 1), times[what, "ours"] / calls_per_run.get(
        what, 1)) for what, name in runs if name == "ours"}


def keras_gelus():
    """A context inside which the encoder's training GELU traces TensorFlow's element-wise ops, as it does off this
    CPU."""
    from bert_tf.layers import transformer_block

    return mock.patch.object(transformer_block, "compiles", lambda activation, dtype: False)


def gelu_ab(config, batch, seq, precision, repeats=5, chain=12):
    """Seconds, the FFN's GELU in TensorFlow's element-wise ops (Keras's, with autodiff's gradient) against ours in
    two XLA-compiled kernels (`bert_tf.layers.gelu`), in graphs without XLA: {"one GELU": (Keras, ours) per GELU
    forward and gradient of [batch * seq, intermediate_size] in a chain of `chain`, "train": (Keras, ours) per
    classifier train step}, each the median of interleaved rounds."""
    import keras
    import tensorflow as tf

    from bench.model_speed import keras_policy
    from bert_tf.layers.activations import get_activation
    from bert_tf.layers.gelu import APPROXIMATE, compiled_gelu

    runs = {}
    with keras_policy(precision):
        dtype = keras.config.dtype_policy().compute_dtype
    x = tf.cast(tf.random.normal((batch * seq, config.intermediate_size)), dtype)
    gelus = {"reference": get_activation(config.hidden_act),
             "ours": lambda x: compiled_gelu(x, APPROXIMATE[config.hidden_act])}
    for name, gelu in gelus.items():
        @tf.function
        def chained(gelu=gelu):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x
                for _ in range(chain):
                    y = gelu(y)
            return tf.reduce_sum(tf.cast(tape.gradient(y, x), tf.float32))

        runs["one GELU", name] = lambda chained=chained: chained().numpy()
    data = make_batch(batch, seq)
    for name in ("reference", "ours"):
        runs["train", name] = ours(config, data, "train", precision, False, 1)
    return reference_against_ours(runs, keras_gelus, repeats, {"one GELU": chain})


def float32_softmaxes():
    """A context inside which the attention casts its bfloat16 scores to float32 for the softmax, as it does where
    oneDNN does not take bfloat16."""
    from bert_tf.layers import attention

    return mock.patch.object(attention, "runs_bfloat16_in_float32", lambda dtype: False)


def softmax_ab(config, batch, seq, repeats=5):
    """Seconds, the bf16 forward pass with the attention's float32 softmax (scores cast up, probabilities cast back)
    against ours, where oneDNN's softmax takes the bfloat16 scores (`BertSelfAttention._probabilities`): {"forward":
    (float32 softmax, ours) per encoder forward pass, "forward, batch 1": the same for one sequence}, each the median
    of interleaved rounds."""
    runs = {}
    for what, inputs in (("forward", make_batch(batch, seq)), ("forward, batch 1", make_batch(1, seq))):
        for name in ("reference", "ours"):
            runs[what, name] = ours(config, inputs, "forward", "bf16", False, 1)
    return reference_against_ours(runs, float32_softmaxes, repeats, {})


def adam_ab(config, batch, seq, precision, repeats=5):
    """Seconds, the classifier's train step with `create_optimizer`'s default optimizer, as `run_classifier` makes
    it, its update op by op against compiled (`bert_tf.adam_updates`): {"train, original_adamw": (op by op,
    compiled)}, the median of interleaved rounds."""
    from bench.optimizer_step import op_by_op
    from bert_tf.optimization import create_optimizer

    runs, data = {}, make_batch(batch, seq)
    for name in ("reference", "ours"):
        runs["train, original_adamw", name] = ours(config, data, "train", precision, False, 1,
                                                   optimizer=lambda: create_optimizer(2e-5, 1000, 100))
    return reference_against_ours(runs, op_by_op, repeats, {})


# the trace flags each separate measurement leaves unread
UNREAD = {"gemm": ("mode", "precision", "xla", "top"), "gemm_chain": ("mode", "xla", "top"),
          "dropout": ("mode", "precision", "xla", "top"), "layer_norm": ("mode", "xla", "top"),
          "gelu": ("mode", "xla", "top"), "softmax": ("mode", "precision", "xla", "top"),
          "adam": ("mode", "xla", "top")}


def refuse_unread(parser, args):
    """One measurement per run, and no flag given that it does not read (refused through `parser`)."""
    chosen = [name for name in UNREAD if getattr(args, name)]
    if len(chosen) > 1:
        parser.error(f"--{chosen[0]} and --{chosen[1]} are separate measurements; give one")
    for name in UNREAD[chosen[0]] if chosen else ():
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"--{name} is not read with --{chosen[0]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cell", default="base-128", choices=sorted(CELLS))
    parser.add_argument("--mode", default="train", choices=("forward", "train"))
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--gemm", action="store_true", help="time the cell's FFN GEMMs in TF and torch instead")
    parser.add_argument("--gemm_chain", action="store_true",
                        help="time the encoder's forward GEMMs alone, against the floor, instead")
    parser.add_argument("--dropout", action="store_true",
                        help="time one dropout of the cell's hidden states, Keras's and ours, with and without XLA")
    parser.add_argument("--layer_norm", action="store_true",
                        help="time Keras's LayerNorm against ours (one oneDNN kernel): alone, in the cell's "
                             "forward pass and in its train step")
    parser.add_argument("--gelu", action="store_true",
                        help="time the FFN's GELU in TensorFlow's ops against ours (two XLA-compiled kernels): "
                             "forward and gradient alone, and in the cell's train step")
    parser.add_argument("--softmax", action="store_true",
                        help="time the bf16 forward pass with the attention's float32 softmax against ours "
                             "(oneDNN's softmax on the bf16 scores), at the cell's batch and at batch 1")
    parser.add_argument("--adam", action="store_true",
                        help="time the cell's train step with the default optimizer's update op by op against "
                             "compiled")
    args = parser.parse_args()
    refuse_unread(parser, args)
    if args.layer_norm or args.gelu or args.softmax or args.adam:
        from bert_tf import BertConfig

        preset, batch, seq = CELLS[args.cell]
        config = BertConfig.preset(preset, vocab_size=VOCAB)
        if args.softmax:
            precision, reference, times = "bf16", "float32 softmax", softmax_ab(config, batch, seq)
        elif args.adam:
            precision, reference, times = args.precision, "op by op", adam_ab(config, batch, seq, args.precision)
        else:
            ab, reference = (layer_norm_ab, "Keras's LayerNorm") if args.layer_norm else (gelu_ab, "TF's GELU ops")
            precision, times = args.precision, ab(config, batch, seq, args.precision)
        print(f"{args.cell} {precision}, no XLA, median of 5 interleaved rounds: {reference} against ours")
        for what, (reference_s, ours_s) in times.items():
            print(f"  {what:<22} {reference} {reference_s * 1e3:9.2f} ms  ours {ours_s * 1e3:9.2f} ms  ratio "
                  f"{reference_s / ours_s:5.2f}x")
        return None
    if args.dropout:
        from bert_tf import BertConfig

        preset, batch, seq = CELLS[args.cell]
        hidden = BertConfig.preset(preset).hidden_size
        times = dropout_rng(batch, seq, hidden)
        print(f"one dropout of [{batch}, {seq}, {hidden}] float32, median of 5 interleaved rounds:")
        for mode in ("xla", "graph"):
            keras_s, ours_s = times["keras", mode], times["ours", mode]
            print(f"  {mode:<5} Keras {keras_s * 1e3:8.2f} ms  ours {ours_s * 1e3:8.2f} ms  Keras / ours "
                  f"{keras_s / ours_s:6.1f}x")
        return None
    if args.gemm_chain:
        from bert_tf import BertConfig

        preset, batch, seq = CELLS[args.cell]
        seconds, floor = gemm_chain(BertConfig.preset(preset, vocab_size=VOCAB), batch, seq, args.precision)
        print(f"{args.cell} {args.precision}: the encoder's forward GEMMs alone take {seconds:.3f} s; their floor "
              f"{floor:.3f} s: {floor / seconds:.0%} of the floor")
        return None
    if args.gemm:
        from bert_tf import BertConfig

        preset, batch, seq = CELLS[args.cell]
        config = BertConfig.preset(preset)
        print(f"{args.cell}: GEMMs of [{batch * seq} tokens] x [{config.hidden_size}] x [{config.intermediate_size}]")
        return gemm_rates(batch * seq, config.hidden_size, config.intermediate_size)

    from bert_tf import BertConfig

    import tensorflow as tf

    preset, batch, seq = CELLS[args.cell]
    run = ours(BertConfig.preset(preset, vocab_size=VOCAB), make_batch(batch, seq), args.mode, args.precision,
               args.xla, 1)
    run()
    logdir = tempfile.mkdtemp(prefix="bench_profile_")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    run()
    wall = time.perf_counter() - start
    tf.profiler.experimental.stop()
    by_type, by_name = op_times(logdir)
    total = sum(by_type.values())
    print(f"{args.cell} {args.mode} {args.precision} xla={'on' if args.xla else 'off'}: wall {wall:.3f} s (traced), "
          f"summed op time {total:.3f} s; trace in {logdir}")
    print(f"\n{'op type':<28} {'seconds':>8} {'share':>6}")
    for op_type, seconds in by_type.most_common(args.top):
        print(f"{op_type:<28} {seconds:8.3f} {seconds / total:6.1%}")
    print(f"\n{'heaviest ops, all layers together':<110} {'seconds':>8}")
    for name, seconds in by_name.most_common(args.top):
        print(f"{name[-110:]:<110} {seconds:8.3f}")


if __name__ == "__main__":
    main()
