"""The GPU plan: pretraining throughput (sequences/s) of BERT-Base and BERT-Large at seq 128 and 512, with XLA and
mixed precision, on the GPU TensorFlow sees, beside NVIDIA's published TensorFlow 2 figures for the same cells.

  python -m bench.accelerator [--presets large,base] [--seqs 128,512] [--precisions fp16,bf16]
                              [--peers keras_hub,hf_torch] [--steps 5] [--repeats 3] [--budget_s 0]

Each cell runs `bench.pretraining` in processes of its own (a fresh GPU memory pool): first ours alone (with and
without `jit_compile`) for the largest batch ours fits, which is set against NVIDIA's figure; then ours and the
peers on the same GPU at one batch that all of them fit, for the ratios between them. Every cell's run alone comes
before any run with the peers, and the cells that NVIDIA has a figure for come first, so that a plan cut short by
`--budget_s` (seconds for the whole plan; a run still going then is stopped) has the comparisons that matter most.
The children share a persistent XLA cache (`--tf_xla_persistent_cache_directory`), so the run with the peers, at the
same batch, loads the training step that the run alone compiled (checked on a CPU). Each child's output streams
through, its warm-up times (tracing, XLA's compile) included. Both runs append their rows to
`bench/results/pretraining.csv` with the GPU's name. The per-GPU batch starts at NVIDIA's for an A100 80GB (`BATCH`,
`FIRST_BATCH`) and is halved until the run fits in memory. The reference (`PUBLISHED`) is NVIDIA's
DeepLearningExamples `TensorFlow2/LanguageModeling/BERT` README, "Pre-training training performance: Single-node on
NVIDIA DGX A100 (8x A100 80GB)", one GPU, NGC TensorFlow 21.02, LAMB with gradient accumulation over many
micro-batches per update; ours updates every step, so an update's cost is counted in every step here. bf16 has no
NVIDIA figure. On a machine where TensorFlow sees no GPU this says so and stops. BENCHMARKS.md, "The GPU plan",
lists the figures.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from bench.common import report
from bench.pretraining import PEERS, PRECISIONS

# NVIDIA's per-GPU batch on an A100 80GB: (seq, precision) -> batch; TF32 (our fp32) needs smaller ones.
BATCH = {(128, "fp32"): 176, (512, "fp32"): 22}
FIRST_BATCH = {128: 312, 512: 40}
# NVIDIA's BERT-Large sequences/s on one A100 80GB (see the docstring): (seq, precision) -> figure. On Ampere and
# later, TensorFlow runs float32 matmuls in TF32 unless told otherwise, so fp32 is compared with their TF32 figure.
PUBLISHED = {(128, "fp16"): 485.59, (512, "fp16"): 96.52, (128, "fp32"): 282.98, (512, "fp32"): 54.92}
# How a run that ran out of GPU memory ends: TensorFlow's ResourceExhaustedError (its "OOM when allocating" message;
# the C++ log line with RESOURCE_EXHAUSTED is silenced by bert_tf's quiet log level), XLA's allocation failure,
# torch's OutOfMemoryError.
OUT_OF_MEMORY = ("ResourceExhaustedError", "OOM when allocating", "RESOURCE_EXHAUSTED", "Out of memory while trying",
                 "OutOfMemoryError", "CUDA out of memory")
# `run_cell`'s rows for a run that --budget_s stopped, or kept from starting.
CUT_SHORT = "cut short"


def run_cell(preset, seq, precision, batch, args, peers, env=None, deadline=None):
    """Runs one cell of `bench.pretraining` with `peers`, halving the batch on out-of-memory; returns (batch, rows),
    (batch, None) with the failure printed, or (batch, CUT_SHORT) where `deadline` (a `time.monotonic()` time) came
    first: a run still going then is stopped, and the end of its log printed. The child's output streams through."""
    while True:
        if spent(deadline):
            return batch, CUT_SHORT
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            command = [sys.executable, "-m", "bench.pretraining", f"--preset={preset}", f"--seq={seq}",
                       f"--batch={batch}", f"--precision={precision}", f"--peers={peers}",
                       f"--steps={args.steps}", f"--repeats={args.repeats}", f"--rows_out={out}"]
            print(f"\n== {' '.join(command[1:-1])}", flush=True)
            try:
                done = subprocess.run(command, stderr=subprocess.PIPE, text=True, env=env,
                                      timeout=None if deadline is None else max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as stopped:
                log = stopped.stderr or ""  # what the child wrote so far, as bytes
                print((log.decode(errors="replace") if isinstance(log, bytes) else log)[-3000:], file=sys.stderr)
                print("stopped: --budget_s ran out", flush=True)
                return batch, CUT_SHORT
            if done.returncode == 0:
                with open(out, encoding="utf-8") as f:
                    return batch, json.load(f)
        if batch > 1 and any(marker in done.stderr for marker in OUT_OF_MEMORY):
            batch //= 2
            print(f"out of GPU memory: again with batch {batch}", flush=True)
            continue
        print(f"{done.stderr[-3000:]}\nbench.pretraining ended with exit status {done.returncode}"
              + (" (SIGKILL, which the kernel's out-of-memory killer sends)" if done.returncode == -9 else ""),
              file=sys.stderr)
        return batch, None


def xla_cache_env(directory):
    """The children's environment, with TensorFlow's persistent XLA cache in `directory` unless the user named one
    in TF_XLA_FLAGS: a child at a shape compiled before loads the compiled step instead of compiling it again."""
    env = dict(os.environ)
    flags = env.get("TF_XLA_FLAGS", "")
    if "--tf_xla_persistent_cache_directory" not in flags:
        env["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={directory}".strip()
    return env


def spent(deadline):
    """Whether the plan's time (a `time.monotonic()` deadline, None for no limit) is up."""
    return deadline is not None and time.monotonic() >= deadline


def published_figure(preset, seq, precision):
    """NVIDIA's sequences/s for the cell, or None: they publish BERT-Large in fp16 and TF32 only."""
    return PUBLISHED.get((seq, precision)) if preset == "large" else None


def rates(rows):
    return {row["implementation"]: float(row["sequences_per_s"]) for row in rows}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--presets", default="large,base")
    parser.add_argument("--seqs", default="128,512")
    parser.add_argument("--precisions", default="fp16,bf16")
    parser.add_argument("--peers", default="keras_hub,hf_torch")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget_s", type=float, default=0,
                        help="seconds for the whole plan (runs not started by then are listed), 0 for no limit")
    args = parser.parse_args()
    seqs = [int(seq) for seq in args.seqs.split(",") if seq.isdigit()]
    if len(seqs) != len(args.seqs.split(",")) or set(seqs) - set(FIRST_BATCH):
        parser.error(f"--seqs={args.seqs}: the plan's cells are {', '.join(map(str, FIRST_BATCH))}")
    if set(args.precisions.split(",")) - set(PRECISIONS):
        parser.error(f"--precisions={args.precisions}: choose from {', '.join(PRECISIONS)}")
    if args.peers != "none" and set(args.peers.split(",")) - set(PEERS):
        parser.error(f"--peers={args.peers}: choose from {', '.join(PEERS)}, or none")
    if min(args.steps, args.repeats) < 1:
        parser.error("--steps and --repeats must be at least 1")
    if not (math.isfinite(args.budget_s) and args.budget_s >= 0):
        parser.error(f"--budget_s={args.budget_s}: give seconds, or 0 for no limit")
    for flag in ("presets", "seqs", "precisions"):
        names = getattr(args, flag).split(",")
        if len(set(names)) < len(names):
            parser.error(f"--{flag}={getattr(args, flag)}: each may be named once")

    import bert_tf  # noqa: F401  (TensorFlow's settings, as every benchmark has them)
    from bench.common import tf_gpu_names
    from bert_tf import BertConfig

    unknown = [name for name in args.presets.split(",") if name not in BertConfig.preset_names()]
    if unknown:
        parser.error(f"--presets: unknown {', '.join(unknown)}; choose from {', '.join(BertConfig.preset_names())}")

    gpus = tf_gpu_names()
    if not gpus:
        raise SystemExit("bench.accelerator: TensorFlow sees no GPU on this machine; the GPU plan needs one "
                         "(CPU figures: python -m bench.pretraining)")
    print(f"GPU: {', '.join(gpus)}", flush=True)
    deadline = time.monotonic() + args.budget_s if args.budget_s else None
    cells = [(preset, seq, precision) for preset in args.presets.split(",") for seq in seqs
             for precision in args.precisions.split(",")]
    cells.sort(key=lambda cell: published_figure(*cell) is None)  # stable: the given order within each group
    rows, failed, not_run = {}, [], []
    with tempfile.TemporaryDirectory() as cache:
        env = xla_cache_env(cache)
        for preset, seq, precision in cells:
            name = f"{preset} seq {seq} {precision}"
            if spent(deadline):
                not_run.append(name)
                continue
            first = BATCH.get((seq, precision), FIRST_BATCH[seq])
            batch, alone = run_cell(preset, seq, precision, first, args, "none", env, deadline)
            if alone is None or alone is CUT_SHORT:
                (failed if alone is None else not_run).append(name)
                continue
            ours = rates(alone)
            best = max(ours["bert_tf"], ours["bert_tf (jit_compile)"])
            published = published_figure(preset, seq, precision)
            rows[preset, seq, precision] = {
                "preset": preset, "seq": seq, "precision": precision, "batch": batch, "bert_tf": ours["bert_tf"],
                "bert_tf_xla": ours["bert_tf (jit_compile)"], "nvidia_a100_80gb": published or "-",
                "ours_vs_nvidia": f"{best / published:.2f}x" if published else "-", "peers_batch": "-",
                "ours_vs_keras_hub": "-", "ours_vs_hf_torch": "-"}
        if args.peers != "none":
            for (preset, seq, precision), row in rows.items():
                name = f"{preset} seq {seq} {precision} with the peers"
                if spent(deadline):
                    not_run.append(name)
                    continue
                peers_batch, compared = run_cell(preset, seq, precision, row["batch"], args, args.peers, env, deadline)
                if compared is None or compared is CUT_SHORT:
                    (failed if compared is None else not_run).append(name)
                    continue
                both = rates(compared)
                mine = max(both["bert_tf"], both["bert_tf (jit_compile)"])
                for column, peer in (("ours_vs_keras_hub", "keras-hub BertMaskedLM (MLM only)"),
                                     ("ours_vs_hf_torch", "HF torch BertForPreTraining")):
                    if peer in both:
                        row[column] = f"{mine / both[peer]:.2f}x"
                row["peers_batch"] = peers_batch
    rows = list(rows.values())
    if rows:
        print("\nsequences/s of ours alone at `batch`; nvidia_a100_80gb: NVIDIA's published TF2 BERT-Large figure "
              "for the cell (one A100 80GB); ours_vs_*: the faster of ours over the peer, all at peers_batch in one "
              "process")
        report("accelerator", rows, list(rows[0]))
    problems = [f"failed: {', '.join(failed)}"] if failed else []
    if not_run:
        problems.append(f"not run or cut short, --budget_s={args.budget_s:g} spent: {', '.join(not_run)}")
    if problems:
        raise SystemExit("; ".join(problems))


if __name__ == "__main__":
    main()
