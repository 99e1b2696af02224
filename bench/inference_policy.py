"""The bfloat16 inference policy A/B: BERT's forward pass under `mixed_bfloat16` (float32 weights, rounded to
bfloat16 on every call) against the `bfloat16` inference policy (the dense layers' weights stored in bfloat16;
`bert_tf.layers.precision`), with float32 beside them.

  python -m bench.inference_policy [--preset base] [--shapes 1x128,8x128] [--rounds 5] [--calls 20]

One process, one model per policy with the same weights, each forward pass traced once (inference mode, the
sequence output). Per shape, the policies run in interleaved rounds (`paired_times`) of `--calls` calls each; a
time is the median over rounds of a call's mean time, and a ratio is mixed_bfloat16's (or float32's) time over the
inference policy's (> 1: the inference policy is faster). `identical` says whether its outputs equal
`mixed_bfloat16`'s bit for bit on that batch, as they must.
"""

import argparse

from bench.common import check_forward_ab, median, paired_times, report, shapes_flag

POLICIES = ("float32", "mixed_bfloat16", "bfloat16")


def forward_passes(preset, batch, seq):
    """{policy: a traced forward pass returning the sequence output as a NumPy array}, all with one model's weights."""
    import bert_tf  # noqa: F401  (before TensorFlow)
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig, BertEncoder
    from bert_tf.models import with_dtype

    config = BertConfig.preset(preset)
    trained = BertEncoder(config)
    rng = np.random.default_rng(0)
    inputs = {"input_word_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, seq)), tf.int32),
              "input_mask": tf.ones((batch, seq), tf.int32), "input_type_ids": tf.zeros((batch, seq), tf.int32)}
    passes = {}
    for policy in POLICIES:
        model = trained if policy == "float32" else with_dtype(trained, policy)
        forward = tf.function(lambda x, model=model: model(x, training=False)["sequence_output"])
        passes[policy] = lambda forward=forward: forward(inputs).numpy()
    return passes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--shapes", type=shapes_flag, default=[(1, 128), (8, 128)])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    check_forward_ab(parser, args)
    import numpy as np

    rows = []
    for batch, seq in args.shapes:
        passes = forward_passes(args.preset, batch, seq)
        identical = np.array_equal(passes["mixed_bfloat16"](), passes["bfloat16"]())

        def repeated(fn):
            def calls():
                for _ in range(args.calls):
                    fn()
            return calls

        times = paired_times([repeated(passes[p]) for p in POLICIES], repeats=args.rounds)
        ms = {p: 1e3 * median(t) / args.calls for p, t in zip(POLICIES, times)}
        rows.append({"preset": args.preset, "batch": batch, "seq": seq, "rounds": args.rounds,
                     **{f"{p}_ms": f"{ms[p]:.1f}" for p in POLICIES},
                     "mixed_over_inference": f"{ms['mixed_bfloat16'] / ms['bfloat16']:.2f}",
                     "float32_over_inference": f"{ms['float32'] / ms['bfloat16']:.2f}", "identical": identical})
    report("inference_policy", rows, list(rows[0]))


if __name__ == "__main__":
    main()
