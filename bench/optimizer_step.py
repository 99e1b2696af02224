"""The cost of one optimizer update on BERT's weights: the original optimizer's update compiled and op by op, and
the fused-kernel AdamW.

In a graph run op by op on a CPU, each float32 variable's `original_adamw` update is one XLA-compiled function
rounded as the ops round (`bert_tf.adam_updates`); elsewhere (eagerly, under XLA, on a GPU) it is the original's
arithmetic op for op, about ten element-wise passes per variable. `adamw` runs Keras's decay and TF's fused
`ResourceApplyAdam` kernel everywhere. This measures the three on the trainable variables of a `--preset` encoder
with random gradients, each in a `tf.function`, in interleaved rounds.

It also measures what an update costs before the first one runs: tracing it into a graph, optimizing the graph,
compiling it and running it once, which every training run pays again (for a short fine-tuning run on a small
model, more than the updates themselves). Against Keras's own AdamW with the same settings (clipping, weight
decay, the schedule).

  python -m bench.optimizer_step --preset=base
"""

from __future__ import annotations

import bert_tf  # noqa: F401

import contextlib
from unittest import mock

import tensorflow as tf
from absl import app, flags

from bench.common import machine_name, median, paired_times

flags.DEFINE_string("preset", "base", "Encoder size (BertConfig.preset name).")
flags.DEFINE_integer("repeats", 5, "Interleaved timing rounds.")


def _optimizer(kind: str, variables):
    """One of `create_optimizer`'s, or "keras_adamw": Keras's AdamW with the same settings, built; and random
    gradients for `variables`."""
    import keras

    from bert_tf.optimization import NO_DECAY_PATTERN, create_optimizer, warmup_linear_decay

    if kind == "keras_adamw":
        opt = keras.optimizers.AdamW(warmup_linear_decay(1e-4, 1000, 100), weight_decay=0.01, epsilon=1e-6,
                                     global_clipnorm=1.0)
        opt.exclude_from_weight_decay(var_names=[NO_DECAY_PATTERN])
    else:
        opt = create_optimizer(1e-4, 1000, 100, optimizer=kind)
    opt.build(variables)
    return opt, [tf.random.normal(v.shape, stddev=1e-3) for v in variables]


def op_by_op():
    """A context inside which an update traces its op-by-op form, as it does where it is not compiled."""
    from bert_tf import adam_updates

    return mock.patch.object(adam_updates, "compiles", lambda dtype: False)


def update_fn(kind: str, variables, compiled: bool = True):
    opt, grads = _optimizer(kind, variables)
    step = tf.function(lambda: opt.apply(grads, variables), autograph=False)
    with contextlib.nullcontext() if compiled else op_by_op():
        step.get_concrete_function()
    return lambda: step() and None


def first_update_fn(kind: str, variables, compiled: bool = True):
    """A callable that makes a fresh `tf.function` of the update and calls it once: trace, graph optimization, XLA
    compilation where it compiles (of fresh functions, which XLA has not compiled before in this process), run."""
    opt, grads = _optimizer(kind, variables)

    def first():
        with fresh_compiled_updates() if compiled else op_by_op():
            tf.function(lambda: opt.apply(grads, variables), autograph=False)()

    return first


def fresh_compiled_updates():
    """A context inside which the compiled update is a new function, traced and compiled again as in a new training
    process."""
    from bert_tf import adam_updates

    fresh = tf.function(adam_updates.original_update.python_function, jit_compile=True, autograph=False)
    return mock.patch.object(adam_updates, "original_update", fresh)


def main(argv):
    del argv
    from bert_tf import BertConfig, BertEncoder

    f = flags.FLAGS
    config = BertConfig.preset(f.preset)
    encoder = BertEncoder(config)
    encoder({"input_word_ids": tf.zeros([1, 8], tf.int32), "input_mask": tf.ones([1, 8], tf.int32),
             "input_type_ids": tf.zeros([1, 8], tf.int32)})
    variables = encoder.trainable_variables
    size = sum(v.shape.num_elements() for v in variables)
    kinds = [("adamw", True), ("original_adamw", False), ("original_adamw", True)]
    times = dict(zip(kinds, map(median, paired_times([update_fn(k, variables, c) for k, c in kinds],
                                                     repeats=f.repeats))))
    base = times["adamw", True]
    print(f"optimizer update, {f.preset} encoder ({size / 1e6:.0f}M weights), {machine_name()}, {f.repeats} "
          "interleaved rounds:")
    for (kind, compiled), t in times.items():
        form = "" if kind == "adamw" else "compiled" if compiled else "op by op"
        print(f"  {kind:15s} {form:9s} {t * 1e3:8.1f} ms   {t / base:.2f}x adamw"
              + (f", {times[kind, False] / t:.2f}x faster than op by op" if form == "compiled" else ""))
    kinds = [("keras_adamw", True)] + kinds
    tf.get_logger().setLevel("ERROR")  # TF's warning that tracing a function again and again is slow: the point here
    times = paired_times([first_update_fn(kind, variables, compiled) for kind, compiled in kinds], repeats=f.repeats)
    base = median(times[0])
    print(f"first update (trace, graph optimization, compilation, one run), {len(variables)} variables:")
    for (kind, compiled), t in zip(kinds, times):
        form = "" if kind in ("keras_adamw", "adamw") else "compiled" if compiled else "op by op"
        print(f"  {kind:15s} {form:9s} {median(t) * 1e3:8.1f} ms   {median(t) / base:.2f}x keras_adamw")


if __name__ == "__main__":
    app.run(main)
