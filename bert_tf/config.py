"""BERT hyper-parameters: the original `bert_config.json` fields, HF `config.json` reading, and the presets."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from typing import Any

from bert_tf import staging
from bert_tf import fileio

# Activation names we accept, mapped to our canonical names. "gelu" means the exact (erf) GELU; "gelu_tanh" the
# tanh approximation that google-research/bert's modeling.py computes. The two file formats disagree on what the
# word "gelu" means, so the mapping depends on where the config came from (see `BertConfig.from_dict`).
_HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "relu": "relu",
    "tanh": "tanh",
    "swish": "swish",
    "silu": "swish",
}
_ORIGINAL_ACTIVATIONS = {
    "gelu": "gelu_tanh",  # google-research/bert modeling.gelu is the tanh approximation
    "gelu_tanh": "gelu_tanh",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "swish": "swish",
}
ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "tanh", "swish")

# The 24 BERT miniatures (Turc et al., 2019) are the grid L x H with A = H / 64 and FFN = 4H; base and large are the
# paper's two models. Each preset is (layers, hidden size).
_GRID_LAYERS = (2, 4, 6, 8, 10, 12)
_GRID_HIDDEN = (128, 256, 512, 768)
_NAMED = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768),
          "large": (24, 1024)}


class ConfigError(ValueError):
    """A BERT config file or value that cannot describe a BERT model."""


ANY = "<any value>"

# Keys that released config files carry besides BertConfig's fields, which this model does not read. Each maps to
# the one value under which ignoring it leaves the model the file describes, or to ANY when no value changes the
# model's weights or outputs. A value other than the one listed is refused, as is any key not listed here.
FOREIGN_KEYS = {
    # HF config.json: provenance and bookkeeping.
    "model_type": "bert", "architectures": ANY, "transformers_version": ANY, "_name_or_path": ANY,
    "torch_dtype": ANY, "dtype": ANY, "use_bfloat16": ANY, "tokenizer_class": ANY, "prefix": ANY,
    "finetuning_task": ANY, "task_specific_params": ANY, "problem_type": ANY, "id2label": ANY, "label2id": ANY,
    "num_labels": ANY, "pad_token_id": ANY, "bos_token_id": ANY, "eos_token_id": ANY, "sep_token_id": ANY,
    "decoder_start_token_id": ANY,
    # HF config.json: what a forward call returns and how fast it runs, not what it computes.
    "return_dict": ANY, "output_hidden_states": ANY, "output_attentions": ANY, "torchscript": ANY,
    "use_cache": ANY, "output_past": ANY, "gradient_checkpointing": ANY, "chunk_size_feed_forward": ANY,
    "tf_legacy_loss": ANY, "xla_device": ANY,
    # HF config.json: text-generation settings (saved by older transformers); BERT does not generate.
    "max_length": ANY, "min_length": ANY, "do_sample": ANY, "early_stopping": ANY, "num_beams": ANY,
    "num_beam_groups": ANY, "diversity_penalty": ANY, "temperature": ANY, "top_k": ANY, "top_p": ANY,
    "typical_p": ANY, "repetition_penalty": ANY, "length_penalty": ANY, "no_repeat_ngram_size": ANY,
    "encoder_no_repeat_ngram_size": ANY, "bad_words_ids": ANY, "num_return_sequences": ANY, "output_scores": ANY,
    "return_dict_in_generate": ANY, "forced_bos_token_id": ANY, "forced_eos_token_id": ANY,
    "remove_invalid_values": ANY, "exponential_decay_length_penalty": ANY, "suppress_tokens": ANY,
    "begin_suppress_tokens": ANY,
    # HF config.json: architecture switches, accepted only at the value that is BERT as built here.
    "position_embedding_type": "absolute", "is_decoder": False, "add_cross_attention": False,
    "is_encoder_decoder": False, "cross_attention_hidden_size": None, "pruned_heads": {},
    "tie_word_embeddings": True, "classifier_dropout": None,
    # google-research/bert's multilingual and Chinese bert_config.json: fields its modeling.py never reads (its
    # pooler is always the first-token transform, whatever pooler_num_fc_layers says).
    "directionality": ANY, "pooler_fc_size": ANY, "pooler_num_attention_heads": ANY, "pooler_num_fc_layers": ANY,
    "pooler_size_per_head": ANY, "pooler_type": "first_token_transform",
}
# What each refused value would have meant, so the error says why it matters.
_FOREIGN_WHY = {
    "position_embedding_type": "relative position embeddings are not implemented",
    "is_decoder": "a decoder's causal attention is not implemented",
    "add_cross_attention": "cross-attention is not implemented",
    "is_encoder_decoder": "encoder-decoder models are not implemented",
    "cross_attention_hidden_size": "cross-attention is not implemented",
    "pruned_heads": "pruned attention heads are not implemented",
    "tie_word_embeddings": "the masked-LM decoder here is always the word-embedding matrix",
    "classifier_dropout": "the task head's dropout is the fine-tuning CLIs' --dropout_rate",
    "pooler_type": "the pooler here is the first-token transform",
}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The hyper-parameters of one BERT model.

    Field names are those of the original `bert_config.json`, so a released config reads without translation;
    `layer_norm_eps` is 1e-12 as in the original `layer_norm`. `hidden_act` uses our canonical names: `"gelu"` is the
    exact erf GELU, `"gelu_tanh"` the tanh approximation the original code computes. `from_json_file` picks the right
    one for each file format so that loaded weights reproduce the model they were trained in.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_tanh"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    # True: each position attends to itself and the positions before it only (the paper's "LTR" ablation, Table 5),
    # and the pooled output reads the last real token. Written to bert_config.json only when True.
    causal_attention: bool = False

    def __post_init__(self):
        def need(cond, field, value, why):
            if not cond:
                raise ConfigError(f"BertConfig.{field}={value!r}: {why}")

        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool) and value > 0, name, value,
                 "must be a positive integer")
        need(self.hidden_size % self.num_attention_heads == 0, "hidden_size", self.hidden_size,
             f"must be a multiple of num_attention_heads={self.num_attention_heads}")
        need(self.hidden_act in ACTIVATIONS, "hidden_act", self.hidden_act, f"must be one of {ACTIVATIONS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            need(isinstance(value, (int, float)) and 0.0 <= value < 1.0, name, value, "must be in [0, 1)")
        need(self.initializer_range > 0, "initializer_range", self.initializer_range, "must be > 0")
        need(self.layer_norm_eps > 0, "layer_norm_eps", self.layer_norm_eps, "must be > 0")
        need(isinstance(self.causal_attention, bool), "causal_attention", self.causal_attention,
             "must be true or false")

    # ----------------------------------------------------------------------------------------------- presets
    @classmethod
    def preset_names(cls) -> list[str]:
        grid = [f"L{layers}_H{hidden}" for layers in _GRID_LAYERS for hidden in _GRID_HIDDEN]
        return list(_NAMED) + grid

    @classmethod
    def preset(cls, name: str, **overrides) -> "BertConfig":
        """A paper/miniature preset by name: base, large, tiny, mini, small, medium or `L{layers}_H{hidden}`."""
        if name in _NAMED:
            layers, hidden = _NAMED[name]
        else:
            try:
                layers_text, hidden_text = name.split("_")
                layers, hidden = int(layers_text.lstrip("L")), int(hidden_text.lstrip("H"))
            except ValueError:
                layers = hidden = None
            if layers not in _GRID_LAYERS or hidden not in _GRID_HIDDEN or not name.startswith("L"):
                raise ConfigError(f"unknown BERT preset {name!r}; choose one of {', '.join(cls.preset_names())}")
        fields = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
                      intermediate_size=4 * hidden)
        fields.update(overrides)
        return cls(**fields)

    # ------------------------------------------------------------------------------------------------- files
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>", hf: bool = False) -> "BertConfig":
        """Reads an original `bert_config.json` dict or an HF `config.json` dict (recognised by `model_type`, or
        `hf`: read from an HF directory, whose older configs have no `model_type`; its "gelu" is the erf GELU).

        Every key must be a field or one of `FOREIGN_KEYS` at an accepted value; anything else is refused, with the
        closest known key suggested, so a misspelt field never falls back to its default unnoticed.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object with BERT fields, got {type(data).__name__}")
        is_hf = hf or "model_type" in data
        if data.get("model_type", "bert") != "bert":
            raise ConfigError(f"{source}: model_type={data['model_type']!r} is not a BERT config (expected 'bert')")
        fields = {f.name for f in dataclasses.fields(cls)}
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        missing = [name for name in required if name not in data]
        if missing:
            raise ConfigError(f"{source}: not a BERT config, missing field(s) {', '.join(missing)}")
        cls._check_foreign_keys(data, fields, source)
        values = {k: v for k, v in data.items() if k in fields}
        if "layer_norm_epsilon" in data:
            if "layer_norm_eps" in values and values["layer_norm_eps"] != data["layer_norm_epsilon"]:
                raise ConfigError(f"{source}: layer_norm_eps={values['layer_norm_eps']!r} and layer_norm_epsilon="
                                  f"{data['layer_norm_epsilon']!r} disagree; keep one")
            values["layer_norm_eps"] = data["layer_norm_epsilon"]
        act = values.get("hidden_act", "gelu")
        table = _HF_ACTIVATIONS if is_hf else _ORIGINAL_ACTIVATIONS
        if act not in table:
            raise ConfigError(f"{source}: hidden_act={act!r} is not supported; use one of {sorted(table)}")
        values["hidden_act"] = table[act]
        try:
            return cls(**values)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @staticmethod
    def _check_foreign_keys(data: dict[str, Any], fields: set[str], source: str) -> None:
        known = fields | set(FOREIGN_KEYS) | {"layer_norm_epsilon"}
        unknown = [key for key in data if key not in known]
        if unknown:
            described = []
            for key in unknown:
                close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
                described.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(described)}; "
                              "fix or remove it (the accepted keys are BertConfig's fields and "
                              "bert_tf.config.FOREIGN_KEYS)")
        for key, accepted in FOREIGN_KEYS.items():
            if key in data and accepted is not ANY and not _same_value(data[key], accepted):
                why = _FOREIGN_WHY.get(key, "")
                raise ConfigError(f"{source}: {key}={data[key]!r} is not supported ({why}); only "
                                  f"{json.dumps(accepted)} describes this model")

    @classmethod
    def from_json_file(cls, path: str | os.PathLike, hf: bool = False) -> "BertConfig":
        """Reads `bert_config.json` (original release) or `config.json` (HF; `hf` as in `from_dict`)."""
        path = os.fspath(path)
        try:
            if fileio.isdir(path):
                raise IsADirectoryError(path)
            with fileio.open(path) as f:
                data = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found; pass the bert_config.json of the checkpoint") from None
        except IsADirectoryError:
            raise ConfigError(f"{path}: is a directory; pass the bert_config.json (or config.json) in it") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: not a JSON file ({e})") from None
        return cls.from_dict(data, source=path, hf=hf)

    @classmethod
    def from_preset_or_file(cls, value: str | os.PathLike) -> "BertConfig":
        """A preset when `value` names one, else the config file at `value`.

        A value that is neither an existing path nor shaped like one (no directory separator, no extension) is
        taken as a mistyped preset name; anything else is read as a file, so a missing or non-JSON file is
        reported as such.
        """
        value = os.fspath(value)
        if value in cls.preset_names():
            return cls.preset(value)
        looks_like_path = os.sep in value or "/" in value or os.path.splitext(value)[1] != ""
        if not looks_like_path and not fileio.exists(value):
            close = difflib.get_close_matches(value, cls.preset_names(), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{value!r} is neither a config file (no such file) nor a BERT preset; {hint}pass the "
                              f"path of a bert_config.json or one of {', '.join(cls.preset_names())}")
        if not fileio.exists(value):
            raise ConfigError(f"{value}: config file not found; pass the path of a bert_config.json or a preset name "
                              "(base, large, tiny, mini, small, medium, L{layers}_H{hidden})")
        return cls.from_json_file(value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_original_dict(self) -> dict[str, Any]:
        """The dict the original code reads: its `gelu` is our `gelu_tanh`."""
        out = self.to_dict()
        out["hidden_act"] = {"gelu_tanh": "gelu", "gelu": "gelu_exact"}.get(self.hidden_act, self.hidden_act)
        if not self.causal_attention:  # the released models' files, key for key
            del out["causal_attention"]
        return out

    def to_hf_dict(self, architecture: str = "BertModel") -> dict[str, Any]:
        """The dict HF transformers' `BertConfig` reads: its `gelu` is our `gelu`, its `gelu_new` our `gelu_tanh`."""
        if self.causal_attention:
            raise ConfigError("causal_attention=True (a left-to-right model): HF's BertModel would read it as a "
                              "bidirectional encoder; keep it in this package's or the original format")
        out = self.to_dict()
        del out["causal_attention"]
        out["hidden_act"] = {"gelu_tanh": "gelu_new"}.get(self.hidden_act, self.hidden_act)
        out.update(model_type="bert", architectures=[architecture], position_embedding_type="absolute")
        return out

    def to_json_file(self, path: str | os.PathLike, hf_architecture: str | None = None) -> None:
        """Writes an original-format `bert_config.json`, or with `hf_architecture` (`"BertModel"`, ...) an HF
        `config.json`; atomically (`staging.write_json`)."""
        path = os.fspath(path)
        data = self.to_original_dict() if hf_architecture is None else self.to_hf_dict(hf_architecture)
        staging.write_json(path, data)


def _same_value(value: Any, accepted: Any) -> bool:
    """JSON equality that keeps `true` apart from `1` and `false` apart from `0` and `null`."""
    if isinstance(accepted, bool) or isinstance(value, bool):
        return value is accepted
    return value == accepted


def check_fits(config: BertConfig, vocab_file: str | None = None, seq_length: int | None = None,
               seq_flag: str = "max_seq_length", do_lower_case: bool | None = None,
               source: str = "--bert_config_file") -> None:
    """A ValueError naming the flags where the vocabulary or the sequence length is larger than the model
    `config` describes: ids past `vocab_size` have no embedding row, and positions past `max_position_embeddings`
    none either. Caught before any work; TensorFlow would fail mid-run on a CPU (or read zeros on a GPU). A
    vocabulary smaller than `vocab_size` is fine (some models pad it). With `do_lower_case`, also that it suits the
    vocabulary (`tokenization.check_case`). `source`: where the config came from, for the message."""
    if seq_length is not None and seq_length > config.max_position_embeddings:
        raise ValueError(f"--{seq_flag}={seq_length} is longer than the model's max_position_embeddings="
                         f"{config.max_position_embeddings} ({source}); use at most "
                         f"{config.max_position_embeddings}")
    if vocab_file is not None:
        from bert_tf.tokenization import check_case, load_vocab

        if do_lower_case is not None:
            check_case(vocab_file, do_lower_case)
        ids = max(load_vocab(vocab_file).values()) + 1
        if ids > config.vocab_size:
            raise ValueError(f"--vocab_file={vocab_file} has {ids} tokens but the model's vocab_size is "
                             f"{config.vocab_size} ({source}): they belong to different models; give the "
                             "vocab.txt that came with the checkpoint")
