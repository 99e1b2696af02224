"""Fine-tuning throughput, examples/s: our `run_classifier` loop vs keras-hub's `BertTextClassifier.fit` and HF torch.

  pip install -r bench/requirements.txt && python -m bench.finetuning [--quick] [--batch 8] [--repeats 5]

A 2-label sequence classifier on BERT-Base (vocab 30,522, dropout 0.1) trained on the same in-memory examples
(random ids, no padding, `--batch` x `--seq`), fp32 and bf16, from a fresh model, each implementation the way its
users run it:

- ours: `bert_tf.models.BertClassifier` compiled with `bert_tf.optimization.create_optimizer` (the paper's AdamW,
  warmup then linear decay, global-norm clipping) and trained by `bert_tf.training.train`, the compiled multi-step
  loop `run_classifier` uses, on a `tf.data` pipeline of the arrays (repeat, batch). Checkpoints are set further
  apart than the run, so no checkpoint is written while it is timed (the one `train` writes at its end is not
  timed);
- keras-hub: `BertTextClassifier(backbone, num_classes=2, preprocessor=None).fit` on the same pipeline, Keras's
  AdamW with the same schedule, clipping and weight decay, no metrics (ours computes none while training);
- HF: `BertForSequenceClassification` in a plain PyTorch loop: torch's AdamW (no decay on biases and LayerNorm,
  as ours), the same schedule through `LambdaLR`, `clip_grad_norm_`, batches sliced from the same arrays.

`bf16` is Keras's `mixed_bfloat16` policy (bf16 compute, fp32 variables) and torch's CPU autocast; torch's row is
left out when its bf16 GEMM runs at under a quarter of its fp32 rate on this CPU (a BERT-Base step would take
minutes). All use every core. Ours and keras-hub's each run as one long `train`/`fit` call in a thread that pauses
after every `--steps` steps (at `train`'s progress report and at the end of each `fit` epoch), so a round is timed
from resuming it to its next pause, while the other implementations wait: rounds are interleaved as `paired_times`
does, after one warm-up round each. Examples/s = batch x steps / round time (median over rounds); a ratio is the
peer's median round time over ours, `bench.model_speed`'s method, so it can be recomputed from the two examples/s
shown (> 1: ours is faster); the range of the per-round ratios is shown beside it.

Where our time goes: one more round of ours is traced with `tf.profiler` and its op time summed by type
(`bench.profile.op_times`): the GEMMs (`MatMul`/`BatchMatMul` kernels), the optimizer's update (the ops under its
name scope and the XLA thunks of its compiled updates, `bench.profile.compiled_update_thunks`) and the largest other
op types.
"""

import argparse
import os
import queue
import shutil
import tempfile
import threading

from bench.common import (machine_name, median, paired_times, peer_configs, report, share_gpu_with_torch,
                          torch_device, torch_matmul_rate, torch_sync)
from bench.model_speed import VOCAB, keras_policy, make_batch

LEARNING_RATE, WARMUP = 2e-5, 0.1
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16"}


class _Ended(RuntimeError):
    """A `_Paused` body returned while the benchmark still wanted a round."""


class _Paused:
    """Runs `body(pause)` in a thread; each call of this object lets it run until its next `pause()` and returns.

    `body` calls `pause()` after every round of steps; the thread then waits until the next call. An error in the
    thread is raised in the caller. `close()` lets the body run to its end (untimed work after the last round)."""

    def __init__(self, body):
        self._go, self._paused = threading.Semaphore(0), queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(body,), daemon=True)
        self._started = self._ended = False

    def _pause(self):
        self._paused.put(None)
        self._go.acquire()

    def _run(self, body):
        try:
            body(self._pause)
            self._paused.put(_Ended("the training run ended before the benchmark's last round"))
        except BaseException as error:  # noqa: BLE001 - handed to the caller, which raises it
            self._paused.put(error)

    def __call__(self):
        if self._started:
            if self._ended:
                raise _Ended("the training run has ended: no round left to run")
            self._go.release()
        else:
            self._started = True
            self._thread.start()
        error = self._paused.get()
        if error is not None:
            self._ended = True
            raise error

    def close(self):
        if not self._started or self._ended:
            return
        while self._thread.is_alive():
            self._go.release()
            error = self._paused.get()
            if error is not None:
                self._thread.join()
                if not isinstance(error, _Ended):
                    raise error


def _dataset(arrays, batch, keras_hub_names=False):
    import tensorflow as tf

    if keras_hub_names:
        x = {"token_ids": arrays["ids"], "segment_ids": arrays["types"], "padding_mask": arrays["mask"].astype(bool)}
    else:
        x = {"input_word_ids": arrays["ids"], "input_mask": arrays["mask"], "input_type_ids": arrays["types"]}
    return tf.data.Dataset.from_tensor_slices((x, arrays["labels"])).repeat().batch(batch, drop_remainder=True)


