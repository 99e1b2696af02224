"""Loading and writing BERT weights: original TF1 checkpoints (google-research/bert) and HF safetensors.

One name map serves every format. `variable_map(model)` lists each of our variables with its original TF1 name
(`bert/encoder/layer_3/attention/self/query/kernel`, ...); the HF name is derived from it by `hf_name`. Loading is
all-or-nothing: every value is read and shape-checked before any variable is assigned, so a bad checkpoint raises
one `CheckpointError` naming the variable and leaves the model untouched.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from bert_tf import staging
from bert_tf.config import BertConfig
from bert_tf.models import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer, BertSpanQA,
                            BertTokenClassifier)


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model: missing variables, wrong shapes, unreadable files."""


_INCOMPATIBLE = re.compile(r"incompatible tensor with shape (\(.*?\)) when attempting to restore variable with "
                           r"shape (\(.*?\)) and name (\S+?)(?::\d+)?\.?$", re.MULTILINE)


def restore_fitting(restore, path: str, explain):
    """`restore(path)` (a `tf.train.Checkpoint`'s `restore` or `read`), where a variable whose shape differs from
    the checkpoint's is one `CheckpointError(explain("variable NAME has shape A there but B in this model"))`, and
    an input position saved for another input pipeline one naming `path`. The half-done restoration is marked as
    expected to be partial: TensorFlow would otherwise log a warning per value it did not restore, after the error,
    when the model is deleted."""
    try:
        return restore(path)
    except (ValueError, tf.errors.FailedPreconditionError) as e:
        found = _INCOMPATIBLE.search(str(e))
        if found:
            saved, wanted, name = found.groups()
            message = explain(f"variable {name} has shape {saved} there but {wanted} in this model")
        elif "restore dataset iterator" in str(e):
            reason = re.sub(r"\s*Make sure .*", "", str(e).split("checkpoint: ", 1)[-1].splitlines()[0])
            message = (f"{path} saved its input position for another input ({reason.rstrip('. ')}): resume with the "
                       "--input_file it was trained on, or start a new --output_dir")
        else:
            raise
        frame = e.__traceback__
        while frame is not None:  # the restore's coordinator is a local of one of the frames that raised
            for value in frame.tb_frame.f_locals.values():
                deleter = getattr(value, "_deleter", None)
                if hasattr(deleter, "set_expect_partial"):
                    deleter.set_expect_partial(True)
            frame = frame.tb_next
    raise CheckpointError(message)


@dataclasses.dataclass(frozen=True)
class Slot:
    """One of our variables and how the formats store it.

    `transpose_original` / `transpose_hf`: the stored array is the transpose of ours (Dense kernels are [in, out]
    in TF1 and Keras but [out, in] in torch; the original NSP and task heads store `output_weights` as [out, in]).
    `required`: loading fails when the checkpoint lacks it (encoder weights); optional slots (task heads) keep their
    fresh initialization when absent.
    """

    name: str
    variable: object
    transpose_original: bool = False
    transpose_hf: bool = False
    required: bool = True


def _dense(prefix, layer, required=True):
    return [Slot(f"{prefix}/kernel", layer.kernel, transpose_hf=True, required=required),
            Slot(f"{prefix}/bias", layer.bias, required=required)]


def _layer_norm(prefix, layer, required=True):
    return [Slot(f"{prefix}/gamma", layer.gamma, required=required),
            Slot(f"{prefix}/beta", layer.beta, required=required)]


def _output_weights(prefix, head, required):
    """The original's hand-made heads: `output_weights` [out, H] and `output_bias` [out]."""
    return [Slot(f"{prefix}output_weights", head.dense.kernel, transpose_original=True, transpose_hf=True,
                 required=required),
            Slot(f"{prefix}output_bias", head.dense.bias, required=required)]


