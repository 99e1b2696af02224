"""Encoder forward and fine-tuning train step: ours vs keras-hub `BertBackbone` and HF torch `BertModel`.

  pip install -r bench/requirements.txt && python -m bench.model_speed [--quick] [--cells base-128,small-128]

Every implementation gets the same shapes (vocab 30,522, batch x seq of random ids, no padding), the same threads
(all cores) and a fresh model. `forward`: the encoder's sequence and pooled output, inference mode. `train`: one
sequence-classification step (2 labels on the pooled output, dropout 0.1, AdamW, cross-entropy): forward, backward,
update (AdamW: ours is `bert_tf.optimization.AdamW`, keras-hub's Keras's, HF's torch's); ours is
`BertClassifier.train_step` and keras-hub's `BertTextClassifier.train_step` in a `tf.function`, HF's
`BertForSequenceClassification` in its eager loop. `bf16` is Keras's `mixed_bfloat16` policy (bf16 compute, fp32
variables) and torch's CPU autocast; `xla` compiles the TF step with `jit_compile=True` (torch has no XLA: its row
is the same in both). Rounds are interleaved (`paired_times`); ratios are medians of per-round ratios.

The floor is the encoder's FLOPs (`encoder_flops`; a train step counts 3x: forward, and backward's two GEMMs per
forward GEMM) over the best matmul rate this machine reaches in the same run, per precision: TF's kernel, XLA's and
torch's (`matmul_rate`, `torch_matmul_rate`), so "of floor" is how close a run comes to doing nothing but its
matrix multiplications at the fastest GEMM available here.
"""

import argparse
import contextlib
import os

import numpy as np

from bench.common import (encoder_flops, matmul_rate, median, paired_times, peer_configs, report,
                          torch_matmul_rate)

VOCAB = 30522
CELLS = {"base-128": ("base", 8, 128), "base-512": ("base", 2, 512), "small-128": ("small", 32, 128)}


