"""Convert BERT weights between the original TF1 checkpoint format, HF safetensors and Keras `.keras` files.

The output's name says the format written:
  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=bert_base.keras
  convert_checkpoint --input=path/to/hf_dir --output=out/bert_model.ckpt        # original TF1 names
  convert_checkpoint --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=out/hf_dir/   # HF layout
"""

import os
import re
import shutil

from absl import flags

from bert_tf import checkpoints
from bert_tf.cli import PATH, USER_ERRORS, fail, start

flags.DEFINE_string("input", None, "Original checkpoint prefix (or its directory), or an HF directory with "
                            "config.json + model.safetensors.")
flags.DEFINE_enum("input_format", "auto", ["auto", "original", "hf"], "Format of --input; auto looks for "
                  "model.safetensors.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of an original checkpoint (default: beside it).")
flags.DEFINE_string("output", None, "What to write, named by its format: PREFIX.ckpt (original TF1 names + "
                    "bert_config.json beside it), FILE.keras (a Keras model), or a directory or DIR/model.safetensors "
                    "(HF layout: model.safetensors + config.json).")
flags.DEFINE_string("vocab_file", None, "vocab.txt to place beside a .ckpt or HF output (default: the input's "
                    "vocab.txt, when it has one).")
flags.DEFINE_enum("model", "encoder", ["encoder", "pretrainer"], "pretrainer also converts the MLM and NSP heads.")
flags.mark_flags_as_required(["input", "output"])

FORMATS = {"original": "original TF1 checkpoint", "keras": "Keras model", "hf": "HF transformers directory"}


def output_format(output) -> tuple[str, str]:
    """('original' | 'keras' | 'hf', the path to write) for an --output value; a name that says none is an error."""
    output = os.fspath(output)
    if re.search(r"\.ckpt(-\d+)?$", output):
        return "original", output
    if output.endswith(".keras"):
        return "keras", output
    if output.endswith(".safetensors"):
        if os.path.basename(output) != "model.safetensors":
            raise ValueError(f"--output={output}: HF transformers loads weights only from a file named "
                             "model.safetensors; pass DIR/model.safetensors or the directory DIR")
        return "hf", os.path.dirname(os.path.abspath(output))
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        return "hf", output
    if not os.path.exists(output) and not os.path.splitext(os.path.basename(output))[1]:
        return "hf", output  # a new name without an extension: the HF directory to create
    raise ValueError(f"--output={output}: the name does not say what to write; end it in .ckpt (original TF1 "
                     "checkpoint), .keras (Keras model) or / or model.safetensors (HF directory)")


def convert(input_path, output, input_format="auto", bert_config_file=None, model="encoder", vocab_file=None):
    """Loads `input_path` and writes it in the format `output` names; returns (format, path written). Library
    function behind the CLI."""
    fmt, target = output_format(output)
    if vocab_file is not None and not os.path.isfile(vocab_file):
        raise ValueError(f"--vocab_file={vocab_file}: no such file")
    if vocab_file is not None and fmt == "keras":
        raise ValueError(f"--vocab_file={vocab_file}: a .keras file holds no vocabulary; write a .ckpt or an HF "
                         "directory to keep one beside the weights")
    input_path = os.fspath(input_path)
    if input_format == "auto":
        is_hf = os.path.exists(os.path.join(input_path, "model.safetensors")) or input_path.endswith(".safetensors")
        input_format = "hf" if is_hf else "original"
    source_dir = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
    if input_format == "hf":
        if bert_config_file:
            raise ValueError(f"--bert_config_file={bert_config_file}: an HF input is read with its own config.json; "
                             "drop the flag (it is for original checkpoints)")
        built = checkpoints.load_hf(input_path, model=model)
    else:
        config = bert_config_file or os.path.join(source_dir, "bert_config.json")
        built = checkpoints.load_original(input_path, config, model=model)
    if vocab_file is None and os.path.isfile(os.path.join(source_dir, "vocab.txt")):
        vocab_file = os.path.join(source_dir, "vocab.txt")

    if fmt == "keras":
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        tmp = f"{target}.tmp-{os.getpid()}.keras"
        built.save(tmp)
        os.replace(tmp, target)
    elif fmt == "hf":
        checkpoints.save_hf(built, target, vocab_file)
    else:
        checkpoints.save_original(built, target)
        out_dir = os.path.dirname(os.path.abspath(target))
        built.bert_config.to_json_file(os.path.join(out_dir, "bert_config.json"))
        if vocab_file and os.path.abspath(vocab_file) != os.path.join(out_dir, "vocab.txt"):
            tmp = os.path.join(out_dir, f"vocab.txt.tmp-{os.getpid()}")
            shutil.copyfile(vocab_file, tmp)
            os.replace(tmp, os.path.join(out_dir, "vocab.txt"))
    return fmt, target


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        fmt, out = convert(f.input, f.output, f.input_format, f.bert_config_file, f.model, f.vocab_file)
    except USER_ERRORS + (ValueError,) as e:
        fail(e)
    print(f"convert_checkpoint: wrote {out} ({FORMATS[fmt]})")


def run():
    start(main, "convert_checkpoint", {"output": PATH})


if __name__ == "__main__":
    run()
