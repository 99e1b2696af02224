"""Model Garden's BERT encoders (`official.nlp.modeling.networks.BertEncoder` and `BertEncoderV2`, tf-models-official),
read in the two layouts they are published in: an object-based checkpoint (`tf.train.Checkpoint`, Model Garden's
training and release checkpoints) and the TF Hub / Kaggle SavedModel (`saved_model.pb` + `variables/`).

Both keep each variable under an object path that differs between the two encoders and between training and
export, but the checkpoint's object graph also records each variable's name, which does not: that name is what is
mapped (after any outer scope, e.g. `bert_encoder_v2/`). The attention projections are stored per head ([H, heads,
H/heads] kernels, [heads, H/heads, H] for the output). The config comes from the shapes (the number of heads from the
per-head kernels), with Model Garden's BERT defaults for what shapes do not hold: the tanh GELU, LayerNorm epsilon
1e-12, dropout 0.1; or from a `bert_config.json` beside the input or given, checked against the shapes. A SavedModel
is also run: the encoder read from it must reproduce its outputs, or the read fails. A checkpoint cannot be run, so
an encoder trained with other settings than the config says (pre-LayerNorm blocks, another activation) needs its
`bert_config.json`.
"""

from __future__ import annotations

import os
import re

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints.names import CheckpointError, assign, check_fits, refuse_deeper, variable_map
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder

# Model Garden's variable name (after the outer scope) -> the original TF1 name; `{i}` is the layer index.
_EMBEDDINGS = {"word_embeddings/embeddings": "bert/embeddings/word_embeddings",
               "position_embedding/embeddings": "bert/embeddings/position_embeddings",
               "type_embeddings/embeddings": "bert/embeddings/token_type_embeddings",
               "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
               "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
               "pooler_transform/kernel": "bert/pooler/dense/kernel",
               "pooler_transform/bias": "bert/pooler/dense/bias"}
_LAYER = {"self_attention/query": "attention/self/query", "self_attention/key": "attention/self/key",
          "self_attention/value": "attention/self/value", "self_attention/attention_output": "attention/output/dense",
          "intermediate": "intermediate/dense", "output": "output/dense"}
_LAYER_NORMS = {"self_attention_layer_norm": "attention/output/LayerNorm", "output_layer_norm": "output/LayerNorm"}
_LAYER_NAME = re.compile(r"transformer/layer_(\d+)/(.+)$")
# variables of Model Garden encoders that are not BERT's (ALBERT's factorised embeddings, ...)
_NOT_BERT = ("embedding_projection",)


def _translate(name: str) -> str | None:
    """The original TF1 name of a Model Garden variable name (outer scopes allowed), or None."""
    for theirs, ours in _EMBEDDINGS.items():
        if name == theirs or name.endswith("/" + theirs):
            return ours
    found = _LAYER_NAME.search(name)
    if not found or not (name == found.group(0) or name.endswith("/" + found.group(0))):
        return None
    layer, rest = found.groups()
    sub, _, leaf = rest.rpartition("/")
    if sub in _LAYER and leaf in ("kernel", "bias"):
        return f"bert/encoder/layer_{layer}/{_LAYER[sub]}/{leaf}"
    if sub in _LAYER_NORMS and leaf in ("gamma", "beta"):
        return f"bert/encoder/layer_{layer}/{_LAYER_NORMS[sub]}/{leaf}"
    return None


def is_saved_model(path: str) -> bool:
    return fileio.isfile(os.path.join(os.fspath(path), "saved_model.pb"))


def _checkpoint_prefix(path: str) -> str:
    path = os.fspath(path)
    if is_saved_model(path):
        return os.path.join(path, "variables", "variables")
    return (tf.train.latest_checkpoint(path) or path) if fileio.isdir(path) else path


def _object_graph(path: str):
    """(a reader, the object graph) of the object-based checkpoint at `path` (or a SavedModel's)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = fileio.load_checkpoint(_checkpoint_prefix(path))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return reader, [a for node in graph.nodes for a in node.attributes if a.name == "VARIABLE_VALUE"]


def is_model_garden(path: str) -> bool:
    """Whether `path` (a checkpoint prefix or directory, or a SavedModel directory) holds Model Garden's names."""
    try:
        _, variables = _object_graph(path)
    except Exception:  # noqa: BLE001 - whatever cannot be read as one is not this format
        return False
    return any(_translate(v.full_name) == "bert/embeddings/word_embeddings" for v in variables)


def _named_tensors(path: str) -> dict[str, np.ndarray]:
    """{variable name: value} of an object-based checkpoint (or a SavedModel's)."""
    try:
        reader, variables = _object_graph(path)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{path}: not a TF2 object-based checkpoint or SavedModel "
                              f"({str(e).splitlines()[0][:200]})") from None
    return {v.full_name: reader.get_tensor(v.checkpoint_key) for v in variables}


