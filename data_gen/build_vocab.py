"""Build a BERT `vocab.txt` from text files or a prepared TFDS text dataset.

  python -m data_gen.build_vocab --input_file=corpus/*.txt --output_file=vocab.txt --vocab_size=30522
  python -m data_gen.build_vocab --tfds_name=wikipedia/20230601.en --output_file=vocab.txt
"""

from absl import flags, logging

from bert_tf.cli import FILE, fail, start
from bert_tf.tokenization import VocabError
from data_gen import corpus_flags
from data_gen.documents import CorpusError
from data_gen.tfds_corpus import corpus_from_flags
from data_gen.vocab import build_vocab

corpus_flags.define_corpus_flags()
flags.adopt_module_key_flags(corpus_flags)  # listed by --help as this command's own
flags.DEFINE_string("output_file", None, "Where to write vocab.txt.")
flags.DEFINE_integer("vocab_size", 30522, "Target vocabulary size, reserved tokens included (a maximum).")
flags.DEFINE_bool("do_lower_case", True, "Uncased (lowercase, strip accents) or cased vocabulary.")
flags.DEFINE_integer("num_unused", 99, "Number of [unusedN] slots after [PAD], as in the released vocabularies.")
flags.DEFINE_integer("min_count", 2, "Lower bound on the frequency threshold the learner searches.")
flags.mark_flags_as_required(["output_file"])


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        corpus = corpus_from_flags(f.input_file, f.tfds_name, f.tfds_split, f.tfds_text_key, f.tfds_data_dir,
                                   f.tfds_keep_line_breaks)
        summary = build_vocab(corpus, f.output_file, f.vocab_size, f.do_lower_case, f.num_unused, f.min_count)
    except (CorpusError, VocabError, ValueError) as e:
        fail(e)
    logging.info("counted %d words (%d distinct) in %d file(s)", summary["words"], summary["distinct_words"],
                 summary["files"])
    print(f"build_vocab: wrote {summary['vocab_size']} tokens to {f.output_file}")


def run():
    start(main, "build_vocab", {"output_file": FILE})


if __name__ == "__main__":
    run()
