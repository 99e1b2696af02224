"""Loading an original (TF1) checkpoint of a pretraining run: this checkout against another commit, in memory and
time.

  python -m bench.checkpoint_restore --baseline <git revision> [--layers 12] [--hidden 768] [--rounds 3]

Writes a checkpoint of `--layers` layers of width `--hidden` (heads of 64, the FFN 4x: BERT-Base by default) in
the original's name-based format (`save_original`) with what google-research/bert's pretraining saves beside the
weights: two Adam slots per weight (`adam_m`, `adam_v`) and the global step. Then, in a fresh process per checkout
and round (this checkout and `--baseline`, a temporary `git worktree`, alternating), builds the encoder and loads
the checkpoint into it with `restore_original` (what `--init_checkpoint` does). Reported: the seconds of the load
and the process's peak RSS above its RSS just before it (medians), and the baseline's figure over ours (above 1:
this checkout is faster or smaller).
"""

import os

from bench.common import (MEASURED, ROOT, alternating_rounds, baseline_checkout, baseline_flags, baseline_row,
                          report, run_in_checkout)

WRITE = r'''
import glob, json, os, sys
import numpy as np
import tensorflow as tf
from bert_tf import BertConfig
from bert_tf.checkpoints import read_original, save_original
from bert_tf.models import BertEncoder

prefix, layers, hidden = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=hidden // 64,
                    intermediate_size=4 * hidden)
save_original(BertEncoder(config), prefix + ".weights", global_step=1)
weights = read_original(prefix + ".weights")
for path in glob.glob(prefix + ".weights.*"):
    os.remove(path)
names, tensors = [], []
for name, value in weights.items():
    names.append(name)
    tensors.append(value)
    if name != "global_step":
        names += [name + "/adam_m", name + "/adam_v"]
        tensors += [np.full_like(value, 1e-3), np.full_like(value, 1e-6)]
tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)
print(json.dumps({"tensors": len(names)}))
'''

LOAD = MEASURED + r'''
import json, sys
from bert_tf import BertConfig
from bert_tf.checkpoints import restore_original
from bert_tf.models import BertEncoder

layers, hidden = int(sys.argv[2]), int(sys.argv[3])
encoder = BertEncoder(BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=hidden // 64,
                                 intermediate_size=4 * hidden))
report, seconds, grown = measured(lambda: restore_original(encoder, sys.argv[1]))
print(json.dumps({"loaded": report["loaded"], "load_s": seconds, "peak_rss_growth_mb": grown}))
'''


def main():
    args = baseline_flags({"layers": (12, "encoder layers"), "hidden": (768, "their width, a multiple of 64")})
    if args.hidden % 64:
        raise SystemExit(f"--hidden={args.hidden}: must be a multiple of 64 (heads of 64)")
    with baseline_checkout(args.baseline, "bench_checkpoint_restore_") as (work, baseline):
        prefix = os.path.join(work, "model.ckpt")
        tensors = run_in_checkout(WRITE, ROOT, prefix, str(args.layers), str(args.hidden))["tensors"]
        megabytes = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work)
                        if f.startswith("model.ckpt.data")) / 1e6
        runs = alternating_rounds(args.rounds, baseline, lambda name, checkout, round_: run_in_checkout(
            LOAD, checkout, prefix, str(args.layers), str(args.hidden)))
    loaded = {run["loaded"] for name in runs for run in runs[name]}
    if len(loaded) != 1:
        raise SystemExit(f"bench.checkpoint_restore: the checkouts loaded {sorted(loaded)} weights")
    rows = [baseline_row(runs, measure, args.baseline, layers=args.layers, hidden=args.hidden,
                         checkpoint_tensors=tensors, checkpoint_mb=f"{megabytes:.0f}")
            for measure in ("load_s", "peak_rss_growth_mb")]
    report("checkpoint_restore", rows, list(rows[0]))


if __name__ == "__main__":
    main()
