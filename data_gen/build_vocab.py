"""Build a BERT `vocab.txt` from text files.

  python -m data_gen.build_vocab --input_file=corpus/*.txt --output_file=vocab.txt --vocab_size=30522
"""

from absl import flags, logging

from bert_tf.cli import FILE, fail, start
from bert_tf.tokenization import VocabError
from data_gen.documents import CorpusError
from data_gen.vocab import build_vocab

flags.DEFINE_string("input_file", None, "Corpus: comma-separated files or globs, plain UTF-8 text.")
flags.DEFINE_string("output_file", None, "Where to write vocab.txt.")
flags.DEFINE_integer("vocab_size", 30522, "Target vocabulary size, reserved tokens included (a maximum).")
flags.DEFINE_bool("do_lower_case", True, "Uncased (lowercase, strip accents) or cased vocabulary.")
flags.DEFINE_integer("num_unused", 99, "Number of [unusedN] slots after [PAD], as in the released vocabularies.")
flags.DEFINE_integer("min_count", 2, "Lower bound on the frequency threshold the learner searches.")
flags.mark_flags_as_required(["input_file", "output_file"])


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        summary = build_vocab(f.input_file, f.output_file, f.vocab_size, f.do_lower_case, f.num_unused, f.min_count)
    except (CorpusError, VocabError, ValueError) as e:
        fail(e)
    logging.info("counted %d words (%d distinct) in %d file(s)", summary["words"], summary["distinct_words"],
                 summary["files"])
    print(f"build_vocab: wrote {summary['vocab_size']} tokens to {f.output_file}")


def run():
    start(main, "build_vocab", {"output_file": FILE})


if __name__ == "__main__":
    run()
