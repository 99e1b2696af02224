r"""Fine-tune BERT for named-entity recognition on CoNLL-2003-style files (paper section 5.3).

  run_ner --data_dir=conll2003 --vocab_file=cased_L-12_H-768_A-12/vocab.txt --nodo_lower_case \
      --bert_config_file=cased_L-12_H-768_A-12/bert_config.json \
      --init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=runs/ner

--data_dir holds train.txt, valid.txt and test.txt (`word ... tag` per line, blank line between sentences,
-DOCSTART- before each document).
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import (DIRECTORY, USER_ERRORS, define_finetuning_flags, fail, options_from_flags, print_best,
                         start, strategy_from_flags)

flags.DEFINE_string("data_dir", None, "Directory with train.txt, valid.txt, test.txt; with --tfds_name: TFDS "
                    "data_dir.")
flags.DEFINE_string("tfds_name", None, "Read a prepared TFDS dataset instead, e.g. conll2003.")
flags.DEFINE_bool("label_all_subtokens", False, "Train every word piece on its word's tag (default: first piece).")
flags.DEFINE_string("feature_based", None, "Train the paper's feature-based probe instead of fine-tuning (Table 7): "
                    "BERT frozen, this combination of its layers (e.g. concat_last_four, weighted_sum_all; a wrong "
                    "name lists them all), a two-layer BiLSTM, a classifier.")
flags.DEFINE_integer("lstm_units", 768, "With --feature_based: each BiLSTM layer's width per direction.")
flags.DEFINE_integer("doc_stride", None, "Step between the windows of a sentence (or document) longer than "
                     "max_seq_length - 2 word pieces (default: half a window; without --do_train: the model's).")
flags.DEFINE_bool("document_context", None, "Encode each sentence with the words around it in its document, as the "
                  "paper (documents start at -DOCSTART- lines). Default: where the files mark documents (without "
                  "--do_train: as the model was trained); true: refuse files that mark none; false: sentences alone.")
define_finetuning_flags(dev="valid.txt")
flags.adopt_module_key_flags(cli)  # list the shared flags in --helpshort too

def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.config import BertConfig
    from bert_tf.tasks.tagging import NerOptions, run_ner
    from bert_tf.tasks import DataError

    try:
        strategy = strategy_from_flags(f)
        options = options_from_flags(f, NerOptions)
        results = run_ner(BertConfig.from_json_file(f.bert_config_file), f.vocab_file, f.output_dir, options,
                          f.data_dir, strategy, tfds_name=f.tfds_name)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail(e)
    for key in ("dev", "test"):
        if key in results:
            print(f"run_ner: {key}: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(results[key].items())))
    print_best(results)


def run():
    start(main, "run_ner", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
