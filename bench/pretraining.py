"""Pretraining throughput in sequences/s: ours vs keras-hub (BertBackbone + BertMaskedLM) and HF torch
BertForPreTraining.

  pip install -r bench/requirements.txt && python -m bench.pretraining [--preset base] [--batch 16] [--seq 128]
                                          [--precision bf16] [--predictions N] [--peers keras_hub,hf_torch]

All three train the same shapes (vocab 30522, `--preset` size, batch x seq, `--predictions` masked positions: 20 at
seq 128 and 80 at 512 by default, the original recipe's) with AdamW from a fresh model on one fixed batch, so only
the training step is timed: forward, loss, backward, update. Ours runs
`BertPretrainer.train_step` in the `tf.function` loop that `run_pretraining` uses (MLM + NSP); keras-hub runs
its `BertMaskedLM.train_step` in the same loop (masked LM only: keras-hub has no NSP head, so it does less work);
HF runs its eager PyTorch loop (MLM over every position + NSP, as `BertForPreTraining` computes it). `bf16` is
Keras's `mixed_bfloat16` policy for both Keras models and `torch.autocast` around HF's forward pass and loss; `fp16`
is `mixed_float16` with dynamic loss scaling on every side (Keras's `LossScaleOptimizer`, torch's `GradScaler`).
Where TensorFlow sees a GPU everything runs there, torch too (`bench.common.torch_device`); a torch without CUDA is
then left out rather than timed on the CPU. `bench.accelerator` runs this benchmark over the GPU plan's cells.
The method is `bench.model_speed`'s: interleaved rounds (`paired_times`), each figure the median of its rounds,
and a ratio the peer's median time over ours. Goal (issue 28): BERT-Base, seq 128, bf16 >= 1.15x HF torch.
"""

import argparse
import contextlib
import json
import os

import numpy as np

from bench.common import (median, paired_times, peer_configs, report, share_gpu_with_torch, torch_device,
                          torch_sync)
from bench.model_speed import keras_policy

VOCAB = 30522
PEERS = ("keras_hub", "hf_torch")
PRECISIONS = ("fp32", "bf16", "fp16")


def make_batch(batch, seq, predictions=20, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, VOCAB, (batch, seq)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions, replace=False)
                                  for _ in range(batch)]), 1).astype("int32")
    labels = np.take_along_axis(ids, positions, 1)
    return {"ids": ids, "types": (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
            "mask": np.ones((batch, seq), "int32"), "positions": positions, "labels": labels,
            "nsp": rng.integers(0, 2, batch).astype("int32")}


def ours(config, data, steps, precision, jit_compile=False):
    import tensorflow as tf

    from bert_tf import BertEncoder, BertPretrainer
    from bert_tf.optimization import create_optimizer

    with keras_policy(precision):
        model = BertPretrainer(BertEncoder(config))
    model.compile(optimizer=create_optimizer(1e-4, 10000, 100, loss_scale=precision == "fp16"))
    model.optimizer.build(model.trainable_variables)
    x = {"input_word_ids": data["ids"], "input_mask": data["mask"], "input_type_ids": data["types"],
         "masked_lm_positions": data["positions"]}
    y = {"masked_lm_ids": data["labels"], "masked_lm_weights": np.ones(data["labels"].shape, "float32"),
         "next_sentence_labels": data["nsp"]}
    batch = tf.nest.map_structure(tf.constant, (x, y))
    return _tf_loop(model, batch, steps, jit_compile)


def keras_hub_mlm(config, data, steps, precision):
    """keras-hub's training loop, built at its first call (its warm-up round), after ours are traced: building a
    Keras model traces graphs, which would otherwise number our functions differently in a process with keras-hub,
    and the names are part of the persistent XLA cache's keys that `bench.accelerator`'s runs share."""
    built = []

    def run():
        if not built:
            built.append(_keras_hub_loop(config, data, steps, precision))
            run.model = built[0].model
        built[0]()

    return run


def _keras_hub_loop(config, data, steps, precision):
    import keras
    import keras_hub
    import tensorflow as tf

    with keras_policy(precision):
        backbone = keras_hub.models.BertBackbone(**peer_configs(config)[0])
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), weighted_metrics=[])
    x = {"token_ids": data["ids"], "segment_ids": data["types"], "padding_mask": data["mask"].astype(bool),
         "mask_positions": data["positions"]}
    batch = tf.nest.map_structure(tf.constant, (x, data["labels"], np.ones(data["labels"].shape, "float32")))
    model.optimizer.build(model.trainable_variables)
    return _tf_loop(model, batch, steps, False)


