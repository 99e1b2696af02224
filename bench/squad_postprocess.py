"""run_squad's prediction windows and its answers from logits, and the Python tokenizer under them: this checkout
against another commit.

  python -m bench.squad_postprocess --baseline <git revision> [--questions 10000] [--rounds 3]

In a fresh process per checkout and round (this checkout and `--baseline`, a temporary `git worktree`,
alternating): `bench.squad_features`' SQuAD-shaped file of `--questions` questions is cut into prediction windows
(seq 384, doc stride 128) by `squad.window_features`, after a warm-up on its first 256 questions (tracing), and each
window gets seeded random start and end logits, a third of them rounded to whole numbers so that equal scores
occur; then `squad.postprocess` with its defaults (n-best 20, answers up to 30 pieces; v1.1), and
`FullTokenizer.tokenize` on every line of the standard-library docstrings that the other benchmarks read (collected
once, here, and handed to both). Each is timed once per process, and the windows' peak RSS growth is read (above
the RSS before them, in MB: what run_squad holds through training for its predictions); reported are the medians,
and the baseline's over ours (above 1: this checkout is faster or smaller). Both checkouts must give the same
predictions, n-best lists and tokens: a digest of each is compared, and a difference stops the benchmark.
"""

import json
import os

from bench.common import (MEASURED, alternating_rounds, baseline_checkout, baseline_flags, baseline_row,
                          docstring_lines, report, run_in_checkout)

CHILD = MEASURED + r'''
import hashlib, json, sys
import numpy as np
from bench.common import uncased_vocab
from bert_tf.tasks import squad
from bert_tf.tokenization import FullTokenizer

vocab = uncased_vocab()
examples, _ = squad.read_examples(sys.argv[1], False, False)
squad.window_features(examples[:256], vocab)
(features, _), features_s, features_mb = measured(lambda: squad.window_features(examples, vocab))
rng = np.random.default_rng(0)
start, end = (rng.normal(size=(len(features), 384)).astype(np.float32) for _ in range(2))
start[::3], end[::3] = np.round(start[::3]), np.round(end[::3])
tokenizer = FullTokenizer(vocab)
began = time.perf_counter()
answers = squad.postprocess(examples, features, start, end, tokenizer)
postprocess_s = time.perf_counter() - began
with open(sys.argv[2]) as f:
    lines = json.load(f)
began = time.perf_counter()
tokens = [tokenizer.tokenize(line) for line in lines]
tokenize_s = time.perf_counter() - began
digest = lambda value: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
print(json.dumps({"windows": len(features), "features_s": features_s, "features_peak_rss_growth_mb": features_mb,
                  "postprocess_s": postprocess_s, "tokenize_s": tokenize_s,
                  "lines": len(lines), "answers_digest": digest(answers), "tokens_digest": digest(tokens)}))
'''


def main():
    args = baseline_flags({"questions": (10000, "questions of the SQuAD file whose windows are post-processed")})
    from bench.squad_features import write_squad

    with baseline_checkout(args.baseline, "bench_squad_post_") as (work, baseline):
        path, lines = os.path.join(work, "dev.json"), os.path.join(work, "lines.json")
        write_squad(path, args.questions)
        with open(lines, "w") as f:
            json.dump(docstring_lines(), f)
        runs = alternating_rounds(args.rounds, baseline,
                                  lambda name, checkout, round_: run_in_checkout(CHILD, checkout, path, lines))
    for key in ("answers_digest", "tokens_digest"):
        if len({run[key] for name in runs for run in runs[name]}) != 1:
            raise SystemExit(f"bench.squad_postprocess: {args.baseline} and this checkout differ in "
                             f"{key.split('_')[0]}; compare their outputs before timing them")
    rows = [baseline_row(runs, measure, args.baseline, questions=args.questions, size=size)
            for measure, size in (("features_s", f"{runs['ours'][0]['windows']} windows"),
                                  ("features_peak_rss_growth_mb", f"{runs['ours'][0]['windows']} windows"),
                                  ("postprocess_s", f"{runs['ours'][0]['windows']} windows"),
                                  ("tokenize_s", f"{runs['ours'][0]['lines']} lines"))]
    report("squad_postprocess", rows, list(rows[0]))


if __name__ == "__main__":
    main()
