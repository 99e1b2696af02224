"""The HF transformers format: a directory with `model.safetensors` (or shards and their index, read) and
`config.json`, read and written."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from bert_tf import fileio, staging
from bert_tf.checkpoints.names import CheckpointError, assign, build_model, check_fits, hf_name, variable_map
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.tokenization import lower_case_for


INDEX = "model.safetensors.index.json"  # a sharded checkpoint: {"weight_map": {tensor: shard file}}


def is_hf_directory(path: str) -> bool:
    """Whether `path` is a directory of HF weights: `model.safetensors`, or shards listed by `INDEX`."""
    return fileio.isdir(path) and any(fileio.exists(os.path.join(path, name)) for name in ("model.safetensors", INDEX))


def _hf_files(path: str) -> tuple[list[str], str]:
    """(the safetensors files holding the weights, config.json) of an HF directory or of one of its files."""
    path = os.fspath(path)
    directory = path if fileio.isdir(path) else fileio.dirname(path)
    config = os.path.join(directory, "config.json")
    single, index = os.path.join(directory, "model.safetensors"), os.path.join(directory, INDEX)
    if path.endswith(".safetensors") or fileio.exists(single) or not fileio.exists(index):
        weights = [path if path.endswith(".safetensors") else single]
    else:
        try:
            with fileio.open(index) as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index}: not a safetensors index with a 'weight_map' ({e})") from None
        weights = [os.path.join(directory, shard) for shard in shards]
        missing = [shard for shard, file in zip(shards, weights) if not fileio.exists(file)]
        if missing:
            raise CheckpointError(f"{index} lists {len(shards)} shards; not found beside it: {', '.join(missing)}")
    for needed, what in ((weights[0], "model.safetensors"), (config, "config.json")):
        if not fileio.exists(needed):
            raise CheckpointError(f"{path}: {what} not found; pass a directory with config.json and "
                                  f"model.safetensors or a sharded {INDEX} (HF format)")
    return weights, config


def read_hf(path: str) -> dict[str, np.ndarray]:
    """The tensors of an HF checkpoint (one `model.safetensors`, or every shard its index lists), with the `bert.`
    prefix of HF task models removed."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    weights, _ = _hf_files(path)
    tensors = {}
    for file in weights:
        try:
            with fileio.open(file, "rb") as f:
                tensors.update(load(f.read()))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{file}: unreadable safetensors file ({e})") from None
    return {name.removeprefix("bert."): value for name, value in tensors.items()}


def restore_hf(model, path: str, heads_required: bool = True) -> dict:
    """Loads HF safetensors weights into an existing model; returns {'loaded': n, 'skipped': [names]}. The
    directory's config.json must be a BERT one (RoBERTa's weights carry BERT's names and would load silently) with
    the model's number of attention heads."""
    source = BertConfig.from_json_file(_hf_files(path)[1], hf=True)  # ConfigError for another model_type
    check_fits(model, source, os.fspath(path), activation=False)
    tensors = read_hf(path)
    layers = len({m.group(1) for m in (re.match(r"encoder\.layer\.(\d+)\.", name) for name in tensors) if m})
    if layers > source.num_hidden_layers:  # transformers reports the extra layers' weights as unexpected
        raise CheckpointError(f"{path}: its weights have {layers} encoder layers, its config.json "
                              f"{source.num_hidden_layers}; set num_hidden_layers to {layers} there")

    def lookup(name):
        value = tensors.get(name)
        if value is None and name.endswith(".weight"):  # older exports name LayerNorm parameters gamma/beta
            value = tensors.get(name[: -len(".weight")] + ".gamma")
        if value is None and name.endswith(".bias"):
            value = tensors.get(name[: -len(".bias")] + ".beta")
        return value

    return assign(variable_map(model, heads_required), lookup, os.fspath(path), "transpose_hf",
                   name_of=lambda slot: hf_name(slot.name))


def load_hf(path: str, model: str = "encoder"):
    """Builds a `BertEncoder` (or `BertPretrainer`) from an HF directory: `config.json` + `model.safetensors` or
    its shards.

    The HF config's `hidden_act: "gelu"` is the exact erf GELU, and so is the loaded model.
    """
    _, config_path = _hf_files(path)
    built = build_model(BertConfig.from_json_file(config_path, hf=True), model)
    restore_hf(built, path)
    return built


# Our model classes and the HF transformers class whose layout `save_hf` writes for each.
_HF_ARCHITECTURES = {BertEncoder: "BertModel", BertPretrainer: "BertForPreTraining"}


def save_hf(model, directory: str, vocab_file: str | None = None, do_lower_case: bool | None = None) -> str:
    """Writes `model` as an HF transformers directory: `model.safetensors`, `config.json` and, when given, a copy of
    `vocab_file` as `vocab.txt`. A `BertEncoder` is written as `BertModel`, a `BertPretrainer` as
    `BertForPreTraining` (encoder names under `bert.`, heads under `cls.`; the MLM decoder is tied to the word
    embeddings, as HF saves it). A new directory is written under a temporary name and renamed into place; into an
    existing one each file is renamed in, `config.json` last, so a crash never leaves a directory that loads.
    With the vocabulary goes a `tokenizer_config.json` with `do_lower_case` (`tokenization.lower_case_for`: given,
    it must agree with a cased or uncased vocabulary; for a script without case it says whether accents are
    stripped), or as the vocabulary tells it; none where neither tells.
    """
    from safetensors.numpy import save

    architecture = _HF_ARCHITECTURES.get(type(model))
    if architecture is None:
        raise CheckpointError(f"save_hf writes a BertEncoder or a BertPretrainer, not a {type(model).__name__}")
    tensors = {}
    for slot in variable_map(model):
        name = hf_name(slot.name)
        if architecture != "BertModel" and slot.name.startswith("bert/"):
            name = "bert." + name
        value = np.asarray(slot.variable.numpy(), dtype=np.float32)
        tensors[name] = np.ascontiguousarray(value.T if slot.transpose_hf else value)
    if fileio.exists(directory) and not fileio.isdir(directory):
        raise CheckpointError(f"{directory}: exists and is not a directory; an HF model is a directory")
    with staging.staged_directory(directory, last=("config.json",)) as tmp:
        with fileio.open(os.path.join(tmp, "model.safetensors"), "wb") as f:
            f.write(save(tensors, metadata={"format": "pt"}))
        if vocab_file:
            fileio.copy(vocab_file, os.path.join(tmp, "vocab.txt"))
            # without it, transformers' BertTokenizer lower-cases: a cased model's text would be read uncased
            lower = lower_case_for(vocab_file, do_lower_case)
            if lower is not None:
                staging.write_json(os.path.join(tmp, "tokenizer_config.json"), {"do_lower_case": lower})
        model.bert_config.to_json_file(os.path.join(tmp, "config.json"), hf_architecture=architecture)
    return fileio.absolute(directory)