def _encoder_slots(encoder: BertEncoder, pooler_required: bool = True) -> list[Slot]:
    emb = encoder.embeddings
    slots = [Slot("bert/embeddings/word_embeddings", emb.word_embeddings),
             Slot("bert/embeddings/token_type_embeddings", emb.token_type_embeddings),
             Slot("bert/embeddings/position_embeddings", emb.position_embeddings),
             *_layer_norm("bert/embeddings/LayerNorm", emb.layer_norm)]
    for i, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{i}"
        attention = block.attention
        slots += _dense(f"{prefix}/attention/self/query", attention.query)
        slots += _dense(f"{prefix}/attention/self/key", attention.key)
        slots += _dense(f"{prefix}/attention/self/value", attention.value)
        slots += _dense(f"{prefix}/attention/output/dense", attention.output_dense)
        slots += _layer_norm(f"{prefix}/attention/output/LayerNorm", block.attention_layer_norm)
        slots += _dense(f"{prefix}/intermediate/dense", block.intermediate)
        slots += _dense(f"{prefix}/output/dense", block.output_dense)
        slots += _layer_norm(f"{prefix}/output/LayerNorm", block.output_layer_norm)
    slots += _dense("bert/pooler/dense", encoder.pooler.dense, pooler_required)
    return slots


def variable_map(model, heads_required: bool = True) -> list[Slot]:
    """Every variable of `model` with its original TF1 checkpoint name.

    Heads named as the original code names them: `cls/predictions/*` and `cls/seq_relationship/*` for pretraining,
    `output_weights`/`output_bias` for run_classifier, `cls/squad/*` for run_squad. Heads the original never had
    (token tagging, multiple choice) use `cls/<task>/output_*` in the same layout. With `heads_required=False` a
    checkpoint without the head loads the encoder and leaves the head as initialised (fine-tuning from a
    pretraining checkpoint).
    """
    if isinstance(model, BertEncoder):
        return _encoder_slots(model)
    # Token-level heads never read the pooler, and HF saves those models without one.
    slots = _encoder_slots(model.encoder, pooler_required=not isinstance(model, (BertSpanQA, BertTokenClassifier)))
    if isinstance(model, BertPretrainer):
        mlm = model.masked_lm
        slots += _dense("cls/predictions/transform/dense", mlm.transform, heads_required)
        slots += _layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm, heads_required)
        slots.append(Slot("cls/predictions/output_bias", mlm.output_bias, required=heads_required))
        slots += _output_weights("cls/seq_relationship/", model.next_sentence, heads_required)
    elif isinstance(model, BertClassifier):
        slots += _output_weights("", model.head, heads_required)
    elif isinstance(model, BertSpanQA):
        slots += _output_weights("cls/squad/", model.head, heads_required)
    elif isinstance(model, BertTokenClassifier):
        slots += _output_weights("cls/token_classification/", model.head, heads_required)
    elif isinstance(model, BertMultipleChoice):
        slots += _output_weights("cls/multiple_choice/", model.head, heads_required)
    else:
        raise TypeError(f"no checkpoint name map for {type(model).__name__}")
    return slots


_HF_SPECIAL = {
    "cls.predictions.output_bias": "cls.predictions.bias",
    "cls.seq_relationship.output_weights": "cls.seq_relationship.weight",
    "cls.seq_relationship.output_bias": "cls.seq_relationship.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
    "cls.squad.output_weights": "qa_outputs.weight",
    "cls.squad.output_bias": "qa_outputs.bias",
    "cls.token_classification.output_weights": "classifier.weight",
    "cls.token_classification.output_bias": "classifier.bias",
    "cls.multiple_choice.output_weights": "classifier.weight",
    "cls.multiple_choice.output_bias": "classifier.bias",
}


def hf_name(original_name: str) -> str:
    """HF transformers' name for an original TF1 name, without the `bert.` prefix that HF task models add."""
    name = original_name.removeprefix("bert/")
    name = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    if name in _HF_SPECIAL:
        return _HF_SPECIAL[name]
    if name.startswith("embeddings.") and name.endswith("_embeddings"):
        return name + ".weight"
    for old, new in ((".kernel", ".weight"), (".gamma", ".weight"), (".beta", ".bias")):
        if name.endswith(old):
            return name[: -len(old)] + new
    return name


