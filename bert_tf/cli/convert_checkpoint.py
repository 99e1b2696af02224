"""Convert BERT weights between the original TF1 checkpoint format, HF safetensors and Keras `.keras` files.

  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json --output=bert_base.keras
  convert_checkpoint --input=path/to/hf_dir --output=out/bert_model.ckpt --output_format=original
"""

import os
import shutil

from absl import app, flags

from bert_tf import checkpoints
from bert_tf.cli import USER_ERRORS, fail

flags.DEFINE_string("input", None, "Original checkpoint prefix (or its directory), or an HF directory with "
                            "config.json + model.safetensors.")
flags.DEFINE_enum("input_format", "auto", ["auto", "original", "hf"], "Format of --input; auto looks for "
                  "model.safetensors.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of an original checkpoint (default: beside it).")
flags.DEFINE_string("output", None, "Output path: a checkpoint prefix (original) or a .keras file (keras).")
flags.DEFINE_enum("output_format", "auto", ["auto", "original", "keras"], "auto: keras if --output ends in .keras.")
flags.DEFINE_enum("model", "encoder", ["encoder", "pretrainer"], "pretrainer also converts the MLM and NSP heads.")
flags.mark_flags_as_required(["input", "output"])


def convert(input_path, output, input_format="auto", bert_config_file=None, output_format="auto", model="encoder"):
    """Loads `input_path` and writes it to `output`; returns the output path. Library function behind the CLI."""
    input_path = os.fspath(input_path)
    if input_format == "auto":
        is_hf = os.path.exists(os.path.join(input_path, "model.safetensors")) or input_path.endswith(".safetensors")
        input_format = "hf" if is_hf else "original"
    if input_format == "hf":
        built = checkpoints.load_hf(input_path, model=model)
        source_dir = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
    else:
        source_dir = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
        config = bert_config_file or os.path.join(source_dir, "bert_config.json")
        built = checkpoints.load_original(input_path, config, model=model)
    if output_format == "auto":
        output_format = "keras" if str(output).endswith(".keras") else "original"
    if output_format == "keras":
        if not str(output).endswith(".keras"):
            raise ValueError(f"--output={output}: a Keras model file must end in .keras")
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        tmp = f"{output}.tmp-{os.getpid()}.keras"
        built.save(tmp)
        os.replace(tmp, output)
        return output
    checkpoints.save_original(built, output)
    out_dir = os.path.dirname(os.path.abspath(output))
    built.bert_config.to_json_file(os.path.join(out_dir, "bert_config.json"))
    vocab = os.path.join(source_dir, "vocab.txt")
    if os.path.exists(vocab) and not os.path.exists(os.path.join(out_dir, "vocab.txt")):
        shutil.copyfile(vocab, os.path.join(out_dir, "vocab.txt"))
    return output


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        out = convert(f.input, f.output, f.input_format, f.bert_config_file, f.output_format, f.model)
    except USER_ERRORS + (ValueError,) as e:
        fail("convert_checkpoint", e)
    print(f"convert_checkpoint: wrote {out}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
