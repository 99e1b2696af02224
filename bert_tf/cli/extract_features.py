r"""Contextual token features from chosen layers of a pretrained BERT (the original extract_features.py's flags).

  extract_features --input_file=input.txt --output_file=features.jsonl --vocab_file=vocab.txt \
      --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 \
      --max_seq_length=128 --batch_size=8

Input: one text per line, or `text_a ||| text_b`. Output: one JSON object per line with every token's values at
each requested layer. In Python, `bert_tf.feature_extraction.FeatureCombination` gives the paper's
feature-based combinations.
"""

from absl import flags

from bert_tf.cli import FILE, USER_ERRORS, fail, start

flags.DEFINE_string("input_file", None, "Text, one example per line (`a ||| b` for pairs).")
flags.DEFINE_string("output_file", None, "JSONL output.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Layers to output, negative counting from the last (-1); one below the "
                    "first Transformer layer is the embedding output.")
flags.DEFINE_enum("layer_numbering", None, ["original", "paper"], "What a non-negative --layers number means: "
                  "original: 0 = the first Transformer layer (google-research/bert); paper: 0 = the embedding output, "
                  "1..L the layers (Table 7, HF hidden_states). Needed only for non-negative numbers.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (or an HF config.json).")
flags.DEFINE_string("vocab_file", None, "The model's vocabulary.")
flags.DEFINE_string("init_checkpoint", None, "Weights: original TF1 checkpoint, HF directory or ours.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length; longer inputs are truncated.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.mark_flags_as_required(["input_file", "output_file", "bert_config_file", "vocab_file", "init_checkpoint"])


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.checkpoints import restore_weights
    from bert_tf.config import BertConfig, check_fits
    from bert_tf.models import BertEncoder
    from bert_tf.tasks import DataError
    from bert_tf.feature_extraction import extract, hidden_state_index, read_lines
    from bert_tf.tokenization import FullTokenizer, VocabError

    try:
        try:
            layers = [int(x) for x in f.layers.split(",")]
        except ValueError:
            raise ValueError(f"--layers={f.layers}: not a comma-separated list of layer numbers (e.g. "
                             "-1,-2,-3,-4)") from None
        if f.batch_size < 1:
            raise ValueError(f"--batch_size={f.batch_size} must be at least 1")
        if f.layer_numbering is not None and all(layer < 0 for layer in layers):
            raise ValueError(f"--layer_numbering={f.layer_numbering} says what a non-negative --layers number means, "
                             f"and --layers={f.layers} has none; drop the flag")
        pairs = read_lines(f.input_file)
        tokenizer = FullTokenizer(f.vocab_file, do_lower_case=f.do_lower_case)
        config = BertConfig.from_json_file(f.bert_config_file)
        check_fits(config, f.vocab_file, f.max_seq_length, do_lower_case=f.do_lower_case)
        for layer in layers:  # before any weights load
            hidden_state_index(layer, config.num_hidden_layers, f.layer_numbering)
        encoder = BertEncoder(config)
        restore_weights(encoder, f.init_checkpoint)
        count = extract(encoder, tokenizer, pairs, f.output_file, layers, f.max_seq_length, f.batch_size,
                        layer_numbering=f.layer_numbering)
    except USER_ERRORS + (DataError, VocabError, ValueError) as e:
        fail(e)
    print(f"extract_features: wrote {count} line(s) to {f.output_file}")


def run():
    start(main, "extract_features", {"output_file": FILE})


if __name__ == "__main__":
    run()
