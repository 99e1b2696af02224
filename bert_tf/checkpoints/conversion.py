"""Conversion between the formats: original TF1 checkpoints, HF directories and Keras `.keras` files, the output's
format named by its path (`output_format`)."""

from __future__ import annotations

import os
import re

from bert_tf import staging
from bert_tf.checkpoints.hf import is_hf_directory, load_hf, save_hf
from bert_tf.checkpoints.original import load_original, save_original

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
    """Loads `input_path` (an original checkpoint, or an HF directory: `input_format` "auto" tells them apart by
    model.safetensors or its shards' index) and writes it in the format `output` names (`output_format`); returns
    (format, path written). The library function behind convert_checkpoint."""
    fmt, target = output_format(output)
    if vocab_file is not None and not os.path.isfile(vocab_file):
        raise ValueError(f"--vocab_file={vocab_file}: no such file")
    if vocab_file is not None and fmt == "keras":
        raise ValueError(f"--vocab_file={vocab_file}: a .keras file holds no vocabulary; write a .ckpt or an HF "
                         "directory to keep one beside the weights")
    input_path = os.fspath(input_path)
    if input_format == "auto":
        is_hf = is_hf_directory(input_path) or input_path.endswith(".safetensors")
        input_format = "hf" if is_hf else "original"
    source_dir = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
    if input_format == "hf":
        if bert_config_file:
            raise ValueError(f"--bert_config_file={bert_config_file}: an HF input is read with its own config.json; "
                             "drop the flag (it is for original checkpoints)")
        built = load_hf(input_path, model=model)
    else:
        config = bert_config_file or os.path.join(source_dir, "bert_config.json")
        built = load_original(input_path, config, model=model)
    if vocab_file is None and os.path.isfile(os.path.join(source_dir, "vocab.txt")):
        vocab_file = os.path.join(source_dir, "vocab.txt")

    if fmt == "keras":
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        with staging.staged_file(target, suffix=".keras") as tmp:  # Keras saves only to a name ending in .keras
            built.save(tmp)
    elif fmt == "hf":
        save_hf(built, target, vocab_file)
    else:
        save_original(built, target)
        out_dir = os.path.dirname(os.path.abspath(target))
        built.bert_config.to_json_file(os.path.join(out_dir, "bert_config.json"))
        if vocab_file and os.path.abspath(vocab_file) != os.path.join(out_dir, "vocab.txt"):
            staging.copy_file(vocab_file, os.path.join(out_dir, "vocab.txt"))
    return fmt, target
