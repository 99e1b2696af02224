"""BERT hyper-parameters: the original `bert_config.json` fields, HF `config.json` reading, and the presets."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

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
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "BertConfig":
        """Reads an original `bert_config.json` dict or an HF `config.json` dict (recognised by `model_type`)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object with BERT fields, got {type(data).__name__}")
        is_hf = "model_type" in data
        if is_hf and data["model_type"] != "bert":
            raise ConfigError(f"{source}: model_type={data['model_type']!r} is not a BERT config (expected 'bert')")
        fields = {f.name for f in dataclasses.fields(cls)}
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        missing = [name for name in required if name not in data]
        if missing:
            raise ConfigError(f"{source}: not a BERT config, missing field(s) {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in fields}
        if "layer_norm_eps" not in values and "layer_norm_epsilon" in data:
            values["layer_norm_eps"] = data["layer_norm_epsilon"]
        if is_hf and data.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: position_embedding_type={data['position_embedding_type']!r} is not "
                              "supported; BERT uses 'absolute' learned position embeddings")
        act = values.get("hidden_act", "gelu")
        table = _HF_ACTIVATIONS if is_hf else _ORIGINAL_ACTIVATIONS
        if act not in table:
            raise ConfigError(f"{source}: hidden_act={act!r} is not supported; use one of {sorted(table)}")
        values["hidden_act"] = table[act]
        try:
            return cls(**values)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads `bert_config.json` (original release) or `config.json` (HF)."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found; pass the bert_config.json of the checkpoint") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: not a JSON file ({e})") from None
        return cls.from_dict(data, source=path)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_original_dict(self) -> dict[str, Any]:
        """The dict the original code reads: its `gelu` is our `gelu_tanh`."""
        out = self.to_dict()
        out["hidden_act"] = {"gelu_tanh": "gelu", "gelu": "gelu_exact"}.get(self.hidden_act, self.hidden_act)
        return out

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes an original-format `bert_config.json` (atomically)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_original_dict(), f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