def _config_from_shapes(tensors: dict[str, np.ndarray], path: str) -> BertConfig:
    layers = sorted({int(m.group(1)) for m in (re.match(r"bert/encoder/layer_(\d+)/", n) for n in tensors) if m})
    if layers != list(range(len(layers))) or not layers:
        raise CheckpointError(f"{path}: Transformer layers {layers} found; expected layer_0 .. layer_N-1")
    query = tensors.get("bert/encoder/layer_0/attention/self/query/kernel")
    if query is None or query.ndim != 3:
        raise CheckpointError(f"{path}: no per-head query kernel [H, heads, H/heads] in layer_0; not a Model Garden "
                              "BERT encoder")
    words = tensors["bert/embeddings/word_embeddings"]
    return BertConfig(vocab_size=words.shape[0], hidden_size=words.shape[1], num_hidden_layers=len(layers),
                      num_attention_heads=query.shape[1],
                      intermediate_size=tensors["bert/encoder/layer_0/intermediate/dense/kernel"].shape[1],
                      max_position_embeddings=tensors["bert/embeddings/position_embeddings"].shape[0],
                      type_vocab_size=tensors["bert/embeddings/token_type_embeddings"].shape[0],
                      hidden_act="gelu_tanh")


def read_model_garden(path: str, bert_config_file: str | None = None) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """(the config, {original TF1 name: array}) of a Model Garden BERT encoder (see the module docstring)."""
    path = os.fspath(path)
    named = _named_tensors(path)
    foreign = sorted(n for n in named if any(part in n.split("/") for part in _NOT_BERT))
    if foreign:
        raise CheckpointError(f"{path}: has {foreign[0]}: a Model Garden encoder of another family (ALBERT-style "
                              "factorised embeddings), not BERT")
    tensors = {}
    for name, value in named.items():
        ours = _translate(name)
        if ours is None:
            continue
        if ours in tensors:
            raise CheckpointError(f"{path}: two encoders' variables map to {ours}; pass a checkpoint of one encoder")
        tensors[ours] = value
    if "bert/embeddings/word_embeddings" not in tensors:
        raise CheckpointError(f"{path}: no Model Garden BERT encoder variables (word_embeddings/embeddings, "
                              "transformer/layer_0/...)")
    config_file = bert_config_file or os.path.join(path if fileio.isdir(path) else fileio.dirname(path),
                                                   "bert_config.json")
    config = shapes = _config_from_shapes(tensors, path)
    if fileio.isfile(config_file):  # the file, where it agrees with what the shapes tell
        config = BertConfig.from_json_file(config_file)
        if config.num_attention_heads != shapes.num_attention_heads:
            raise CheckpointError(f"{config_file}: num_attention_heads={config.num_attention_heads}, but the weights "
                                  f"in {path} have {shapes.num_attention_heads} heads per attention layer; set it to "
                                  f"{shapes.num_attention_heads}")
        refuse_deeper(shapes.num_hidden_layers, config.num_hidden_layers, path, f"its {config_file}")
    h = config.hidden_size
    for name, value in tensors.items():  # per-head attention tensors -> the original's [H, H] and [H]
        if "/attention/" in name and value.ndim == 3:
            tensors[name] = value.reshape(h, h)
        elif "/attention/" in name and value.ndim == 2 and name.endswith("/bias"):
            tensors[name] = value.reshape(h)
    return config, tensors


def _check_runs_alike(encoder: BertEncoder, path: str) -> None:
    """The SavedModel at `path`, called as a TF Hub encoder, must give the encoder's outputs."""
    config = encoder.bert_config
    rng = np.random.default_rng(0)
    seq = min(16, config.max_position_embeddings)
    ids = rng.integers(1, config.vocab_size, size=(2, seq)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, seq // 2:] = 0
    inputs = {"input_word_ids": ids * mask, "input_mask": mask,
              "input_type_ids": (np.arange(seq)[None] >= seq // 4).astype("int32") * mask}
    loaded = tf.saved_model.load(path)
    try:
        theirs = loaded(inputs, training=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot be called as a TF Hub BERT encoder (inputs input_word_ids, "
                              f"input_mask, input_type_ids): {str(e).splitlines()[0][:200]}") from None
    ours = encoder(inputs)
    for key in ("sequence_output", "pooled_output"):
        want, got = np.asarray(theirs[key]), np.asarray(ours[key])
        if key == "sequence_output":
            want, got = want * mask[..., None], got * mask[..., None]
        gap = float(np.max(np.abs(want - got)))
        if gap > 1e-4 * max(1.0, float(np.max(np.abs(want)))):
            raise CheckpointError(f"{path}: the SavedModel computes another function than a BERT encoder with "
                                  f"these weights ({key} differs by {gap:.2g}); give its bert_config.json "
                                  "(--bert_config_file) if it was built with other settings")


def load_model_garden(path: str, bert_config_file: str | None = None) -> BertEncoder:
    """A `BertEncoder` with the weights of a Model Garden BERT encoder checkpoint or TF Hub SavedModel."""
    config, tensors = read_model_garden(path, bert_config_file)
    encoder = BertEncoder(config)
    assign(variable_map(encoder), tensors.get, os.fspath(path), "transpose_original")
    if is_saved_model(path):
        _check_runs_alike(encoder, os.fspath(path))
    return encoder


def restore_model_garden(model, path: str) -> dict:
    """Initialises `model`'s encoder from a Model Garden checkpoint or TF Hub SavedModel (`--init_checkpoint`);
    its heads keep their initialisation. A model whose config has another head count or activation is refused."""
    if is_saved_model(path):
        load_model_garden(path)  # the SavedModel run beside the encoder read from it
    config, tensors = read_model_garden(path)
    check_fits(model, config, os.fspath(path))
    return assign(variable_map(model, heads_required=False), tensors.get, os.fspath(path), "transpose_original")
