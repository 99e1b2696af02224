"""The name map every checkpoint format shares, and the all-or-nothing assignment of a format's tensors.

`variable_map(model)` lists each of our variables with its original TF1 name
(`bert/encoder/layer_3/attention/self/query/kernel`, ...) and how each format stores it; the HF name is derived from
it by `hf_name`. `assign` reads every value and checks every shape before it assigns any variable, so a bad
checkpoint raises one `CheckpointError` naming the variable and leaves the model untouched.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re

import numpy as np

from bert_tf.config import BertConfig
from bert_tf.errors import CheckpointError
from bert_tf.models import (BertClassifier, BertEncoder, BertFeatureTagger, BertMultipleChoice, BertPretrainer,
                            BertSpanQA, BertTokenClassifier)


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


def _bilstm(prefix, layer, required):
    """A Keras Bidirectional LSTM's weights as `<prefix>/{fw,bw}/{kernel,recurrent_kernel,bias}`."""
    return [Slot(f"{prefix}/{direction}/{w}", getattr(half.cell, w), required=required)
            for direction, half in (("fw", layer.forward_layer), ("bw", layer.backward_layer))
            for w in ("kernel", "recurrent_kernel", "bias")]


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
    slots = _encoder_slots(model.encoder, pooler_required=not isinstance(
        model, (BertSpanQA, BertTokenClassifier, BertFeatureTagger)))
    if isinstance(model, BertPretrainer):
        mlm = model.masked_lm
        slots += _dense("cls/predictions/transform/dense", mlm.transform, heads_required)
        slots += _layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm, heads_required)
        slots.append(Slot("cls/predictions/output_bias", mlm.output_bias, required=heads_required))
        if model.next_sentence_head is not None:  # None: the No NSP objective
            slots += _output_weights("cls/seq_relationship/", model.next_sentence_head, heads_required)
    elif isinstance(model, BertClassifier):
        slots += _output_weights("", model.head, heads_required)
    elif isinstance(model, BertSpanQA):
        slots += _output_weights("cls/squad/", model.head, heads_required)
        if model.bilstm is not None:  # "+ BiLSTM": no original name; ours, beside the span head
            slots += _bilstm("cls/squad/bilstm", model.bilstm, heads_required)
    elif isinstance(model, BertTokenClassifier):
        slots += _output_weights("cls/token_classification/", model.head, heads_required)
    elif isinstance(model, BertMultipleChoice):
        slots += _output_weights("cls/multiple_choice/", model.head, heads_required)
    elif isinstance(model, BertFeatureTagger):  # the probe: names of our own, under cls/feature_tagger
        if model.combine.mix is not None:
            slots += [Slot(f"cls/feature_tagger/scalar_mix/{w}", getattr(model.combine.mix, w),
                           required=heads_required) for w in ("scalars", "gamma")]
        for i, lstm in enumerate(model.lstms):
            slots += _bilstm(f"cls/feature_tagger/bilstm_{i}", lstm, heads_required)
        slots += _output_weights("cls/feature_tagger/", model.head, heads_required)
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


def assign(slots: list[Slot], lookup, source: str, transpose_attr: str, name_of=lambda s: s.name) -> dict:
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


_FEWER_LAYERS = contextvars.ContextVar("fewer_layers", default=False)


@contextlib.contextmanager
def fewer_layers_allowed():
    """Within it, a model takes the first layers of a deeper checkpoint (`check_depth` lets it through): the
    explicit route to a shallower model initialised from a deeper one (`convert_checkpoint --allow_fewer_layers`)."""
    token = _FEWER_LAYERS.set(True)
    try:
        yield
    finally:
        _FEWER_LAYERS.reset(token)


def check_depth(model, layers: int, path: str) -> None:
    """Refuses a checkpoint of `layers` encoder layers for a model of fewer, unless in `fewer_layers_allowed`: the
    layers past the model's would be left out without a word (a model of more layers is refused by the variables it
    misses)."""
    refuse_deeper(layers, getattr(model, "encoder", model).bert_config.num_hidden_layers, path, "the model's config")


def refuse_deeper(layers: int, config_layers: int, path: str, config: str) -> None:
    """`check_depth` for a config that is not yet a model's (`config` names it in the message)."""
    if layers > config_layers and not _FEWER_LAYERS.get():
        raise CheckpointError(f"{path}: its encoder has {layers} layers, {config} {config_layers}; "
                              f"set num_hidden_layers to {layers} (the bert_config.json that came with the weights), "
                              f"or to start from its first {config_layers} on purpose, make that "
                              "checkpoint with convert_checkpoint --allow_fewer_layers")


def check_fits(model, source: BertConfig, path: str, activation: bool = True) -> None:
    """Refuses what the weights' shapes cannot show: a source with another number of attention heads (its [H, H]
    projections load into any head count and compute another model), more layers than the model (`check_depth`),
    another LayerNorm epsilon, attention in another direction (the paper keeps a left-to-right model's causal mask
    when fine-tuning it) and, where `activation`, another activation."""
    check_depth(model, source.num_hidden_layers, path)
    config = getattr(model, "encoder", model).bert_config
    if config.num_attention_heads != source.num_attention_heads:
        raise CheckpointError(f"{path}: its encoder has {source.num_attention_heads} attention heads, the model's "
                              f"config {config.num_attention_heads}; set num_attention_heads to "
                              f"{source.num_attention_heads}")
    if config.layer_norm_eps != source.layer_norm_eps:
        raise CheckpointError(f"{path}: its encoder's LayerNorms use layer_norm_eps={source.layer_norm_eps}, the "
                              f"model's config {config.layer_norm_eps}; set layer_norm_eps to {source.layer_norm_eps}")
    if config.causal_attention != source.causal_attention:
        trained = "left-to-right only (causal)" if source.causal_attention else "both ways"
        raise CheckpointError(f"{path}: its encoder was trained attending {trained}, the model's config has "
                              f"causal_attention={config.causal_attention}; set causal_attention to "
                              f"{source.causal_attention}")
    if activation and config.hidden_act != source.hidden_act:
        raise CheckpointError(f"{path}: its encoder computes hidden_act={source.hidden_act!r}, the model's config has "
                              f"{config.hidden_act!r}; set hidden_act to {source.hidden_act}")


def build_model(config: BertConfig, model: str):
    """A fresh `BertEncoder` (`model="encoder"`) or `BertPretrainer` (`"pretrainer"`: the left-to-right LM's for a
    causal config, else BERT's masked LM and NSP) of `config`, to load into."""
    if model == "encoder":
        return BertEncoder(config)
    if model == "pretrainer":
        return BertPretrainer(BertEncoder(config), objective="ltr" if config.causal_attention else "mlm_nsp")
    raise ValueError(f"model={model!r}: choose 'encoder' or 'pretrainer'")