def ours(config, arrays, precision, batch, steps, rounds, workdir):
    """Our fine-tuning loop as a `_Paused` run of `rounds` x `steps` steps."""
    import keras
    import tensorflow as tf

    from bert_tf import BertClassifier, BertEncoder, training
    from bert_tf.optimization import create_optimizer

    total = steps * rounds
    strategy = tf.distribute.get_strategy()
    model = BertClassifier(BertEncoder(config, dtype=POLICIES[precision]), num_classes=2)
    model.compile(optimizer=create_optimizer(LEARNING_RATE, total, int(total * WARMUP)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), auto_scale_loss=False)

    def body(pause):
        training.train(model, strategy, lambda context: _dataset(arrays, batch), workdir, num_train_steps=total,
                       global_batch_size=batch, steps_per_loop=steps, save_checkpoints_steps=total + 1,
                       progress=lambda step, scalars: pause())

    run = _Paused(body)
    run.model = model
    return run


def keras_hub(config, arrays, precision, batch, steps, rounds):
    """keras-hub's `BertTextClassifier.fit` as a `_Paused` run of `rounds` epochs of `steps` steps."""
    import keras
    import keras_hub

    from bert_tf.optimization import warmup_linear_decay

    total = steps * rounds
    with keras_policy(precision):
        backbone = keras_hub.models.BertBackbone(**peer_configs(config)[0])
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    optimizer = keras.optimizers.AdamW(warmup_linear_decay(LEARNING_RATE, total, int(total * WARMUP)),
                                       weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "norm"])
    # jit_compile=False as in our loop: Keras's "auto" compiles with XLA wherever a GPU is visible
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[], jit_compile=False)

    class Pause(keras.callbacks.Callback):
        def __init__(self, pause):
            super().__init__()
            self.pause = pause

        def on_epoch_end(self, epoch, logs=None):
            self.pause()

    def body(pause):
        model.fit(_dataset(arrays, batch, keras_hub_names=True), epochs=rounds, steps_per_epoch=steps, verbose=0,
                  shuffle=False, callbacks=[Pause(pause)])

    run = _Paused(body)
    run.model = model
    return run