# --------------------------------------------------------------------------------------------------- assignment
def _assign(slots: list[Slot], lookup, source: str, transpose_attr: str, name_of=lambda s: s.name) -> dict:
    """Reads every slot through `lookup(name) -> array | None`, checks all shapes, then assigns all at once."""
    staged, missing, skipped = [], [], []
    for slot in slots:
        name = name_of(slot)
        value = lookup(name)
        if value is None:
            (missing if slot.required else skipped).append(name)
            continue
        value = np.asarray(value)
        if getattr(slot, transpose_attr):
            value = value.T
        want = tuple(slot.variable.shape)
        if value.shape != want:
            raise CheckpointError(
                f"{source}: variable {name} has shape {tuple(value.shape)} but the model expects {want} (after "
                f"layout conversion); the checkpoint was trained with a different config — check bert_config.json "
                "(hidden_size, intermediate_size, vocab_size, max_position_embeddings, type_vocab_size)")
        staged.append((slot.variable, value))
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CheckpointError(f"{source}: missing {len(missing)} variable(s) the model needs: {shown}; is this a "
                              "BERT checkpoint with the same num_hidden_layers as the config?")
    for variable, value in staged:
        variable.assign(value.astype(variable.dtype))
    return {"loaded": len(staged), "skipped": skipped}


# ------------------------------------------------------------------------------------------ original TF1 format
def _resolve_checkpoint(path: str) -> str:
    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise CheckpointError(f"{path}: directory holds no TF checkpoint (no 'checkpoint' index file); pass the "
                                  "checkpoint prefix, e.g. .../bert_model.ckpt")
        return latest
    if not os.path.exists(path + ".index"):
        raise CheckpointError(f"{path}: no TF checkpoint here ({path}.index not found); pass the prefix without "
                              "the .index/.data suffix, e.g. .../bert_model.ckpt")
    return path


