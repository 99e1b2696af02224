"""The FFN fusion A/B: BERT's forward pass with the intermediate layer's GEMM, bias and GELU fused into one oneDNN op
(the model as it is) against the same model with that layer through Keras's Dense, which TensorFlow does not fuse.

  python -m bench.ffn_fusion [--preset base] [--shapes 8x128,1x128] [--rounds 5] [--calls 20]

Each round runs both variants, one fresh process each (TensorFlow's graph optimizer and oneDNN's primitive caches
start cold in both), in alternating order; a process times `--calls` forward passes of a traced encoder in
inference mode after three warm-up calls and reports their median. A row is the median over rounds of each
variant, and the ratio unfused / fused (> 1: the fusion is faster). Same code, same weights' shapes, fp32.
"""

import argparse
import json
import subprocess
import sys

from bench.common import check_forward_ab, median, report, shapes_flag

VARIANTS = ("fused", "unfused")


def child(variant, preset, batch, seq, calls):
    import time

    import bert_tf  # noqa: F401  (before TensorFlow)
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig, BertEncoder
    from bert_tf.layers.transformer_block import BertTransformerBlock

    if variant == "unfused":
        BertTransformerBlock._intermediate = lambda self, h: self.intermediate(h)
    config = BertConfig.preset(preset)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    inputs = {"input_word_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, seq)), tf.int32),
              "input_mask": tf.ones((batch, seq), tf.int32), "input_type_ids": tf.zeros((batch, seq), tf.int32)}
    forward = tf.function(lambda x: encoder(x, training=False)["sequence_output"])
    for _ in range(3):
        forward(inputs).numpy()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        forward(inputs).numpy()
        times.append(time.perf_counter() - started)
    print(json.dumps({"seconds": median(times)}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--shapes", type=shapes_flag, default=[(8, 128), (1, 128)])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    check_forward_ab(parser, args)
    if args.child:
        (batch, seq), = args.shapes
        return child(args.child, args.preset, batch, seq, args.calls)
    rows = []
    for batch, seq in args.shapes:
        times = {variant: [] for variant in VARIANTS}
        for round_index in range(args.rounds):
            order = VARIANTS if round_index % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                done = subprocess.run([sys.executable, "-m", "bench.ffn_fusion", "--child", variant, "--preset",
                                       args.preset, "--shapes", f"{batch}x{seq}", "--calls", str(args.calls)],
                                      capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"{variant} {batch}x{seq} failed:\n{done.stderr[-3000:]}")
                times[variant].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
        fused, unfused = median(times["fused"]), median(times["unfused"])
        rows.append({"preset": args.preset, "batch": batch, "seq": seq, "rounds": args.rounds,
                     "fused_ms": f"{1e3 * fused:.1f}", "unfused_ms": f"{1e3 * unfused:.1f}",
                     "unfused_over_fused": f"{unfused / fused:.2f}"})
    report("ffn_fusion", rows, list(rows[0]))


if __name__ == "__main__":
    main()
