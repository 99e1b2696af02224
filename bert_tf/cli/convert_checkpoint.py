"""Convert BERT weights between the original TF1 checkpoint format, HF safetensors, keras-hub presets and Keras
`.keras` files, and from Model Garden / TF Hub encoders.

The input's format is detected; the output's name says the format written, or --output_format does:
  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=bert_base.keras
  convert_checkpoint --input=path/to/hf_dir --output=out/bert_model.ckpt        # original TF1 names
  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=out/hf_dir/   # HF layout
  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=out/kh --output_format=keras_hub
  convert_checkpoint --input=bert_en_uncased_L-12_H-768_A-12_4 --output=out/hf_dir/    # a TF Hub SavedModel

The work is `bert_tf.checkpoints.convert`.
"""

from absl import flags

from bert_tf import checkpoints
from bert_tf.cli import PATH, USER_ERRORS, fail, start

flags.DEFINE_string("input", None, "Original checkpoint prefix (or its directory), an HF directory with "
                    "config.json + model.safetensors (or its shards), a keras-hub BertBackbone preset directory "
                    "(or a .weights.h5 with its config.json beside it), or a Model Garden BertEncoder checkpoint or "
                    "TF Hub SavedModel directory, or a fine-tuning output directory (model.keras + task.json).")
flags.DEFINE_enum("input_format", "auto", list(checkpoints.INPUT_FORMATS), "Format of --input; auto tells them "
                  "apart by their files.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of an original checkpoint (default: beside it); "
                    "for a Model Garden encoder, the settings its shapes do not show (default: Model Garden's BERT).")
flags.DEFINE_string("output", None, "What to write, named by its format: PREFIX.ckpt (original TF1 names + "
                    "bert_config.json beside it), FILE.keras (a Keras model), or a directory or DIR/model.safetensors "
                    "(HF layout: model.safetensors + config.json).")
flags.DEFINE_enum("output_format", "auto", ["auto", *checkpoints.FORMATS], "Format to write; auto: the one "
                  "--output's name says. keras_hub (a preset directory that keras_hub.models.BertBackbone.from_preset "
                  "loads) must be asked for.")
flags.DEFINE_string("vocab_file", None, "vocab.txt to place beside a .ckpt or HF output (default: the input's "
                    "vocab.txt, when it has one).")
flags.DEFINE_enum("model", "encoder", list(checkpoints.conversion.MODELS), "pretrainer also converts the MLM and "
                  "NSP heads; classifier writes a run_classifier output directory as a keras-hub BertTextClassifier "
                  "preset with its preprocessor (--output_format=keras_hub).")
flags.DEFINE_bool("allow_fewer_layers", False, "With a --bert_config_file of fewer layers than the input (an "
                  "original checkpoint or Model Garden encoder): take its first layers, to initialise a shallower "
                  "model from a deeper one on purpose. Without it such a pair is refused.")
flags.mark_flags_as_required(["input", "output"])


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        fmt, out = checkpoints.convert(f.input, f.output, f.input_format, f.bert_config_file, f.model, f.vocab_file,
                                       f.output_format, allow_fewer_layers=f.allow_fewer_layers)
    except USER_ERRORS + (ValueError,) as e:
        fail(e)
    print(f"convert_checkpoint: wrote {out} ({checkpoints.FORMATS[fmt]})")


def run():
    start(main, "convert_checkpoint", {"output": PATH})


if __name__ == "__main__":
    run()
