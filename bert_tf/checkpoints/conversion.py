"""Conversion between the formats: original TF1 checkpoints, HF directories, keras-hub presets and Keras `.keras`
files, and from Model Garden / TF Hub encoders; the input's format detected, the output's named by its path or given
(`output_format`)."""

from __future__ import annotations

import contextlib
import os
import re

import tensorflow as tf

from bert_tf import fileio, staging
from bert_tf.checkpoints.hf import is_hf_directory, load_hf, save_hf
from bert_tf.checkpoints.kerashub import is_keras_hub, load_keras_hub, save_keras_hub
from bert_tf.checkpoints.model_garden import is_model_garden, load_model_garden
from bert_tf.checkpoints.names import CheckpointError, fewer_layers_allowed
from bert_tf.checkpoints.original import load_original, save_original
from bert_tf.config import check_fits

FORMATS = {"original": "original TF1 checkpoint", "keras": "Keras model", "hf": "HF transformers directory",
           "keras_hub": "keras-hub preset"}


def output_format(output, fmt: str = "auto") -> tuple[str, str]:
    """(one of FORMATS, the path to write) for an --output value and --output_format (`auto`: the name says it; a
    name that says none is an error listing the formats; a keras-hub preset, a directory, must be asked for)."""
    output = os.fspath(output)
    if fmt not in ("auto", *FORMATS):
        raise ValueError(f"--output_format={fmt}: expected auto or one of {', '.join(FORMATS)}")
    if fmt == "keras_hub":
        if fileio.exists(output) and not fileio.isdir(output):
            raise ValueError(f"--output={output}: a keras-hub preset is a directory; give a directory name")
        return fmt, output
    if fmt == "original" and not re.search(r"\.ckpt(-\d+)?$", output):
        raise ValueError(f"--output={output}: an original checkpoint is named PREFIX.ckpt")
    if fmt == "keras" and not output.endswith(".keras"):
        raise ValueError(f"--output={output}: Keras saves a model only to a name ending in .keras")
    if fmt == "hf" and (re.search(r"\.ckpt(-\d+)?$", output) or output.endswith(".keras")):
        raise ValueError(f"--output={output}: the name says another format than --output_format=hf; give a directory "
                         "or DIR/model.safetensors")
    if re.search(r"\.ckpt(-\d+)?$", output):
        return "original", output
    if output.endswith(".keras"):
        return "keras", output
    if output.endswith(".safetensors"):
        if os.path.basename(output) != "model.safetensors":
            raise ValueError(f"--output={output}: HF transformers loads weights only from a file named "
                             "model.safetensors; pass DIR/model.safetensors or the directory DIR")
        return "hf", fileio.dirname(fileio.absolute(output))
    if output.endswith(("/", os.sep)) or fileio.isdir(output):
        return "hf", output
    if not fileio.exists(output) and not os.path.splitext(os.path.basename(output))[1]:
        return "hf", output  # a new name without an extension: the HF directory to create
    raise ValueError(f"--output={output}: the name does not say what to write; end it in .ckpt (original TF1 "
                     "checkpoint), .keras (Keras model) or / or model.safetensors (HF directory), or give "
                     f"--output_format (one of {', '.join(FORMATS)})")


INPUT_FORMATS = ("auto", "original", "hf", "keras_hub", "model_garden", "finetuned")
MODELS = ("encoder", "pretrainer", "classifier")


def is_finetuned(path: str) -> bool:
    """Whether `path` is a fine-tuning output directory (model.keras + task.json)."""
    from bert_tf.finetuning import MODEL_FILE
    from bert_tf.tasks import task_info

    return all(fileio.isfile(os.path.join(path, name)) for name in (MODEL_FILE, task_info.FILE))


