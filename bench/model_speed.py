"""Encoder forward and fine-tuning train step: ours vs keras-hub `BertBackbone` and HF torch `BertModel`.

  pip install -r bench/requirements.txt && python -m bench.model_speed [--quick] [--cells base-128,small-128]

Every implementation gets the same shapes (vocab 30,522, batch x seq of random ids, no padding), the same threads
(all cores) and a fresh model. `forward`: the encoder's sequence and pooled output, inference mode. `train`: one
sequence-classification step (2 labels on the pooled output, dropout 0.1, AdamW, cross-entropy): forward, backward,
update (AdamW: ours is `bert_tf.optimization.AdamW`, keras-hub's Keras's, HF's torch's); ours is
`BertClassifier.train_step` and keras-hub's `BertTextClassifier.train_step` in a `tf.function`, HF's
`BertForSequenceClassification` in its eager loop. `bf16` is Keras's `mixed_bfloat16` policy (bf16 compute, fp32
variables) and torch's CPU autocast, except for our forward pass, which runs as our library serves bf16: under the
`bfloat16` inference policy (`bert_tf.layers.precision`), the same outputs bit for bit with the dense layers'
weights stored in bf16 instead of rounded on every call; `xla` compiles the TF step with `jit_compile=True`.

One method for every row: rounds are interleaved (`paired_times`) and each time is the median of its rounds; a
ratio is the peer's median over ours, so it can be recomputed from the two times shown (> 1: ours is faster). torch
has no XLA: it is measured once per cell, mode and precision, with the XLA-off row's rounds, and that one
measurement is shown in both rows. The floor is the cell's FLOPs (`encoder_flops`; a train step counts 3x: forward,
and backward's two GEMMs per forward GEMM) at the fastest matmul rate measured in the same run on any of the
cell's own GEMM shapes (`gemm_shapes`) by TF, XLA or torch, per precision; no GEMM of the model can beat that rate,
so "of floor" (floor / ours) stays under 100 % up to timing noise. Each row names the machine.
"""

import argparse
import contextlib
import os

import numpy as np

from bench.common import (encoder_flops, gemm_shapes, machine_name, matmul_rate, median, paired_times,
                          peer_configs, report, share_gpu_with_torch, torch_device, torch_matmul_rate,
                          torch_sync)

VOCAB = 30522
CELLS = {"base-128": ("base", 8, 128), "base-512": ("base", 2, 512), "small-128": ("small", 32, 128)}


