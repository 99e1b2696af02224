"""keras-hub's BERT, `keras_hub.models.BertBackbone`, read and written: a preset directory (`save_to_preset`:
`config.json` + `model.weights.h5`), or a `.weights.h5` file with the backbone's `config.json` beside it; a fine-tuned
classifier is written as a `BertTextClassifier` preset with its preprocessor.

keras-hub reads and writes its own files (it is imported here only, when one of these functions runs); this module
maps the tensors. keras-hub keeps the attention projections per head ([H, heads, H/heads] kernels) where the
original keeps [H, H]; everything else has the original's shapes. keras-hub's BertBackbone computes the tanh GELU
with LayerNorm epsilon 1e-12, as the original code: a model with the exact erf GELU (HF weights) is refused rather
than written into a backbone that would compute something else.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
from absl import logging

from bert_tf import fileio, staging
from bert_tf.checkpoints.names import CheckpointError, assign, check_fits, variable_map
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.tokenization import lower_case_for

PRESET_WEIGHTS = "model.weights.h5"
# keras-hub's variable path -> the original TF1 name (per layer: `{i}` is the layer's index)
_EMBEDDINGS = {"token_embedding/embeddings": "bert/embeddings/word_embeddings",
               "position_embedding/embeddings": "bert/embeddings/position_embeddings",
               "segment_embedding/embeddings": "bert/embeddings/token_type_embeddings",
               "embeddings_layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
               "embeddings_layer_norm/beta": "bert/embeddings/LayerNorm/beta",
               "pooled_dense/kernel": "bert/pooler/dense/kernel", "pooled_dense/bias": "bert/pooler/dense/bias"}
_LAYER = {"self_attention_layer/query/{p}": "attention/self/query/{p}",
          "self_attention_layer/key/{p}": "attention/self/key/{p}",
          "self_attention_layer/value/{p}": "attention/self/value/{p}",
          "self_attention_layer/attention_output/{p}": "attention/output/dense/{p}",
          "self_attention_layer_norm/{n}": "attention/output/LayerNorm/{n}",
          "feedforward_intermediate_dense/{p}": "intermediate/dense/{p}",
          "feedforward_output_dense/{p}": "output/dense/{p}",
          "feedforward_layer_norm/{n}": "output/LayerNorm/{n}"}


def _names(layers: int) -> dict[str, str]:
    names = dict(_EMBEDDINGS)
    for i in range(layers):
        for theirs, ours in _LAYER.items():
            for p, n in (("kernel", "gamma"), ("bias", "beta")):
                names[f"transformer_layer_{i}/{theirs.format(p=p, n=n)}"] = \
                    f"bert/encoder/layer_{i}/{ours.format(p=p, n=n)}"
    return names


def _keras_hub():
    try:
        import keras_hub
    except ImportError:
        raise CheckpointError("keras-hub presets are read and written with keras-hub itself: pip install "
                              "keras-hub==0.32.0") from None
    return keras_hub


def is_keras_hub(path: str) -> bool:
    """Whether `path` is a keras-hub preset directory or a `.weights.h5` file (by keras-hub's config.json)."""
    path = os.fspath(path)
    if path.endswith(".weights.h5"):
        return True
    config = os.path.join(path, "config.json")
    if not fileio.isdir(path) or not fileio.isfile(config):
        return False
    try:
        with fileio.open(config) as f:
            return str(json.load(f).get("module", "")).startswith("keras_hub")
    except (json.JSONDecodeError, OSError, AttributeError):
        return False


def _backbone(path: str):
    """The keras-hub backbone saved at `path` (a preset directory, or a .weights.h5 with config.json beside it)."""
    import keras

    keras_hub = _keras_hub()
    path = os.fspath(path)
    directory = fileio.dirname(path) if path.endswith(".weights.h5") else path
    weights = path if path.endswith(".weights.h5") else os.path.join(path, PRESET_WEIGHTS)
    for needed in (os.path.join(directory, "config.json"), weights):
        if not fileio.isfile(needed):
            raise CheckpointError(f"{path}: {os.path.basename(needed)} not found; pass a keras-hub preset directory "
                                  "(save_to_preset) or a .weights.h5 with the backbone's config.json beside it")
    with fileio.open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    if config.get("class_name") != "BertBackbone":
        what = (f"a keras-hub {config.get('class_name')} preset" if str(config.get("module", "")).startswith(
            "keras_hub") else "not a keras-hub preset (its config.json names no keras-hub class)")
        raise CheckpointError(f"{path}: {what}, not BertBackbone (BERT); only BERT converts")
    backbone = keras.saving.deserialize_keras_object(config)
    try:
        backbone.load_weights(weights)
    except (ValueError, OSError) as e:
        raise CheckpointError(f"{weights}: does not fit the BertBackbone of its config.json "
                              f"({str(e).splitlines()[0][:200]})") from None
    if not isinstance(backbone, keras_hub.models.BertBackbone):
        raise CheckpointError(f"{path}: not a keras-hub BertBackbone")
    return backbone


def read_keras_hub(path: str) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """(the config, {original TF1 name: array}) of a keras-hub BertBackbone (see the module docstring for
    `path`)."""
    backbone = _backbone(path)
    c = backbone.get_config()
    config = BertConfig(vocab_size=c["vocabulary_size"], hidden_size=c["hidden_dim"],
                        num_hidden_layers=c["num_layers"], num_attention_heads=c["num_heads"],
                        intermediate_size=c["intermediate_dim"], hidden_act="gelu_tanh",
                        hidden_dropout_prob=c["dropout"], attention_probs_dropout_prob=c["dropout"],
                        max_position_embeddings=c["max_sequence_length"], type_vocab_size=c["num_segments"])
    h, names, tensors = config.hidden_size, _names(config.num_hidden_layers), {}
    for weight in backbone.weights:
        if weight.path not in names:
            raise CheckpointError(f"{path}: unexpected keras-hub variable {weight.path}")
        value = np.asarray(weight.numpy())
        if value.ndim == 3:  # per-head attention kernels: [H, heads, H/heads] or [heads, H/heads, H] -> [H, H]
            value = value.reshape(h, h)
        elif value.ndim == 2 and "self_attention_layer/" in weight.path:  # per-head biases [heads, H/heads]
            value = value.reshape(h)
        tensors[names[weight.path]] = value
    return config, tensors


def load_keras_hub(path: str) -> BertEncoder:
    """A `BertEncoder` with the weights of a keras-hub BertBackbone (see the module docstring for `path`)."""
    config, tensors = read_keras_hub(path)
    encoder = BertEncoder(config)
    assign(variable_map(encoder), tensors.get, os.fspath(path), "transpose_original")
    return encoder


def restore_keras_hub(model, path: str) -> dict:
    """Initialises `model`'s encoder from a keras-hub BertBackbone (`--init_checkpoint`); its heads keep their
    initialisation. A model whose config computes another GELU than the backbone's tanh one is refused."""
    config, tensors = read_keras_hub(path)
    check_fits(model, config, os.fspath(path))
    return assign(variable_map(model, heads_required=False), tensors.get, os.fspath(path), "transpose_original")


def _backbone_of(encoder: BertEncoder, directory: str):
    """A keras-hub BertBackbone holding `encoder`'s weights; refused for what it cannot compute."""
    keras_hub = _keras_hub()
    config = encoder.bert_config
    problems = []
    if config.hidden_act != "gelu_tanh":
        problems.append(f"hidden_act={config.hidden_act!r} (BertBackbone computes the tanh GELU, 'gelu_tanh'; an "
                        "HF model's erf GELU would change every output)")
    if config.causal_attention:
        problems.append("causal_attention=true (BertBackbone attends both ways)")
    if config.layer_norm_eps != 1e-12:
        problems.append(f"layer_norm_eps={config.layer_norm_eps} (BertBackbone uses 1e-12)")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        problems.append("hidden_dropout_prob != attention_probs_dropout_prob (BertBackbone has one dropout)")
    if problems:
        raise CheckpointError(f"{directory}: keras-hub's BertBackbone cannot hold this model: {'; '.join(problems)}")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob, max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    ours = {slot.name: slot.variable.numpy().T if slot.transpose_original else slot.variable.numpy()
            for slot in variable_map(encoder)}
    names = _names(config.num_hidden_layers)
    for weight in backbone.weights:
        weight.assign(ours[names[weight.path]].reshape(tuple(weight.shape)))
    return backbone


def save_keras_hub(model, directory: str, vocab_file: str | None = None, do_lower_case: bool | None = None,
                   seq_length: int = 128) -> str:
    """Writes a keras-hub preset directory: a `BertEncoder` as a `BertBackbone` (`BertBackbone.from_preset`), a
    `BertClassifier` as a `BertTextClassifier` with its preprocessor (`BertTextClassifier.from_preset` then classifies
    raw text; the preprocessor needs `vocab_file`, `do_lower_case` and `seq_length` as the model was trained;
    `do_lower_case` must agree with a cased or uncased vocabulary, and is taken from it when not given,
    `tokenization.lower_case_for`).
    Refused for what BertBackbone cannot compute: the erf GELU, causal attention, another LayerNorm epsilon."""
    from bert_tf.models import BertClassifier

    if isinstance(model, BertEncoder):
        task = _backbone_of(model, directory)
    elif isinstance(model, BertClassifier):
        if not vocab_file:
            raise CheckpointError(f"{directory}: a keras-hub BertTextClassifier preset holds its preprocessor, which "
                                  "needs the model's vocab.txt (--vocab_file)")
        do_lower_case = lower_case_for(vocab_file, do_lower_case)
        if do_lower_case is None:
            raise CheckpointError(f"{vocab_file}: the vocabulary does not tell whether the model lower-cases and "
                                  "strips accents (a script without case); give do_lower_case as it was trained")
        keras_hub = _keras_hub()
        # the original's uncased tokenizer strips accents too; keras-hub's BertTokenizer does only when asked
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=os.fspath(vocab_file), lowercase=do_lower_case,
                                                   strip_accents=do_lower_case)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=seq_length)
        folds = "folds compatibility forms (ﬁ, ², ß, full-width letters), " if do_lower_case else ""
        logging.warning("%s: the preset's preprocessor is keras-hub's BertTokenizer, which is not the original's: it "
                        "reads non-ASCII spaces (U+00A0, U+3000) as part of a word, splits at zero-width characters "
                        "and soft hyphens, %sand makes a word over 100 characters [UNK]; text with them gets other ids "
                        "than in training (export/'s SavedModels tokenize as the original)", directory, folds)
        task = keras_hub.models.BertTextClassifier(_backbone_of(model.encoder, directory), model.num_classes,
                                                   preprocessor=preprocessor, dropout=model.head.dropout_rate)
        task.output_dense.set_weights([model.head.dense.kernel.numpy(), model.head.dense.bias.numpy()])
    else:
        raise CheckpointError(f"{directory}: keras-hub has a BERT preset for the encoder (BertBackbone) and the "
                              f"classifier (BertTextClassifier), not for a {type(model).__name__}")
    with staging.staged_directory(directory, last=("config.json",)) as tmp:
        _save_to_preset(task, tmp)
    return fileio.absolute(directory)


def _save_to_preset(task, directory: str) -> None:
    """`task.save_to_preset(directory)`. keras-hub writes a preset's JSON and vocabulary files with Python's `open`,
    so a URL gets the files of a preset saved locally."""
    if not fileio.is_url(directory):
        task.save_to_preset(directory)
        return
    with tempfile.TemporaryDirectory(prefix="bert_tf_preset_") as local:
        task.save_to_preset(local)
        for top, _, files in os.walk(local):
            target = os.path.join(directory, os.path.relpath(top, local)).removesuffix("/.")
            fileio.makedirs(target)
            for name in files:
                fileio.copy(os.path.join(top, name), os.path.join(target, name))
