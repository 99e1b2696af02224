"""Serving: the exported classifier, raw text in, against the same Keras model fed pre-tokenized ids.

  python -m bench.serving [--preset base] [--seq 128] [--repeats 5]

A sentence-pair classifier of `--preset` size (random weights: speed does not depend on them) with the real
uncased vocabulary is saved as `run_classifier` saves it and exported with `export_saved_model --kind=classifier`.
Timed, interleaved (`paired_times`): the loaded SavedModel's `serving_default` on raw strings (tokenize, pack,
model, softmax, label names), and the Keras model in a `tf.function` on ids packed beforehand to the same width.
Batch 32 of pairs that fill `--seq` (throughput) and batch 1 (latency), plus a batch 1 of short pairs, where the
export runs at the request's length and a fixed-width model does not. Each time is the median of its rounds, and
the overhead the export's median over the Keras model's, minus one. Goal: raw-text overhead < 5 % at batch 32.
"""

import argparse
import os
import tempfile

import numpy as np

from bench.common import docstring_lines, median, paired_times, report, uncased_vocab


def pairs(count, words, seed=0):
    rng = np.random.default_rng(seed)
    text = " ".join(docstring_lines()).split()
    starts = rng.integers(0, len(text) - 2 * words, size=2 * count)
    made = [" ".join(text[s:s + words]) for s in starts]
    return made[:count], made[count:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from bert_tf import BertConfig

    import tensorflow as tf
    from bert_tf.finetuning import Cell, FinetuneOptions, GridResult, load_finetuned, save
    from bert_tf.tasks.classification import encode
    from bert_tf.models import BertClassifier, BertEncoder
    from bert_tf.tasks import Example, get_task
    from export.exporting import export

    vocab = uncased_vocab()
    config = BertConfig.preset(args.preset, vocab_size=30522)
    work = tempfile.mkdtemp(prefix="bench_serving_")
    untrained = GridResult(BertClassifier(BertEncoder(config), num_classes=2), Cell(32, 2e-5, 0, 0), 0, [])
    save(untrained, get_task("mrpc"), config, vocab, work, FinetuneOptions(max_seq_length=args.seq), pairs=True)
    export("classifier", os.path.join(work, "export"), model_dir=work)
    serving = tf.saved_model.load(os.path.join(work, "export")).signatures["serving_default"]
    model = load_finetuned(work)
    keras_call = tf.function(lambda inputs: model(inputs)["logits"])

    cases = {"batch 32, full": pairs(32, args.seq // 2), "batch 1, full": pairs(1, args.seq // 2, 1),
             "batch 1, short": pairs(1, 6, 2)}
    rows = []
    for case, (a, b) in cases.items():
        ids = encode([Example(str(i), x, y) for i, (x, y) in enumerate(zip(a, b))], vocab, True, args.seq)
        text_a, text_b = tf.constant(a), tf.constant(b)
        ids = {k: tf.constant(v) for k, v in ids.items()}
        raw_time, ids_time = paired_times([lambda: serving(text_a=text_a, text_b=text_b)["probabilities"].numpy(),
                                           lambda: keras_call(ids).numpy()], repeats=args.repeats)
        overhead = median(raw_time) / median(ids_time) - 1  # from the two times shown, as in bench.model_speed
        batch = len(a)
        rows.append({"case": case, "preset": args.preset, "seq": args.seq,
                     "export_raw_text_ms": f"{1e3 * median(raw_time):.1f}",
                     "keras_on_ids_ms": f"{1e3 * median(ids_time):.1f}",
                     "export_per_s": f"{batch / median(raw_time):.1f}", "overhead": f"{100 * overhead:+.1f}%"})
    report("serving", rows, ["case", "preset", "seq", "export_raw_text_ms", "keras_on_ids_ms", "export_per_s",
                             "overhead"])


if __name__ == "__main__":
    main()
