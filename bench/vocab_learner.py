"""WordPiece vocabulary learning: `data_gen.wordpiece_learner` against tensorflow-text's learner, same vocabulary.

  python -m bench.vocab_learner [--megabytes 2] [--vocab_size 8000] [--repeats 3]

Both learn from the word counts of the quickstart's built-in corpus (the standard library's docstrings, the first
`--megabytes` of them, counted by `data_gen.vocab.count_words` once), with `build_vocab`'s reserved tokens and
defaults, in interleaved rounds in this process. The counting of words is left out: it is the same for both.
"""

import argparse
import os
import tempfile

import bert_tf  # noqa: F401

from bench.common import median, paired_times, report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=2.0, help="of the built-in corpus (it holds about 1.5)")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.megabytes <= 0 or args.repeats < 1:
        parser.error("--megabytes must be above 0 and --repeats at least 1")

    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as tf_text_learner

    from bert_tf_quickstart.corpus import stdlib_documents
    from data_gen import wordpiece_learner
    from data_gen.documents import as_corpus
    from data_gen.vocab import count_words, reserved_tokens

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.txt")
        with open(path, "w", encoding="utf-8") as f:
            for document in stdlib_documents(int(args.megabytes * 1e6)):
                f.write("\n".join(document) + "\n\n")
        megabytes = os.path.getsize(path) / 1e6
        corpus = as_corpus(path)
        counts = list(count_words(corpus, corpus.parts()).items())
    reserved = reserved_tokens()
    if args.vocab_size <= len(reserved):
        parser.error(f"--vocab_size={args.vocab_size} leaves no room beside {len(reserved)} reserved tokens")
    vocabs = {}

    def ours():
        vocabs["ours"] = wordpiece_learner.learn(counts, args.vocab_size, reserved, 2)

    def theirs():
        vocabs["theirs"] = tf_text_learner.learn(counts, args.vocab_size, reserved, lower_thresh=2)

    times = paired_times([ours, theirs], repeats=args.repeats)
    identical = vocabs["ours"] == vocabs["theirs"]
    rows = [{"impl": impl, "seconds": f"{median(t):.2f}", "ratio_vs_tf_text": f"{median(times[1]) / median(t):.2f}",
             "identical_vocab": identical, "tokens": len(vocabs["ours"]), "distinct_words": len(counts),
             "megabytes": f"{megabytes:.2f}"}
            for impl, t in (("data_gen.wordpiece_learner", times[0]), ("tensorflow-text learner", times[1]))]
    print(f"median of {args.repeats} interleaved rounds after a warm-up; ratio = tensorflow-text's median time / "
          "this row's")
    report("vocab_learner", rows, ["impl", "seconds", "ratio_vs_tf_text", "identical_vocab", "tokens",
                                   "distinct_words", "megabytes"])
    if not identical:
        raise SystemExit("the vocabularies differ")


if __name__ == "__main__":
    main()
