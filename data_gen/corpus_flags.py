"""The corpus flags of the command lines that read a pretraining corpus (`create_pretraining_data`,
`build_vocab`): text files, or a prepared TFDS text dataset (`data_gen.tfds_corpus.corpus_from_flags` checks them).
Only absl here: the modules defining these flags are re-imported by the worker processes, which must not load
TensorFlow."""

from absl import flags


def define_corpus_flags() -> None:
    flags.DEFINE_string("input_file", None, "Input text files: comma-separated list of files and globs, one sentence "
                        "per line, a blank line between documents.")
    flags.DEFINE_string("tfds_name", None, "Instead of --input_file: a prepared TFDS text dataset, e.g. "
                        "wikipedia/20230601.en (each example one document, split into sentences).")
    flags.DEFINE_string("tfds_split", None, "With --tfds_name: the split, any TFDS split expression (default: train).")
    flags.DEFINE_string("tfds_text_key", None, "With --tfds_name: the text feature (default: text).")
    flags.DEFINE_string("tfds_data_dir", None, "With --tfds_name: where the dataset is prepared (default: TFDS's).")
    flags.DEFINE_bool("tfds_keep_line_breaks", None, "With --tfds_name: the text's own lines as sentences, instead of "
                      "splitting it into sentences (data_gen.sentences).")
