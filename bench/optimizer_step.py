"""The cost of one optimizer update on BERT's weights: the original optimizer against the fused-kernel AdamW.

`original_adamw` computes the original's update op for op (about ten element-wise passes per variable), where
`adamw` runs TF's fused `ResourceApplyAdam` kernel (one pass); this measures what exactness costs per update, on
the trainable variables of a `--preset` encoder with random gradients, both compiled in a `tf.function`, in
interleaved rounds.

It also measures what an update costs before the first one runs: tracing it into a graph, optimizing the graph and
running it once, which every training run pays again (for a short fine-tuning run on a small model, more than the
updates themselves). Against Keras's own AdamW with the same settings (clipping, weight decay, the schedule).

  python -m bench.optimizer_step --preset=base
"""

from __future__ import annotations

import bert_tf  # noqa: F401

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


def update_fn(kind: str, variables):
    opt, grads = _optimizer(kind, variables)

    @tf.function
    def step():
        opt.apply(grads, variables)

    return lambda: step() and None


def first_update_fn(kind: str, variables):
    """A callable that makes a fresh `tf.function` of the update and calls it once: trace, graph optimization, run."""
    opt, grads = _optimizer(kind, variables)
    return lambda: tf.function(lambda: opt.apply(grads, variables), autograph=False)() and None


def main(argv):
    del argv
    from bert_tf import BertConfig, BertEncoder

    f = flags.FLAGS
    config = BertConfig.preset(f.preset)
    encoder = BertEncoder(config)
    encoder({"input_word_ids": tf.zeros([1, 8], tf.int32), "input_mask": tf.ones([1, 8], tf.int32),
             "input_type_ids": tf.zeros([1, 8], tf.int32)})
    variables = encoder.trainable_variables
    kinds = ("adamw", "original_adamw")
    times = paired_times([update_fn(kind, variables) for kind in kinds], repeats=f.repeats)
    base = median(times[0])
    size = sum(v.shape.num_elements() for v in variables)
    print(f"optimizer update, {f.preset} encoder ({size / 1e6:.0f}M weights), {machine_name()}, {f.repeats} "
          "interleaved rounds:")
    for kind, t in zip(kinds, times):
        print(f"  {kind:15s} {median(t) * 1e3:8.1f} ms   {median(t) / base:.2f}x adamw")
    kinds = ("keras_adamw", "adamw", "original_adamw")
    tf.get_logger().setLevel("ERROR")  # TF's warning that tracing a function again and again is slow: the point here
    times = paired_times([first_update_fn(kind, variables) for kind in kinds], repeats=f.repeats)
    base = median(times[0])
    print(f"first update (trace, graph optimization, one run), {len(variables)} variables:")
    for kind, t in zip(kinds, times):
        print(f"  {kind:15s} {median(t) * 1e3:8.1f} ms   {median(t) / base:.2f}x keras_adamw")


if __name__ == "__main__":
    app.run(main)