def hf_torch(config, arrays, precision, batch, steps, rounds):
    """HF `BertForSequenceClassification` in a plain torch loop; each call runs `steps` steps."""
    import contextlib

    import torch
    import transformers

    device = torch_device()
    torch.set_num_threads(os.cpu_count())
    total = steps * rounds
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(**peer_configs(config)[1], num_labels=2)).train().to(device)
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=LEARNING_RATE, eps=1e-6)
    warmup = int(total * WARMUP)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    tensors = {name: torch.tensor(arrays[key], dtype=torch.long, device=device) for name, key in
               (("input_ids", "ids"), ("attention_mask", "mask"), ("token_type_ids", "types"), ("labels", "labels"))}
    count = len(arrays["labels"]) // batch * batch
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    position = [0]

    def run():
        for _ in range(steps):
            start = position[0]
            position[0] = (start + batch) % count
            with autocast():
                loss = model(**{k: t[start:start + batch] for k, t in tensors.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        torch_sync(device)

    return run


def where_time_goes(run, top=6):
    """Traces one call of `run` (a `_Paused` round of our loop) and returns the shares of the summed op time:
    (GEMMs, the optimizer's update (ops under its name scope and the thunks of its compiled updates), [(op type,
    share)] of the non-GEMM op types)."""
    import tensorflow as tf

    from bench.profile import compiled_update_thunks, op_times

    logdir = tempfile.mkdtemp(prefix="bench_finetuning_profile_")
    try:
        tf.profiler.experimental.start(logdir)
        try:
            run()
        finally:
            tf.profiler.experimental.stop()
        by_type, by_name = op_times(logdir)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    total = sum(by_type.values())
    if not total:
        raise SystemExit("bench.finetuning: the profiler trace held no TF op events; cannot say where the time goes")
    gemm = sum(seconds for op, seconds in by_type.items() if "MatMul" in op or "Einsum" in op)
    rest = [(op, seconds / total) for op, seconds in by_type.most_common()
            if not ("MatMul" in op or "Einsum" in op)][:top]
    scope = f"/{run.model.optimizer.name}/"
    update = sum(seconds for name, seconds in by_name.items() if scope in name)
    update += sum(by_type[name] for name in compiled_update_thunks())
    return gemm / total, update / total, rest


def measure(config, precision, batch, seq, steps, repeats, examples, with_torch, profile):
    """One precision: the three loops' per-round times, interleaved, and the profile of ours."""
    arrays = make_batch(examples, seq)
    rounds = 1 + repeats  # the warm-up and the timed rounds; ours has one more when it is traced
    workdir = tempfile.mkdtemp(prefix="bench_finetuning_")
    runs = {"bert_tf": ours(config, arrays, precision, batch, steps, rounds + (1 if profile else 0), workdir),
            "keras-hub": keras_hub(config, arrays, precision, batch, steps, rounds)}
    if with_torch:
        runs["HF torch"] = hf_torch(config, arrays, precision, batch, steps, rounds)
    try:
        times = dict(zip(runs, paired_times(list(runs.values()), repeats=repeats)))
        breakdown = where_time_goes(runs["bert_tf"]) if profile else None
        for run in runs.values():
            if isinstance(run, _Paused):
                run.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return times, breakdown


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the tiny preset, batch 4, seq 32: a smoke test")
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2, help="train steps per timed round")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (after one warm-up round)")
    parser.add_argument("--examples", type=int, default=256, help="distinct in-memory examples, drawn in turn")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma list of fp32, bf16")
    parser.add_argument("--no_profile", action="store_true", help="skip the traced round (where the time goes)")
    args = parser.parse_args()
    if args.quick:
        args.preset, args.batch, args.seq, args.steps = "tiny", 4, 32, 2
    precisions = args.precisions.split(",")
    unknown = sorted(set(precisions) - set(POLICIES))
    if unknown:
        parser.error(f"--precisions: unknown {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    if min(args.batch, args.seq, args.steps, args.repeats) < 1 or args.examples < args.batch:
        parser.error("--batch, --seq, --steps and --repeats must be at least 1, and --examples at least --batch")

    from bert_tf import BertConfig
    from bert_tf.config import ConfigError

    try:
        config = BertConfig.preset(args.preset, vocab_size=VOCAB, max_position_embeddings=max(512, args.seq))
    except ConfigError as error:
        parser.error(f"--preset: {error}")
    share_gpu_with_torch()
    cpu = machine_name()
    torch_rates = {p: torch_matmul_rate(d) for p, d in (("fp32", "float32"), ("bf16", "bfloat16"))}
    torch_bf16 = torch_rates["bf16"] >= 0.25 * torch_rates["fp32"]
    print(f"{cpu}; torch GEMM fp32 {torch_rates['fp32'] / 1e9:.1f}, bf16 {torch_rates['bf16'] / 1e9:.1f} GFLOP/s",
          flush=True)
    rows = []
    for precision in precisions:
        with_torch = torch_device() is not None and (precision == "fp32" or torch_bf16)
        times, breakdown = measure(config, precision, args.batch, args.seq, args.steps, args.repeats, args.examples,
                                   with_torch, not args.no_profile)
        if breakdown:
            gemm, update, rest = breakdown
            print(f"ours {precision}: GEMMs {gemm:.1%} of summed op time, the optimizer's update {update:.1%}; "
                  "the largest other op types: "
                  + ", ".join(f"{op} {share:.1%}" for op, share in rest), flush=True)
        examples = args.batch * args.steps
        for name in ("bert_tf", "keras-hub", "HF torch"):
            row = {"cpu": cpu, "implementation": name, "preset": args.preset, "batch": args.batch, "seq": args.seq,
                   "precision": precision, "rounds": f"{args.repeats} x {args.steps} steps"}
            if name not in times:
                row.update(examples_per_s="n/a", examples_per_s_range="", ours_vs_it="",
                           per_round_ratio_range="TF runs on the GPU, this torch has no CUDA" if torch_device() is None
                           else f"torch bf16 GEMM {torch_rates['bf16'] / 1e9:.1f} GFLOP/s here")
            else:
                rates = [examples / t for t in times[name]]
                ratios = [r / o for o, r in zip(times["bert_tf"], times[name])]
                row.update(examples_per_s=f"{median(rates):.2f}",
                           examples_per_s_range=f"{min(rates):.2f}-{max(rates):.2f}",
                           ours_vs_it="" if name == "bert_tf" else
                           f"{median(times[name]) / median(times['bert_tf']):.2f}",
                           per_round_ratio_range="" if name == "bert_tf" else f"{min(ratios):.2f}-{max(ratios):.2f}")
            row["gemm_share"] = f"{breakdown[0]:.1%}" if breakdown and name == "bert_tf" else ""
            rows.append(row)
    report("finetuning", rows, list(rows[0]))
    print("examples/s: median over rounds (range: min-max); ours_vs_it: its median round time over ours (> 1: ours "
          "is faster), per_round_ratio_range: the same ratio's range over the rounds; gemm_share: GEMM kernels' share "
          "of our step's summed op time")


if __name__ == "__main__":
    main()
