r"""Create masked-LM + next-sentence pretraining TFRecords from text (the original generator's flags).

  python -m data_gen.create_pretraining_data --input_file=corpus/*.txt --output_file=out/ --num_output_shards=8 \
      --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20

Input: one sentence per line, a blank line between documents; or a prepared TFDS text dataset (`--tfds_name`,
docs/data.md). Output: the original record schema, and
`metadata.json` beside the shards with the flags, the vocab's hash and statistics of what was written. A rerun into
the same directory replaces the earlier run's shards once its own are complete.
"""

import signal

from absl import flags

from data_gen import corpus_flags

# TensorFlow is imported in main(), not here: --num_workers processes re-import this module as their main, and
# they must start without TensorFlow, whose import costs each process seconds of CPU and hundreds of MB.

corpus_flags.define_corpus_flags()
flags.adopt_module_key_flags(corpus_flags)  # listed by --help as this command's own
flags.DEFINE_string("output_file", None, "Output TFRecord files (comma-separated), or a directory for "
                    "--num_output_shards shards.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file the model will be trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask all word pieces of a word together.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked-LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed: same input, seed and flags give the same bytes.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked-LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of making a sequence shorter than the maximum length.")
flags.DEFINE_bool("random_next_sentence", True, "Make half the pairs' B a random sentence (next-sentence "
                  "prediction); false: B always follows A, for pretraining with --objective=mlm (No NSP).")
flags.DEFINE_integer("num_output_shards", None, "With a directory --output_file: number of shards.")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: one per CPU this process may use, by its "
                     "affinity and its cgroups' CPU quota, at most 2 x --dupe_factor; 1 runs all in this process); "
                     "the output does not depend on it.", lower_bound=1)
flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecords.")
flags.DEFINE_bool("global_shuffle", False, "Shuffle the records across all windows and shards, as the original "
                  "shuffles all of its instances (a second pass over the output; memory stays bounded).")
flags.DEFINE_integer("window_size", 1000, "Documents per window: the unit of shuffling, random-next sampling and "
                     "parallel work (memory grows with it, not with the corpus).")
flags.mark_flags_as_required(["output_file", "vocab_file"])


def main(argv):
    del argv
    from bert_tf.cli import die_of, fail
    from bert_tf.tokenization import VocabError
    from data_gen.documents import CorpusError
    from data_gen.generate import Options, default_num_workers, generate, output_paths
    from data_gen.stops import Terminated
    from data_gen.tfds_corpus import corpus_from_flags

    f = flags.FLAGS
    options = Options(max_seq_length=f.max_seq_length, max_predictions_per_seq=f.max_predictions_per_seq,
                      masked_lm_prob=f.masked_lm_prob, short_seq_prob=f.short_seq_prob, dupe_factor=f.dupe_factor,
                      random_seed=f.random_seed, do_lower_case=f.do_lower_case,
                      do_whole_word_mask=f.do_whole_word_mask, window_size=f.window_size,
                      random_next_sentence=f.random_next_sentence)
    try:
        corpus = corpus_from_flags(f.input_file, f.tfds_name, f.tfds_split, f.tfds_text_key, f.tfds_data_dir,
                                   f.tfds_keep_line_breaks)
        meta = generate(corpus, output_paths(f.output_file, f.num_output_shards), f.vocab_file, options,
                        num_workers=default_num_workers(options) if f.num_workers is None else f.num_workers,
                        gzip=f.gzip, global_shuffle=f.global_shuffle)
    except (CorpusError, VocabError, ValueError) as e:
        fail(e)
    except (Terminated, KeyboardInterrupt) as e:  # `generate` has shut its workers down and removed its files
        signum = signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT
        die_of(signum, f"create_pretraining_data: stopped by {signum.name}; no shard written, and the directory's "
                       "earlier record set (if any) kept")
    print(f"create_pretraining_data: {meta['instances']} instances, {meta['tokens']} tokens, masked fraction "
          f"{meta['masked_fraction']:.4f}, random-next fraction {meta['random_next_fraction']:.4f}, "
          f"{len(meta['shards'])} shard(s)")


def run():
    from data_gen.keras_free import import_bert_tf
    from data_gen.workers import prestart

    prestart()  # the workers' fork server loads on a core that TensorFlow's import leaves idle
    import_bert_tf()
    from bert_tf.cli import PATHS, start

    start(main, "create_pretraining_data", {"output_file": PATHS})


if __name__ == "__main__":
    run()
