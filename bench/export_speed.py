"""Export, load and serve: this checkout against another commit of bert-tf, each step in fresh processes.

  python -m bench.export_speed --baseline <git revision> [--preset tiny] [--repeats 3]

One sentence-pair classifier of `--preset` size (random weights, the real uncased vocabulary, saved as
`run_classifier` saves it) is exported with `export_saved_model --kind=classifier` by this checkout and by
`--baseline` (a temporary `git worktree`), in alternating fresh processes. Each export is then loaded in a fresh
process that imports only tensorflow and tensorflow_text, as a server does, and its `serving_default` timed on
short raw-text pairs at batch 1 and 8. Reported: CPU seconds of the export and of the load, the median request
time, the size of `saved_model.pb`, and each as a ratio baseline / this checkout (above 1: this checkout is
faster or smaller).
"""

import argparse
import os

from bench.common import alternating_rounds, baseline_checkout, baseline_row, report, run_in_checkout, uncased_vocab

EXPORT = r'''
import json, sys, time
import bert_tf  # noqa: F401
from export.exporting import export
start = time.process_time()
export("classifier", sys.argv[2], model_dir=sys.argv[1])
print(json.dumps({"export_cpu_s": time.process_time() - start}))
'''

SERVE = r'''
import json, os, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401
start = time.process_time()
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
figures = {"load_cpu_s": time.process_time() - start,
           "saved_model_kb": os.path.getsize(os.path.join(sys.argv[1], "saved_model.pb")) / 1024}
for batch in (1, 8):
    a = tf.constant(["Return a new dictionary initialized from an optional argument."] * batch)
    b = tf.constant(["The socket must be bound to an address."] * batch)
    serve(text_a=a, text_b=b)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            serve(text_a=a, text_b=b)["probabilities"].numpy()
        times.append((time.perf_counter() - start) / 20)
    figures[f"batch_{batch}_ms"] = 1e3 * sorted(times)[2]
print(json.dumps(figures))
'''


def _model(preset, directory):
    from bert_tf import BertConfig
    from bert_tf.finetuning import Cell, FinetuneOptions, GridResult, save
    from bert_tf.models import BertClassifier, BertEncoder
    from bert_tf.tasks import get_task

    os.makedirs(directory)
    config = BertConfig.preset(preset, vocab_size=30522)
    untrained = GridResult(BertClassifier(BertEncoder(config), num_classes=2), Cell(32, 2e-5, 0, 0), 0, [])
    save(untrained, get_task("mrpc"), config, uncased_vocab(), directory, FinetuneOptions(max_seq_length=128),
         pairs=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="a git revision of this repository to compare with")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from bert_tf.config import BertConfig, ConfigError

    try:
        BertConfig.preset(args.preset)
    except ConfigError as error:
        parser.error(f"--preset: {error}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    with baseline_checkout(args.baseline, "bench_export_") as (work, baseline):
        _model(args.preset, os.path.join(work, "model"))

        def run(name, checkout, round_):
            out = os.path.join(work, f"{name}-{round_}", "1")
            exported = run_in_checkout(EXPORT, checkout, os.path.join(work, "model"), out)
            return {**exported, **run_in_checkout(SERVE, checkout, out)}

        figures = alternating_rounds(args.repeats, baseline, run)
    rows = [baseline_row(figures, key, args.baseline, preset=args.preset) for key in figures["ours"][0]]
    report("export_speed", rows, list(rows[0]))


if __name__ == "__main__":
    main()
