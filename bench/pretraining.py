"""Pretraining throughput in sequences/s: ours vs keras-hub (BertBackbone + BertMaskedLM) and HF torch
BertForPreTraining.

  pip install -r bench/requirements.txt && python -m bench.pretraining [--preset base] [--batch 16] [--seq 128]
                                                                        [--precision bf16]

All three train the same shapes (vocab 30522, `--preset` size, batch x seq, 20 masked positions) with AdamW from a
fresh model on one fixed batch, so only the training step is timed: forward, loss, backward, update. Ours runs
`BertPretrainer.train_step` in the `tf.function` loop that `run_pretraining` uses (MLM + NSP); keras-hub runs
its `BertMaskedLM.train_step` in the same loop (masked LM only: keras-hub has no NSP head, so it does less work);
HF runs its eager PyTorch loop (MLM over every position + NSP, as `BertForPreTraining` computes it). `bf16` is
Keras's `mixed_bfloat16` policy for both Keras models and `torch.autocast` around HF's forward pass and loss.
The method is `bench.model_speed`'s: interleaved rounds (`paired_times`), each figure the median of its rounds,
and a ratio the peer's median time over ours. Goal (issue 28): BERT-Base, seq 128, bf16 >= 1.15x HF torch.
"""

import argparse
import contextlib
import os

import numpy as np

from bench.common import median, paired_times, peer_configs, report
from bench.model_speed import keras_policy

VOCAB, PREDICTIONS = 30522, 20


def make_batch(batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, VOCAB, (batch, seq)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), PREDICTIONS, replace=False)
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
    model.compile(optimizer=create_optimizer(1e-4, 10000, 100))
    model.optimizer.build(model.trainable_variables)
    x = {"input_word_ids": data["ids"], "input_mask": data["mask"], "input_type_ids": data["types"],
         "masked_lm_positions": data["positions"]}
    y = {"masked_lm_ids": data["labels"], "masked_lm_weights": np.ones(data["labels"].shape, "float32"),
         "next_sentence_labels": data["nsp"]}
    batch = tf.nest.map_structure(tf.constant, (x, y))
    return _tf_loop(model, batch, steps, jit_compile)


def keras_hub_mlm(config, data, steps, precision):
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

    return loop


def hf_torch(config, data, steps, precision):
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(**peer_configs(config)[1])
    model = transformers.BertForPreTraining(hf_config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    ids = torch.tensor(data["ids"], dtype=torch.long)
    labels = torch.full_like(ids, -100)
    labels.scatter_(1, torch.tensor(data["positions"], dtype=torch.long), torch.tensor(data["labels"]).long())
    inputs = dict(input_ids=ids, attention_mask=torch.tensor(data["mask"]), token_type_ids=torch.tensor(
        data["types"], dtype=torch.long), labels=labels, next_sentence_label=torch.tensor(data["nsp"]).long())

    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext

    def loop():
        for _ in range(steps):
            with autocast():
                loss = model(**inputs).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return loop


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--steps", type=int, default=2, help="steps per timed round")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bert_tf import BertConfig

    config = BertConfig.preset(args.preset, vocab_size=VOCAB, hidden_dropout_prob=0.1)
    data = make_batch(args.batch, args.seq)
    runs = {"bert_tf": ours(config, data, args.steps, args.precision),
            "bert_tf (jit_compile)": ours(config, data, args.steps, args.precision, True),
            "keras-hub BertMaskedLM (MLM only)": keras_hub_mlm(config, data, args.steps, args.precision),
            "HF torch BertForPreTraining": hf_torch(config, data, args.steps, args.precision)}
    times = {name: median(t) for name, t in zip(runs, paired_times(list(runs.values()), repeats=args.repeats))}
    rows = [{"implementation": name, "preset": args.preset, "precision": args.precision, "batch": args.batch,
             "seq": args.seq, "seconds_per_step": f"{seconds / args.steps:.3f}",
             "sequences_per_s": f"{args.batch * args.steps / seconds:.1f}",
             "ours_vs_it": f"{seconds / times['bert_tf']:.2f}x"} for name, seconds in times.items()]
    print("each time the median of interleaved rounds; ours_vs_it = its time over ours (> 1: ours is faster)")
    report("pretraining", rows, ["implementation", "preset", "precision", "batch", "seq", "seconds_per_step",
                                 "sequences_per_s", "ours_vs_it"])


if __name__ == "__main__":
    main()
