"""Reading a task's TFDS split: this checkout against another commit.

  python -m bench.tfds_read --baseline <git revision> [--mnli 393000] [--squad 87599] [--rounds 3]

The readers behind `--tfds_name` run on TFDS's offline mock (`tfds.testing.mock_data`), served from memory: the
split is a cached `tf.data.Dataset` with the builder's features, `--mnli` rows shaped like glue/mnli's train split
(`idx`, `label`, `premise`, `hypothesis`: standard-library docstring sentences) and `--squad` like squad/v1.1's
(`id`, `title`, `context`, `question`, `answers` of one to three words of the context and their starts; about five
questions to a context, as in SQuAD, in no particular order, as TFDS stores them), so that what is timed is the
reader, not TFDS's file decoding. In a fresh process per checkout and round (this checkout and `--baseline`, a
temporary `git worktree`, alternating): `finetuning.read_split` of MNLI's train split (what `run_classifier
--task_name=MNLI --tfds_name=glue/mnli` reads) and `squad.tfds_data` of squad/v1.1's train split, each timed once
after the split has been read through once; then the SQuAD training examples made from that data
(`squad.parse_examples`, as `run_squad --tfds_name=squad/v1.1` makes them), with the process's peak RSS above its
RSS before them (MB). Both checkouts must read the same examples (a digest of each is compared). Reported: medians,
and the baseline's over ours (above 1: this checkout is faster or smaller).
"""

from bench.common import (MEASURED, alternating_rounds, baseline_checkout, baseline_flags, baseline_row, report,
                          run_in_checkout)

CHILD = MEASURED + r'''
import hashlib, json, random, sys
import tensorflow as tf
import tensorflow_datasets as tfds
from bench.common import docstring_lines
from bert_tf.finetuning import read_split
from bert_tf.tasks import get_task, squad

mnli, questions = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(0)
lines = [line for line in docstring_lines() if len(line.split()) >= 6]
contexts = [" ".join(rng.sample(lines, 4)) for _ in range(max(1, questions // 5))]
asked = [contexts[rng.randrange(len(contexts))] for _ in range(questions)]
answers = [rng.randint(1, 3) for _ in range(questions)]
spans = []  # each answer a word of its context, at its place
for context, count in zip(asked, answers):
    for _ in range(count):
        word = rng.choice(context.split())
        spans.append((word, context.index(word)))
splits = {
    "mnli": tf.data.Dataset.from_tensor_slices({
        "idx": tf.range(mnli), "label": tf.constant([rng.randrange(3) for _ in range(mnli)], tf.int64),
        "premise": [rng.choice(lines) for _ in range(mnli)], "hypothesis": [rng.choice(lines) for _ in range(mnli)]}),
    "squad": tf.data.Dataset.from_tensor_slices({
        "id": [str(i) for i in range(questions)], "title": ["t"] * questions,
        "context": asked, "question": [rng.choice(lines) + "?" for _ in range(questions)],
        "answers": {"text": tf.RaggedTensor.from_row_lengths([text for text, _ in spans], answers),
                    "answer_start": tf.RaggedTensor.from_row_lengths(
                        tf.constant([start for _, start in spans], tf.int32), answers)}}),
}
splits = {name: data.cache() for name, data in splits.items()}
for data in splits.values():  # filled once, so that each timed read takes rows from memory
    for _ in data:
        pass


def served(self, split, **kwargs):
    return splits["mnli" if self.name == "glue" else "squad"]


digest = lambda value: hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
out = {}
with tfds.testing.mock_data(as_dataset_fn=served):
    for name, read in (("mnli", lambda: read_split(get_task("mnli"), "train", None, "glue/mnli")),
                       ("squad", lambda: squad.tfds_data("squad/v1.1", "train"))):
        began = time.perf_counter()
        result = read()
        out[f"{name}_s"] = time.perf_counter() - began
        out[f"{name}_digest"] = digest([vars(e) for e in result] if name == "mnli" else result)
    examples, _, out["squad_examples_peak_rss_growth_mb"] = measured(
        lambda: squad.parse_examples(result, True, False, "squad/v1.1"))
    out["squad_digest"] += digest([vars(e) for e in examples])
print(json.dumps(out))
'''


def main():
    args = baseline_flags({"mnli": (393000, "rows of the glue/mnli train split (MNLI's: 392,702)"),
                           "squad": (87599, "questions of the squad/v1.1 train split (SQuAD's: 87,599)")})
    with baseline_checkout(args.baseline, "bench_tfds_read_") as (_, baseline):
        runs = alternating_rounds(args.rounds, baseline, lambda name, checkout, round_: run_in_checkout(
            CHILD, checkout, str(args.mnli), str(args.squad)))
    for key in ("mnli_digest", "squad_digest"):
        if len({run[key] for name in runs for run in runs[name]}) != 1:
            raise SystemExit(f"bench.tfds_read: {args.baseline} and this checkout read other {key.split('_')[0]} "
                             "examples; compare them before timing them")
    rows = [baseline_row(runs, measure, args.baseline, rows=rows) for measure, rows in (
        ("mnli_s", args.mnli), ("squad_s", args.squad), ("squad_examples_peak_rss_growth_mb", args.squad))]
    report("tfds_read", rows, list(rows[0]))


if __name__ == "__main__":
    main()
