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


def get_activation(name: str, in_float32: bool = True):
    """The callable for a canonical BertConfig activation name (`gelu` is exact erf, `gelu_tanh` approximate).

    On a 16-bit tensor it computes in float32 and rounds once, as the original's float32 graph, torch's autocast
    and oneDNN's fused GEMM epilogue do. Keras alone (`in_float32=False`, for a caller whose GEMM fuses it) runs it
    op by op in the 16-bit dtype, rounding after each op: the GELU's `1 + tanh(...)` or `1 + erf(...)` cancels in 8
    bits, so its negative tail comes out zeroed or doubled and many outputs land more than one bfloat16 step from
    the rounded float32 GELU (eagerly, in a graph and under XLA alike), and its gradient inherits the errors."""
    try:
        fn = _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}") from None
    if not in_float32:
        return fn

    def activation(x):
        dtype = keras.backend.standardize_dtype(x.dtype)
        if dtype in ("float32", "float64"):
            return fn(x)
        return keras.ops.cast(fn(keras.ops.cast(x, "float32")), dtype)

    return activation


def initializer(stddev: float):
    """The original's weight initializer: truncated normal with `initializer_range` as stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
