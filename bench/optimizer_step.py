"""The cost of one optimizer update on BERT's weights: the original optimizer against the fused-kernel AdamW.

`original_adamw` computes the original's update op for op (about ten element-wise passes per variable), where
`adamw` runs TF's fused `ResourceApplyAdam` kernel (one pass); this measures what exactness costs per update, on
the trainable variables of a `--preset` encoder with random gradients, both compiled in a `tf.function`, in
interleaved rounds.

  python -m bench.optimizer_step --preset=base
"""

from __future__ import annotations

import bert_tf  # noqa: F401

import os
import platform

import tensorflow as tf
from absl import app, flags

from bench.common import median, paired_times

flags.DEFINE_string("preset", "base", "Encoder size (BertConfig.preset name).")
flags.DEFINE_integer("repeats", 5, "Interleaved timing rounds.")


def update_fn(kind: str, variables):
    from bert_tf.optimization import create_optimizer

    opt = create_optimizer(1e-4, 1000, 100, optimizer=kind)
    opt.build(variables)
    grads = [tf.random.normal(v.shape, stddev=1e-3) for v in variables]

    @tf.function
    def step():
        opt.apply(grads, variables)

    return lambda: step() and None


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
    print(f"optimizer update, {f.preset} encoder ({size / 1e6:.0f}M weights), {platform.processor() or platform.machine()} "
          f"x{os.cpu_count()}, "
          f"{f.repeats} interleaved rounds:")
    for kind, t in zip(kinds, times):
        print(f"  {kind:15s} {median(t) * 1e3:8.1f} ms   {median(t) / base:.2f}x adamw")


if __name__ == "__main__":
    app.run(main)
