"""The original TF1 checkpoint format (google-research/bert): name-based tensors, read and written."""

from __future__ import annotations

import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, staging
from bert_tf.checkpoints.names import CheckpointError, assign, build_model, check_depth, check_fits, variable_map
from bert_tf.config import BertConfig, ConfigError


def _resolve_checkpoint(path: str) -> str:
    path = os.fspath(path)
    if fileio.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise CheckpointError(f"{path}: directory holds no TF checkpoint (no 'checkpoint' index file); pass the "
                                  "checkpoint prefix, e.g. .../bert_model.ckpt")
        return latest
    if not fileio.exists(path + ".index"):
        raise CheckpointError(f"{path}: no TF checkpoint here ({path}.index not found); pass the prefix without "
                              "the .index/.data suffix, e.g. .../bert_model.ckpt")
    return path


def _reader(path: str):
    """(a reader of the TF1 (name-based) checkpoint at `path`, the names of its tensors)."""
    prefix = _resolve_checkpoint(path)
    try:
        reader = fileio.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: unreadable checkpoint ({e.__class__.__name__}: {e})") from None
    return reader, set(reader.get_variable_to_shape_map())


def read_original(path: str) -> dict[str, np.ndarray]:
    """All tensors of a TF1 (name-based) checkpoint, by name."""
    reader, names = _reader(path)
    return {name: reader.get_tensor(name) for name in names}


def restore_original(model, path: str, heads_required: bool = True) -> dict:
    """Loads an original TF1 checkpoint into an existing model; returns {'loaded': n, 'skipped': [names]}. Reads
    the model's tensors only: a checkpoint of a pretraining run also holds two Adam slots per weight (adam_m,
    adam_v), twice the weights again. Where a `bert_config.json` lies beside the checkpoint (as in the released
    models' directories), the model is held to it in what the shapes cannot show (`check_fits`; the activation
    is not compared: the released models' tanh GELU and HF's erf GELU are both used with these weights)."""
    reader, names = _reader(path)
    layers = [int(m.group(1)) for name in names if (m := re.match(r"bert/encoder/layer_(\d+)/", name))]
    check_depth(model, max(layers, default=-1) + 1, os.fspath(path))
    beside = os.path.join(fileio.dirname(fileio.absolute(_resolve_checkpoint(path))), "bert_config.json")
    if fileio.isfile(beside):
        try:
            config = BertConfig.from_json_file(beside)
        except ConfigError as e:
            logging.warning("%s: not compared with the model's config (%s)", beside, e)
        else:
            check_fits(model, config, f"{os.fspath(path)} (with {beside})", activation=False)
    return assign(variable_map(model, heads_required), lambda name: reader.get_tensor(name) if name in names else None,
                  os.fspath(path), "transpose_original")


def load_original(path: str, config: BertConfig | str, model: str = "encoder"):
    """Builds a `BertEncoder` (or, with `model="pretrainer"`, a `BertPretrainer` with the MLM and NSP heads) from
    an original checkpoint prefix such as `uncased_L-12_H-768_A-12/bert_model.ckpt`.

    `config` is a `BertConfig` or the path of the `bert_config.json` shipped with the checkpoint.
    """
    _resolve_checkpoint(path)  # a missing checkpoint is reported before a missing config
    if not isinstance(config, BertConfig):
        config = BertConfig.from_json_file(config)
    built = build_model(config, model)
    restore_original(built, path)
    return built


def save_original(model, prefix: str, global_step: int | None = None) -> str:
    """Writes `model`'s weights as a TF1 name-based checkpoint at `prefix` (readable by google-research/bert), with
    the original's int64 `global_step` when given (the step evaluation reports).

    Also writes the `checkpoint` index file beside it. Files are written in a temporary directory and moved into
    place when complete, the `.index` last, so a crash never leaves a checkpoint that looks whole. A model that
    google-research/bert's `modeling.py` cannot compute, though its weights have the same names and shapes, is
    written with a warning that says so (this package reads it back from its `bert_config.json`).
    """
    prefix = os.fspath(prefix)
    config = getattr(model, "bert_config", None)
    unread = [] if config is None else [f"causal_attention={config.causal_attention}"] * config.causal_attention + [
        f"layer_norm_eps={config.layer_norm_eps:g}"] * (config.layer_norm_eps != 1e-12)
    if unread:
        logging.warning("%s: written for bert_tf: google-research/bert's modeling.py ignores %s in bert_config.json "
                        "and would compute another model from these weights", prefix, " and ".join(unread))
    directory = fileio.dirname(fileio.absolute(prefix))
    fileio.makedirs(directory)
    slots = variable_map(model)
    names = [slot.name for slot in slots]
    tensors = []
    for slot in slots:
        value = np.asarray(slot.variable.numpy(), dtype=np.float32)
        tensors.append(tf.constant(value.T if slot.transpose_original else value))
    if global_step is not None:
        names.append("global_step")
        tensors.append(tf.constant(global_step, tf.int64))
    with fileio.temporary_directory(directory, prefix=".ckpt-tmp-") as tmp:
        tmp_prefix = os.path.join(tmp, os.path.basename(prefix))
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=tensors)
        produced = sorted(fileio.listdir(tmp), key=lambda f: f.endswith(".index"))
        for filename in produced:
            fileio.replace(os.path.join(tmp, filename), os.path.join(directory, filename))
    base = os.path.basename(prefix)
    staging.write_text(os.path.join(directory, "checkpoint"),
                       f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
    return prefix