def make_batch(batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(1000, VOCAB, (batch, seq)).astype("int32"),
            "types": (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
            "mask": np.ones((batch, seq), "int32"), "labels": rng.integers(0, 2, batch).astype("int32")}


@contextlib.contextmanager
def keras_policy(precision):
    import keras

    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(old)


def _optimizer(ours):
    """AdamW, same hyper-parameters everywhere: ours is the library's (fused update), keras-hub's is Keras's own."""
    import keras

    from bert_tf.optimization import AdamW

    return (AdamW if ours else keras.optimizers.AdamW)(1e-5, weight_decay=0.01, epsilon=1e-6)


def ours(config, data, mode, precision, xla, steps):
    from bert_tf import BertClassifier, BertEncoder

    x = {"input_word_ids": data["ids"], "input_mask": data["mask"], "input_type_ids": data["types"]}
    with keras_policy(precision):
        encoder = BertEncoder(config)
        model = encoder if mode == "forward" else BertClassifier(encoder, num_classes=2)
    return _tf_loop(model, x, data["labels"], mode, steps, xla, ours=True)


def keras_hub(config, data, mode, precision, xla, steps):
    import keras_hub

    x = {"token_ids": data["ids"], "segment_ids": data["types"], "padding_mask": data["mask"].astype(bool)}
    with keras_policy(precision):
        backbone = keras_hub.models.BertBackbone(**peer_configs(config)[0])
        model = backbone if mode == "forward" else keras_hub.models.BertTextClassifier(
            backbone, num_classes=2, preprocessor=None)
    return _tf_loop(model, x, data["labels"], mode, steps, xla)


def _tf_loop(model, x, labels, mode, steps, xla, ours=False):
    """`steps` forward passes or train steps of a Keras model, all inside one `tf.function` (no Python per step)."""
    import keras
    import tensorflow as tf

    x = tf.nest.map_structure(tf.constant, x)
    if mode == "forward":
        def step():
            return tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32)) for t in tf.nest.flatten(model(x, training=False))
                             if t.shape.rank])
        step = tf.function(step, jit_compile=xla)
    else:
        model.compile(optimizer=_optimizer(ours), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.optimizer.build(model.trainable_variables)
        batch = (x, tf.constant(labels))
        train = tf.function(model.train_step, jit_compile=xla)

        def step():
            train(batch)
            return tf.constant(0.0)

    @tf.function
    def loop():
        total = tf.constant(0.0)
        for _ in tf.range(steps):
            total += step()
        return total

    return lambda: loop().numpy()


def hf_torch(config, data, mode, precision, xla, steps):
    import torch
    import transformers

    del xla
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(**peer_configs(config)[1], num_labels=2)
    inputs = dict(input_ids=torch.tensor(data["ids"], dtype=torch.long),
                  attention_mask=torch.tensor(data["mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(data["types"], dtype=torch.long))
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    if mode == "forward":
        model = transformers.BertModel(hf_config).eval()

        def loop():
            with torch.inference_mode(), autocast():
                for _ in range(steps):
                    model(**inputs)
        return loop
    model = transformers.BertForSequenceClassification(hf_config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, eps=1e-6)
    labels = torch.tensor(data["labels"], dtype=torch.long)

    def loop():
        for _ in range(steps):
            with autocast():
                loss = model(**inputs, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return loop


def cells_for(args):
    if args.quick:  # BERT-Base both modes, bf16, XLA: a few minutes on 2 cores with --repeats 1
        return [("base-128", "forward", "fp32", False), ("base-128", "train", "fp32", False),
                ("base-128", "forward", "bf16", False), ("small-128", "forward", "fp32", True),
                ("small-128", "train", "fp32", True)]
    return [(cell, mode, precision, xla) for cell in args.cells.split(",") for mode in ("forward", "train")
            for precision in ("fp32", "bf16") for xla in (False, True)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="five cells: BERT-Base forward and train, bf16, XLA")
    parser.add_argument("--cells", default=",".join(CELLS), help=f"comma list of {', '.join(CELLS)}")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    unknown = sorted(set(args.cells.split(",")) - set(CELLS))
    if unknown and not args.quick:
        parser.error(f"--cells: unknown {', '.join(unknown)}; choose from {', '.join(CELLS)}")

    from bert_tf import BertConfig
    from bert_tf.onednn import onednn_enabled

    rates = {(precision, stack): rate(dtype) for precision, dtype in (("fp32", "float32"), ("bf16", "bfloat16"))
             for stack, rate in (("TF", matmul_rate), ("TF XLA", lambda d: matmul_rate(d, jit_compile=True)),
                                 ("torch", torch_matmul_rate))}
    best = {p: max(r for (q, _), r in rates.items() if q == p) for p in ("fp32", "bf16")}
    torch_bf16 = rates["bf16", "torch"]
    torch_bf16_usable = torch_bf16 >= 0.25 * rates["fp32", "torch"]
    rate_line = ", ".join(f"{stack} {precision} {r / 1e9:.1f}" for (precision, stack), r in rates.items())
    rate_line += f" (TF's oneDNN kernels {'on' if onednn_enabled() else 'off'})"
    print(f"matmul rate, GFLOP/s (1024x768x3072): {rate_line}", flush=True)
    rows = []
    for cell, mode, precision, xla in cells_for(args):
        preset, batch, seq = CELLS[cell]
        config = BertConfig.preset(preset, vocab_size=VOCAB)
        data = make_batch(batch, seq)
        steps = 1
        runs = {"bert_tf": ours(config, data, mode, precision, xla, steps),
                "keras-hub": keras_hub(config, data, mode, precision, xla, steps)}
        if precision == "fp32" or torch_bf16_usable:
            runs["HF torch"] = hf_torch(config, data, mode, precision, xla, steps)
        times = dict(zip(runs, paired_times(list(runs.values()), repeats=args.repeats)))
        flops = encoder_flops(config, batch, seq) * (1 if mode == "forward" else 3)
        floor = flops / best[precision]
        ours_s = median(times["bert_tf"])

        def versus(name):
            if name in times:
                return f"{median([r / o for o, r in zip(times['bert_tf'], times[name])]):.2f}"
            return "n/a" if precision == "fp32" else f"n/a (torch bf16 GEMM {torch_bf16 / 1e9:.1f} GFLOP/s here)"

        row = {"cell": cell, "batch": batch, "seq": seq, "mode": mode, "precision": precision,
               "xla": "on" if xla else "off", "bert_tf_s": f"{ours_s:.3f}",
               "keras_hub_s": f"{median(times['keras-hub']):.3f}",
               "hf_torch_s": f"{median(times['HF torch']):.3f}" if "HF torch" in times else "n/a",
               "vs_keras_hub": versus("keras-hub"), "vs_hf_torch": versus("HF torch"),
               "floor_s": f"{floor:.3f}", "of_floor": f"{floor / ours_s:.0%}"}
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        rows.append(row)
    report("model_speed", rows, list(rows[0]))
    print(f"matmul rate, GFLOP/s: {rate_line}; the floor uses the best of them per precision. Ratios > 1: ours is "
          "faster; of_floor = floor_s / bert_tf_s")


if __name__ == "__main__":
    main()
