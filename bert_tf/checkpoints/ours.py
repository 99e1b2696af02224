"""Our own checkpoints (`tf.train.Checkpoint`, written by `bert_tf.training.train`), and `restore_weights`, which
initialises a model from a checkpoint of any format."""

from __future__ import annotations

import dataclasses
import re

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.checkpoints.hf import is_hf_directory, restore_hf
from bert_tf.checkpoints.kerashub import is_keras_hub, restore_keras_hub
from bert_tf.checkpoints.model_garden import is_model_garden, restore_model_garden
from bert_tf.checkpoints.names import CheckpointError, check_depth, check_fits
from bert_tf.checkpoints.original import restore_original
from bert_tf.config import BertConfig


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


class _WeightsOf(tf.__internal__.tracking.Trackable):
    """`model` as a checkpoint sees it, less its optimizer: a compiled Keras model tracks its optimizer, so reading
    a checkpoint of a training run into it would also restore the run's update count (the learning-rate schedule's
    step) and Adam moments, where `--init_checkpoint` starts a fresh optimizer as the original does (its
    `init_from_checkpoint` maps the trainable variables only)."""

    def __init__(self, model):
        self._model = model

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        import keras

        children = self._model._trackable_children(save_type, **kwargs)
        return {name: child for name, child in children.items() if not isinstance(child, keras.optimizers.Optimizer)}


def _saved_config(reader, model) -> BertConfig | None:
    """The BERT config `bert_tf.training.train` saves with a checkpoint (None in one written before it did), a field
    it lacks taken as `model`'s: what the weights' shapes cannot show (attention heads, activation, LayerNorm
    epsilon) is checked against it."""
    from bert_tf.training import saved_config  # training imports this module

    values = saved_config(reader)
    if values is None:
        return None
    return dataclasses.replace(getattr(model, "encoder", model).bert_config, **{
        field.name: values[field.name] for field in dataclasses.fields(BertConfig) if field.name in values})


def _depth(names) -> int:
    """The encoder layers of a checkpoint of ours without a saved config (its weights may be named by the
    optimizer's list of them, which says nothing of the layers): one query projection per block, wherever the model
    type puts its encoder."""
    return len({m.group(1) for name in names if (m := re.match(r"(.*)/attention/query/_?kernel/", name))})


def restore_weights(model, path: str) -> str:
    """Initialises `model`'s weights from a checkpoint (prefix or directory): an original TF1 checkpoint
    (google-research/bert names), an HF directory (config.json + model.safetensors or its shards), a keras-hub
    BertBackbone preset, a Model Garden encoder checkpoint or TF Hub SavedModel, or one written by
    `bert_tf.training.train`. A checkpoint of another model type (a
    pretraining checkpoint for a classifier) gives its encoder; heads that the checkpoint lacks keep their fresh
    initialisation. Optimizer state and step are ignored (`--init_checkpoint`). Returns the checkpoint used.
    A model under the `bfloat16` inference policy gets the checkpoint's float32 weights rounded to bfloat16."""
    if any(variable.dtype == "bfloat16" for variable in model.weights):
        # every format stores float32 weights: read them into a float32 twin, then round once (`with_dtype`)
        from bert_tf.models import with_dtype

        twin = with_dtype(model, "mixed_bfloat16")
        used = restore_weights(twin, path)
        model.set_weights(twin.get_weights())
        return used
    if is_keras_hub(path):
        restore_keras_hub(model, path)
        logging.info("initialised weights from %s", path)
        return path
    if is_hf_directory(path):
        restore_hf(model, path, heads_required=False)
        logging.info("initialised weights from %s", path)
        return path
    if is_model_garden(path):
        restore_model_garden(model, path)
        logging.info("initialised weights from %s", path)
        return path
    resolved = tf.train.latest_checkpoint(path) if fileio.isdir(path) else path
    if not resolved:
        raise CheckpointError(f"--init_checkpoint={path}: no checkpoint in this directory")
    try:
        reader = fileio.load_checkpoint(resolved)
        names = set(reader.get_variable_to_shape_map())
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"--init_checkpoint={path}: cannot read a checkpoint there "
                              f"({str(e).splitlines()[0]})") from None
    if "bert/embeddings/word_embeddings" in names:
        restore_original(model, resolved, heads_required=False)
    else:
        saved = _saved_config(reader, model)
        if saved is None:
            check_depth(model, _depth(names), f"--init_checkpoint={path}")
        else:
            check_fits(model, saved, f"--init_checkpoint={path}")
        status = restore_fitting(tf.train.Checkpoint(model=_WeightsOf(model)).read, resolved, lambda mismatch: (
            f"--init_checkpoint={path}: a checkpoint of another model ({mismatch}); give one of this model's size"))
        try:
            status.assert_existing_objects_matched()
        except AssertionError:  # another model type: take the encoder
            status.expect_partial()
            encoder = getattr(model, "encoder", model)
            status = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=encoder)).read(resolved)
            try:
                status.assert_existing_objects_matched()
            except AssertionError as e:
                status.expect_partial()  # else TensorFlow warns of each value not restored, after the error
                raise CheckpointError(f"--init_checkpoint={path}: does not fit this model "
                                      f"({str(e).splitlines()[0][:200]})") from None
        status.expect_partial()
    logging.info("initialised weights from %s", resolved)
    return resolved