def make_batch(batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(1000, VOCAB, (batch, seq)).astype("int32"),
            "types": (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
            "mask": np.ones((batch, seq), "int32"), "labels": rng.integers(0, 2, batch).astype("int32")}


def keras_policy(precision):
    """Keras's global dtype policy for `precision` (fp32, bf16, fp16: `run_pretraining --dtype`'s short names)
    inside a `with` block."""
    from bert_tf.layers.precision import global_policy
    from bert_tf.training import DTYPES

    return global_policy(DTYPES[precision])


def _optimizer(ours):
    """AdamW, same hyper-parameters everywhere: ours is the library's (fused update), keras-hub's is Keras's own."""
    import keras

    from bert_tf.optimization import AdamW

    return (AdamW if ours else keras.optimizers.AdamW)(1e-5, weight_decay=0.01, epsilon=1e-6)


def ours(config, data, mode, precision, xla, steps, optimizer=None):
    """Our encoder's forward passes or our classifier's train steps (with `optimizer()`, by default `_optimizer`'s
    AdamW)."""
    from bert_tf import BertClassifier, BertEncoder
    from bert_tf.layers.precision import INFERENCE_POLICY

    x = {"input_word_ids": data["ids"], "input_mask": data["mask"], "input_type_ids": data["types"]}
    with keras_policy(precision):
        if mode == "forward":
            model = BertEncoder(config, dtype=INFERENCE_POLICY if precision == "bf16" else None)
        else:
            model = BertClassifier(BertEncoder(config), num_classes=2)
    return _tf_loop(model, x, data["labels"], mode, steps, xla, ours=True, optimizer=optimizer)


def keras_hub(config, data, mode, precision, xla, steps):
    import keras_hub

    x = {"token_ids": data["ids"], "segment_ids": data["types"], "padding_mask": data["mask"].astype(bool)}
    with keras_policy(precision):
        backbone = keras_hub.models.BertBackbone(**peer_configs(config)[0])
        model = backbone if mode == "forward" else keras_hub.models.BertTextClassifier(
            backbone, num_classes=2, preprocessor=None)
    return _tf_loop(model, x, data["labels"], mode, steps, xla)


def _tf_loop(model, x, labels, mode, steps, xla, ours=False, optimizer=None):
    """`steps` forward passes or train steps of a Keras model, all inside one `tf.function` (no Python per step)."""
    import keras
    import tensorflow as tf

    x = tf.nest.map_structure(tf.constant, x)
    if mode == "forward":
        def step():  # the sequence and pooled output of each (ours also returns every layer's, not summed here)
            out = model(x, training=False)
            return tf.add_n([tf.reduce_sum(tf.cast(out[key], tf.float32)) for key in ("sequence_output",
                                                                                    "pooled_output")])
        step = tf.function(step, jit_compile=xla)
    else:
        model.compile(optimizer=optimizer() if optimizer else _optimizer(ours),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
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
    device = torch_device()
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(**peer_configs(config)[1], num_labels=2)
    inputs = {name: torch.tensor(data[key], dtype=torch.long, device=device) for name, key in
              (("input_ids", "ids"), ("attention_mask", "mask"), ("token_type_ids", "types"))}
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    if mode == "forward":
        model = transformers.BertModel(hf_config).eval().to(device)

        def loop():
            with torch.inference_mode(), autocast():
                for _ in range(steps):
                    model(**inputs)
            torch_sync(device)
        return loop
    model = transformers.BertForSequenceClassification(hf_config).train().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, eps=1e-6)
    labels = torch.tensor(data["labels"], dtype=torch.long, device=device)

    def loop():
        for _ in range(steps):
            with autocast():
                loss = model(**inputs, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch_sync(device)
    return loop


def cells_for(args):
    if args.quick:  # BERT-Base both modes, bf16, XLA: a few minutes on 2 cores with --repeats 1
        return [("base-128", "forward", "fp32", False), ("base-128", "train", "fp32", False),
                ("base-128", "forward", "bf16", False), ("small-128", "forward", "fp32", True),
                ("small-128", "train", "fp32", True)]
    return [(cell, mode, precision, xla) for cell in args.cells.split(",") for mode in ("forward", "train")
            for precision in ("fp32", "bf16") for xla in (False, True)]


def best_rates(config, batch, seq, precision):
    """{stack: (best FLOP/s over the cell's GEMM shapes, that shape's name)} for TF, TF XLA and torch."""
    dtype = "bfloat16" if precision == "bf16" else "float32"
    measures = {"TF": lambda shape, n: matmul_rate(dtype, shape=shape, batch=n),
                "TF XLA": lambda shape, n: matmul_rate(dtype, jit_compile=True, shape=shape, batch=n),
                "torch": lambda shape, n: torch_matmul_rate(dtype, shape=shape, batch=n)}
    best = {}
    for stack, measure in measures.items():
        rates = [(measure((m, k, n), b), name) for name, b, m, k, n in gemm_shapes(config, batch, seq)]
        best[stack] = max(rates)
    return best


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

    share_gpu_with_torch()
    machine = machine_name()
    print(f"{machine}; TF's oneDNN kernels {'on' if onednn_enabled() else 'off'}", flush=True)
    no_cuda = torch_device() is None
    rows, rates, torch_times = [], {}, {}
    for cell, mode, precision, xla in cells_for(args):
        preset, batch, seq = CELLS[cell]
        config = BertConfig.preset(preset, vocab_size=VOCAB)
        if (cell, precision) not in rates:
            rates[cell, precision] = best_rates(config, batch, seq, precision)
            print(f"{cell} {precision} best GEMM rate, GFLOP/s: " + ", ".join(
                f"{stack} {rate / 1e9:.1f} ({shape})" for stack, (rate, shape) in rates[cell, precision].items()),
                flush=True)
        best = max(rate for rate, _ in rates[cell, precision].values())
        torch_rate = rates[cell, precision]["torch"][0]
        torch_usable = torch_rate >= 10e9  # a CPU without bf16 arithmetic: torch's bf16 GEMM crawls
        data = make_batch(batch, seq)
        runs = {"bert_tf": ours(config, data, mode, precision, xla, 1),
                "keras-hub": keras_hub(config, data, mode, precision, xla, 1)}
        if torch_usable and (cell, mode, precision) not in torch_times:
            runs["HF torch"] = hf_torch(config, data, mode, precision, xla, 1)
        times = {name: median(t) for name, t in zip(runs, paired_times(list(runs.values()), repeats=args.repeats))}
        torch_times.setdefault((cell, mode, precision), times.pop("HF torch", None))
        torch_s = torch_times[cell, mode, precision]
        floor = encoder_flops(config, batch, seq) * (1 if mode == "forward" else 3) / best
        row = {"cell": cell, "batch": batch, "seq": seq, "mode": mode, "precision": precision,
               "xla": "on" if xla else "off", "bert_tf_s": f"{times['bert_tf']:.3f}",
               "keras_hub_s": f"{times['keras-hub']:.3f}",
               "hf_torch_s": f"{torch_s:.3f}" if torch_s else "n/a (TF runs on the GPU, this torch has no CUDA)"
               if no_cuda else f"n/a (bf16 GEMM {torch_rate / 1e9:.1f} GFLOP/s)",
               "vs_keras_hub": f"{times['keras-hub'] / times['bert_tf']:.2f}",
               "vs_hf_torch": f"{torch_s / times['bert_tf']:.2f}" if torch_s else "n/a",
               "floor_s": f"{floor:.3f}", "of_floor": f"{floor / times['bert_tf']:.0%}"}
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        rows.append(row)
    report("model_speed", rows, list(rows[0]))
    print(f"Measured on {machine}. Ratios > 1: ours is faster (peer's time over ours); of_floor = floor_s / "
          "bert_tf_s; HF torch is measured once per cell, mode and precision and shown in both XLA rows")


if __name__ == "__main__":
    main()