def read_original(path: str) -> dict[str, np.ndarray]:
    """All tensors of a TF1 (name-based) checkpoint, by name."""
    prefix = _resolve_checkpoint(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: unreadable checkpoint ({e.__class__.__name__}: {e})") from None
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def restore_original(model, path: str, heads_required: bool = True) -> dict:
    """Loads an original TF1 checkpoint into an existing model; returns {'loaded': n, 'skipped': [names]}."""
    tensors = read_original(path)
    return _assign(variable_map(model, heads_required), tensors.get, os.fspath(path), "transpose_original")


def load_original(path: str, config: BertConfig | str, model: str = "encoder"):
    """Builds a `BertEncoder` (or, with `model="pretrainer"`, a `BertPretrainer` with the MLM and NSP heads) from
    an original checkpoint prefix such as `uncased_L-12_H-768_A-12/bert_model.ckpt`.

    `config` is a `BertConfig` or the path of the `bert_config.json` shipped with the checkpoint.
    """
    _resolve_checkpoint(path)  # a missing checkpoint is reported before a missing config
    if not isinstance(config, BertConfig):
        config = BertConfig.from_json_file(config)
    built = _build(config, model)
    restore_original(built, path)
    return built


def _build(config: BertConfig, model: str):
    if model == "encoder":
        return BertEncoder(config)
    if model == "pretrainer":
        return BertPretrainer(BertEncoder(config))
    raise ValueError(f"model={model!r}: choose 'encoder' or 'pretrainer'")


def save_original(model, prefix: str, global_step: int | None = None) -> str:
    """Writes `model`'s weights as a TF1 name-based checkpoint at `prefix` (readable by google-research/bert), with
    the original's int64 `global_step` when given (the step evaluation reports).

    Also writes the `checkpoint` index file beside it. Files are written in a temporary directory and moved into
    place when complete, the `.index` last, so a crash never leaves a checkpoint that looks whole.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
    slots = variable_map(model)
    names = [slot.name for slot in slots]
    tensors = []
    for slot in slots:
        value = np.asarray(slot.variable.numpy(), dtype=np.float32)
        tensors.append(tf.constant(value.T if slot.transpose_original else value))
    if global_step is not None:
        names.append("global_step")
        tensors.append(tf.constant(global_step, tf.int64))
    with tempfile.TemporaryDirectory(dir=directory, prefix=".ckpt-tmp-") as tmp:
        tmp_prefix = os.path.join(tmp, os.path.basename(prefix))
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=tensors)
        produced = sorted(os.listdir(tmp), key=lambda f: f.endswith(".index"))
        for filename in produced:
            shutil.move(os.path.join(tmp, filename), os.path.join(directory, filename))
    state = os.path.join(directory, "checkpoint")
    with open(state + ".tmp", "w", encoding="utf-8") as f:
        base = os.path.basename(prefix)
        f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
    os.replace(state + ".tmp", state)
    return prefix


# ----------------------------------------------------------------------------------------------------- HF format
def _hf_files(path: str) -> tuple[str, str]:
    path = os.fspath(path)
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    weights = path if path.endswith(".safetensors") else os.path.join(directory, "model.safetensors")
    config = os.path.join(directory, "config.json")
    for needed, what in ((weights, "model.safetensors"), (config, "config.json")):
        if not os.path.exists(needed):
            raise CheckpointError(f"{path}: {what} not found; pass a directory with config.json and "
                                  "model.safetensors (HF format)")
    return weights, config


def read_hf(path: str) -> dict[str, np.ndarray]:
    """The tensors of an HF `model.safetensors`, with the `bert.` prefix of HF task models removed."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    weights, _ = _hf_files(path)
    try:
        tensors = load_file(weights)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{weights}: unreadable safetensors file ({e})") from None
    return {name.removeprefix("bert."): value for name, value in tensors.items()}


def restore_hf(model, path: str, heads_required: bool = True) -> dict:
    """Loads HF safetensors weights into an existing model; returns {'loaded': n, 'skipped': [names]}."""
    tensors = read_hf(path)

    def lookup(name):
        value = tensors.get(name)
        if value is None and name.endswith(".weight"):  # older exports name LayerNorm parameters gamma/beta
            value = tensors.get(name[: -len(".weight")] + ".gamma")
        if value is None and name.endswith(".bias"):
            value = tensors.get(name[: -len(".bias")] + ".beta")
        return value

    return _assign(variable_map(model, heads_required), lookup, os.fspath(path), "transpose_hf",
                   name_of=lambda slot: hf_name(slot.name))


def load_hf(path: str, model: str = "encoder"):
    """Builds a `BertEncoder` (or `BertPretrainer`) from an HF directory with `config.json` + `model.safetensors`.

    The HF config's `hidden_act: "gelu"` is the exact erf GELU, and so is the loaded model.
    """
    _, config_path = _hf_files(path)
    built = _build(BertConfig.from_json_file(config_path), model)
    restore_hf(built, path)
    return built


# Our model classes and the HF transformers class whose layout `save_hf` writes for each.
_HF_ARCHITECTURES = {BertEncoder: "BertModel", BertPretrainer: "BertForPreTraining"}


def save_hf(model, directory: str, vocab_file: str | None = None) -> str:
    """Writes `model` as an HF transformers directory: `model.safetensors`, `config.json` and, when given, a copy of
    `vocab_file` as `vocab.txt`. A `BertEncoder` is written as `BertModel`, a `BertPretrainer` as
    `BertForPreTraining` (encoder names under `bert.`, heads under `cls.`; the MLM decoder is tied to the word
    embeddings, as HF saves it). A new directory is written under a temporary name and renamed into place; into an
    existing one each file is renamed in, `config.json` last, so a crash never leaves a directory that loads.
    """
    from safetensors.numpy import save_file

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
    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CheckpointError(f"{directory}: exists and is not a directory; an HF model is a directory")
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    staging.remove_stale(directory)  # what killed writers of this directory left
    tmp = staging.staging_name(directory)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        if vocab_file:
            shutil.copyfile(vocab_file, os.path.join(tmp, "vocab.txt"))
        model.bert_config.to_json_file(os.path.join(tmp, "config.json"), hf_architecture=architecture)
        if not os.path.exists(directory):
            os.rename(tmp, directory)
        else:
            for filename in sorted(os.listdir(tmp), key=lambda f: f == "config.json"):
                os.replace(os.path.join(tmp, filename), os.path.join(directory, filename))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory
