"""Activation lookup by BertConfig name, on Keras' own activations."""

import functools

import keras

_ACTIVATIONS = {
    "gelu": functools.partial(keras.activations.gelu, approximate=False),
    "gelu_tanh": functools.partial(keras.activations.gelu, approximate=True),
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "swish": keras.activations.silu,
}


def get_activation(name: str):
    """The callable for a canonical BertConfig activation name (`gelu` is exact erf, `gelu_tanh` approximate)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}") from None


def initializer(stddev: float):
    """The original's weight initializer: truncated normal with `initializer_range` as stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
