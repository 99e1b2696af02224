"""Reading a fine-tuning task's files: this checkout against another commit, in memory and time.

  python -m bench.task_files --baseline <git revision> [--examples 393000] [--rounds 3]

Writes an MNLI-format train.tsv of `--examples` rows (sentence pairs of standard-library docstrings, with
stand-ins for the binary-parse and parse columns: ~0.65 KB a row, the real file's ~1 KB), then reads it with
`finetuning.read_split` (as `run_classifier --task_name=MNLI` does) in a fresh process per checkout and round
(this checkout and `--baseline`, a temporary `git worktree`, alternating). Reported: the examples read (which
must be the same), the seconds of the read and the process's peak RSS above its RSS just before it (medians), and
the baseline's figure over ours (above 1: this checkout is faster or smaller).
"""

import os
import random

from bench.common import (MEASURED, alternating_rounds, baseline_checkout, baseline_flags, baseline_row,
                          docstring_lines, report, run_in_checkout)

CHILD = MEASURED + r'''
import json, sys
from bert_tf.finetuning import read_split
from bert_tf.tasks import get_task

examples, seconds, grown = measured(lambda: read_split(get_task("mnli"), "train", sys.argv[1], None))
print(json.dumps({"examples": len(examples), "read_s": seconds, "peak_rss_growth_mb": grown}))
'''

GENRES = ("fiction", "government", "slate", "telephone", "travel")
LABELS = ("contradiction", "entailment", "neutral")


def parse(sentence):
    """A stand-in for the binary-parse and parse columns: the words bracketed, about as long as the real ones."""
    return "( " + " ".join(f"( {word} )" for word in sentence.split()) + " )"


def write_mnli(directory, examples, seed=0):
    rng = random.Random(seed)
    lines = [line for line in docstring_lines() if len(line.split()) >= 6]
    with open(os.path.join(directory, "train.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
                "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n")
        for index in range(examples):
            a, b, label = rng.choice(lines), rng.choice(lines), rng.choice(LABELS)
            f.write(f"{index}\t{index}\t{index}e\t{rng.choice(GENRES)}\t{parse(a)}\t{parse(b)}\t(ROOT {parse(a)})\t"
                    f"(ROOT {parse(b)})\t{a}\t{b}\t{label}\t{label}\n")


def main():
    args = baseline_flags({"examples": (393000, "rows of train.tsv (MNLI's: 392,702)")})
    with baseline_checkout(args.baseline, "bench_task_files_") as (work, baseline):
        write_mnli(work, args.examples)
        megabytes = os.path.getsize(os.path.join(work, "train.tsv")) / 1e6
        runs = alternating_rounds(args.rounds, baseline,
                                  lambda name, checkout, round_: run_in_checkout(CHILD, checkout, work))
    read = {run["examples"] for name in runs for run in runs[name]}
    if read != {args.examples}:
        raise SystemExit(f"bench.task_files: the runs read {sorted(read)} examples of the {args.examples} written")
    rows = [baseline_row(runs, measure, args.baseline, examples=args.examples, megabytes=f"{megabytes:.0f}")
            for measure in ("read_s", "peak_rss_growth_mb")]
    report("task_files", rows, list(rows[0]))


if __name__ == "__main__":
    main()