def _load_finetuned(path: str, model: str):
    """(the fine-tuned model or its encoder, its TaskInfo) of a fine-tuning output directory."""
    from bert_tf.finetuning import load_finetuned
    from bert_tf.models import BertClassifier
    from bert_tf.tasks import task_info

    info = task_info.read(path)
    if info is None or not is_finetuned(path):
        raise CheckpointError(f"--input={path}: not a fine-tuning output directory (model.keras + task.json)")
    if model == "pretrainer":
        raise CheckpointError(f"--model=pretrainer: {path} holds a fine-tuned {info.kind} model, which has no "
                              "pretraining heads; convert its encoder (--model=encoder)")
    built = load_finetuned(path)
    if model == "classifier" and not isinstance(built, BertClassifier):
        raise CheckpointError(f"--model=classifier: {path} holds a {info.kind} model ({info.task}); keras-hub has a "
                              "BERT task preset for classifiers only; convert its encoder (--model=encoder)")
    return (built if model == "classifier" else built.encoder), info


def convert(input_path, output, input_format="auto", bert_config_file=None, model="encoder", vocab_file=None,
            output_format_name="auto", allow_fewer_layers=False):
    """Loads `input_path` (an original checkpoint, an HF directory, a keras-hub preset or .weights.h5, or a Model
    Garden encoder checkpoint or TF Hub SavedModel, or a fine-tuning output directory; `input_format` "auto" tells
    them apart by their files) and writes it in the format `output` names or `output_format_name` gives
    (`output_format`); returns (format, path written). `model`: the encoder, the pretrainer (with the MLM and NSP
    heads) or a fine-tuned classifier (as a keras-hub BertTextClassifier). `allow_fewer_layers`: a
    `bert_config_file` of fewer layers than the input takes its first ones (`names.fewer_layers_allowed`), where
    otherwise the mismatch is refused. The library function behind convert_checkpoint."""
    fmt, target = output_format(output, output_format_name)
    if model not in MODELS:
        raise ValueError(f"--model={model}: expected one of {', '.join(MODELS)}")
    if fmt == "keras_hub" and model == "pretrainer":
        raise CheckpointError(f"--model={model}: a keras-hub preset written here holds the encoder (BertBackbone) "
                              "or a fine-tuned classifier (BertTextClassifier); convert with --model=encoder")
    if model == "classifier" and fmt != "keras_hub":
        raise CheckpointError("--model=classifier: a fine-tuned classifier is written as a keras-hub "
                              "BertTextClassifier preset (--output_format=keras_hub); export_saved_model serves it")
    if vocab_file is not None and not fileio.isfile(vocab_file):
        raise ValueError(f"--vocab_file={vocab_file}: no such file")
    if vocab_file is not None and model == "classifier":
        raise ValueError(f"--vocab_file={vocab_file}: the classifier's preset takes the vocab.txt of its model "
                         "directory, which it was trained with; drop the flag")
    if vocab_file is not None and fmt in ("keras", "keras_hub"):
        what = {"keras": "a .keras file", "keras_hub": "a keras-hub preset written here"}[fmt]
        raise ValueError(f"--vocab_file={vocab_file}: {what} holds no vocabulary; write a .ckpt or an HF directory "
                         "to keep one beside the weights")
    input_path = os.fspath(input_path)
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"--input_format={input_format}: expected one of {', '.join(INPUT_FORMATS)}")
    if input_format == "auto":
        if is_keras_hub(input_path):
            input_format = "keras_hub"
        elif fileio.isdir(input_path) and is_finetuned(input_path):
            input_format = "finetuned"
        elif is_model_garden(input_path):
            input_format = "model_garden"
        elif is_hf_directory(input_path) or input_path.endswith(".safetensors"):
            input_format = "hf"
        elif (re.search(r"\.ckpt(-\d+)?(\.index|\.data-.*)?$", input_path) or fileio.isfile(input_path + ".index")
              or (fileio.isdir(input_path) and tf.io.gfile.glob(os.path.join(input_path, "*.index")))):
            input_format = "original"  # its reader says what is missing
        else:
            raise CheckpointError(f"--input={input_path}: not a format convert_checkpoint reads: an original TF1 "
                                  "checkpoint (PREFIX.ckpt, with PREFIX.ckpt.index), an HF directory (config.json + "
                                  "model.safetensors or its shards), a keras-hub preset or .weights.h5, a Model "
                                  "Garden checkpoint or TF Hub SavedModel, or a fine-tuning output directory "
                                  "(model.keras + task.json)")
    source_dir = input_path if fileio.isdir(input_path) else fileio.dirname(input_path)
    if model == "classifier" and input_format != "finetuned":
        raise CheckpointError(f"--model=classifier: --input={input_path} is not a fine-tuning output directory "
                              "(model.keras + task.json, written by run_classifier)")
    if input_format in ("hf", "keras_hub", "finetuned") and bert_config_file:
        what = {"hf": "an HF input", "keras_hub": "a keras-hub preset",
                "finetuned": "a fine-tuned model"}[input_format]
        raise ValueError(f"--bert_config_file={bert_config_file}: {what} is read with its own config; drop the flag "
                         "(it is for original checkpoints and Model Garden encoders)")
    if input_format in ("keras_hub", "model_garden") and model != "encoder":
        what = {"keras_hub": "a keras-hub BertBackbone", "model_garden": "a Model Garden encoder"}[input_format]
        raise CheckpointError(f"--model={model}: {what} has no pretraining heads; convert it with --model=encoder")
    if allow_fewer_layers and not (input_format in ("original", "model_garden") and bert_config_file):
        raise ValueError("--allow_fewer_layers takes the first layers of an original checkpoint or a Model Garden "
                         "encoder into a --bert_config_file of fewer layers; give one (other inputs are read with "
                         "their own config)")
    info = None
    with fewer_layers_allowed() if allow_fewer_layers else contextlib.nullcontext():
        if input_format == "finetuned":
            built, info = _load_finetuned(input_path, model)
        elif input_format == "keras_hub":
            built = load_keras_hub(input_path)
        elif input_format == "model_garden":
            built = load_model_garden(input_path, bert_config_file)
        elif input_format == "hf":
            built = load_hf(input_path, model=model)
        else:
            config = bert_config_file or os.path.join(source_dir, "bert_config.json")
            built = load_original(input_path, config, model=model)
    for vocab in (os.path.join(source_dir, "vocab.txt"), os.path.join(source_dir, "assets", "vocab.txt")):
        if vocab_file is None and fileio.isfile(vocab):  # a TF Hub SavedModel keeps its vocabulary as an asset
            vocab_file = vocab
    if fmt in ("hf", "original") and vocab_file is None:
        beside = os.path.join(target if fmt == "hf" else fileio.dirname(fileio.absolute(target)), "vocab.txt")
        if fileio.exists(beside):
            raise ValueError(f"--output={output}: {beside} is there already, from an earlier model, and the input "
                             "has no vocabulary to replace it; give --vocab_file (this model's), or write to "
                             "another directory")

    if vocab_file is not None:  # ids past the embedding table would fail in whatever reads the output
        check_fits(getattr(built, "encoder", built).bert_config, vocab_file, source=f"--input={input_path}")
    if fmt == "keras":
        fileio.makedirs(fileio.dirname(fileio.absolute(target)))
        with staging.staged_file(target, suffix=".keras") as tmp:  # Keras saves only to a name ending in .keras
            built.save(tmp)
    elif fmt == "hf":
        save_hf(built, target, vocab_file, info.do_lower_case if info else None)
    elif fmt == "keras_hub" and model == "classifier":
        save_keras_hub(built, target, vocab_file, info.do_lower_case, info.max_seq_length)
    elif fmt == "keras_hub":
        save_keras_hub(built, target)
    else:
        save_original(built, target)
        out_dir = fileio.dirname(fileio.absolute(target))
        built.bert_config.to_json_file(os.path.join(out_dir, "bert_config.json"))
        if vocab_file and fileio.absolute(vocab_file) != os.path.join(out_dir, "vocab.txt"):
            staging.copy_file(vocab_file, os.path.join(out_dir, "vocab.txt"))
    return fmt, target