def _tf_loop(model, batch, steps, jit_compile):
    import tensorflow as tf

    step = tf.function(model.train_step, jit_compile=True) if jit_compile else model.train_step

    @tf.function
    def loop():
        for _ in tf.range(steps):
            step(batch)

    def run():
        loop()
        model.optimizer.iterations.numpy()  # waits for the queued steps (a GPU runs them asynchronously)

    run.model = model
    return run


def hf_torch(config, data, steps, precision):
    import torch
    import transformers

    device = torch_device()
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(**peer_configs(config)[1])
    model = transformers.BertForPreTraining(hf_config).train().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)

    def tensor(key):
        return torch.tensor(data[key], dtype=torch.long, device=device)

    ids = tensor("ids")
    labels = torch.full_like(ids, -100)
    labels.scatter_(1, tensor("positions"), tensor("labels"))
    inputs = dict(input_ids=ids, attention_mask=tensor("mask"), token_type_ids=tensor("types"), labels=labels,
                  next_sentence_label=tensor("nsp"))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = (lambda: torch.autocast(device, dtype=dtype)) if dtype else contextlib.nullcontext
    scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")

    def loop():
        for _ in range(steps):
            with autocast():
                loss = model(**inputs).loss
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        torch_sync(device)

    return loop


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16")
    parser.add_argument("--predictions", type=int, help="masked positions per sequence (20 at seq <= 128, else 80)")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma list of {', '.join(PEERS)}, or none")
    parser.add_argument("--steps", type=int, default=2, help="steps per timed round")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows_out", help="also write the rows as JSON to this file (for bench.accelerator)")
    args = parser.parse_args()
    if min(args.batch, args.seq, args.steps, args.repeats) < 1:
        parser.error("--batch, --seq, --steps and --repeats must be at least 1")
    peers = [] if args.peers == "none" else args.peers.split(",")
    if set(peers) - set(PEERS):
        parser.error(f"--peers={args.peers}: choose from {', '.join(PEERS)}, or none")
    predictions = args.predictions or (20 if args.seq <= 128 else 80)
    if not 0 < predictions <= args.seq - 2:
        parser.error(f"--predictions={predictions}: must be between 1 and seq - 2 ({args.seq - 2})")

    from bert_tf import BertConfig
    from bert_tf.config import ConfigError

    try:
        config = BertConfig.preset(args.preset, vocab_size=VOCAB, hidden_dropout_prob=0.1,
                                   max_position_embeddings=max(512, args.seq))
    except ConfigError as error:
        parser.error(f"--preset: {error}")
    share_gpu_with_torch()
    data = make_batch(args.batch, args.seq, predictions)
    runs = {"bert_tf": ours(config, data, args.steps, args.precision),
            "bert_tf (jit_compile)": ours(config, data, args.steps, args.precision, True)}
    if "keras_hub" in peers:
        runs["keras-hub BertMaskedLM (MLM only)"] = keras_hub_mlm(config, data, args.steps, args.precision)
    if "hf_torch" in peers:
        if torch_device() is None:
            print("HF torch left out: TensorFlow runs on the GPU and this torch has no CUDA")
        else:
            runs["HF torch BertForPreTraining"] = hf_torch(config, data, args.steps, args.precision)
    times = {name: median(t) for name, t in zip(runs, paired_times(list(runs.values()), repeats=args.repeats,
                                                                 names=list(runs)))}
    rows = [{"implementation": name, "preset": args.preset, "precision": args.precision, "batch": args.batch,
             "seq": args.seq, "predictions": predictions, "seconds_per_step": f"{seconds / args.steps:.3f}",
             "sequences_per_s": f"{args.batch * args.steps / seconds:.1f}",
             "ours_vs_it": f"{seconds / times['bert_tf']:.2f}x"} for name, seconds in times.items()]
    print("each time the median of interleaved rounds; ours_vs_it = its time over ours (> 1: ours is faster)")
    report("pretraining", rows, ["implementation", "preset", "precision", "batch", "seq", "predictions",
                                 "seconds_per_step", "sequences_per_s", "ours_vs_it"])
    if args.rows_out:
        with open(args.rows_out, "w", encoding="utf-8") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
