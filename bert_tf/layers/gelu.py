"""The FFN's GELU while training on a CPU: its forward pass and its gradient as two XLA-compiled kernels."""

import math

import tensorflow as tf

# canonical activation name -> `approximate` (the tanh form of google-research/bert, or the exact erf form)
APPROXIMATE = {"gelu_tanh": True, "gelu": False}
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_CUBIC = 0.044715
_INV_SQRT_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def compiled_gelu(x, approximate: bool):
    """`gelu(x)` in float32, rounded once to `x`'s dtype, as `get_activation` computes it, with its gradient.

    While training, the GELU's input is kept for its gradient, so TensorFlow's graph optimizer does not fuse it into
    the GEMM before it. Run op by op on a CPU, the tanh GELU is ~8 element-wise ops forward and ~11 in its gradient,
    each a pass over the [tokens, 4H] activations in float32 (casts from and to a 16-bit dtype on top): the largest
    element-wise cost of a training step. Here each direction is one `jit_compile` function, which XLA compiles into
    one loop over the tensor even inside a graph that TensorFlow otherwise runs op by op. The forward kernel is
    Keras's formula (`tf.nn.gelu`); the gradient is the derivative in closed form from `x`, instead of autodiff's
    chain of ops. Values differ from the op-by-op ones by float32 rounding (XLA contracts to FMAs and has its own
    tanh) and are as close to float64's (tested).

    For graphs that run on this CPU (`bert_tf.onednn.graph_runs_on_this_cpu`): under XLA the op-by-op GELU fuses
    anyway, and a graph traced for elsewhere must not need XLA. For float32 and 16-bit `x` (`compiles`).
    """

    @tf.custom_gradient
    def gelu(x):
        def grad(dy):
            return _gradient(x, dy, approximate)

        return _forward(x, approximate), grad

    return gelu(x)


def compiles(activation: str, dtype) -> bool:
    """Whether `compiled_gelu` computes this canonical activation on `dtype`: the two GELUs, on float32, bfloat16
    and float16. Not float64, where XLA's CPU erfc and tanh are less accurate than TensorFlow's own kernels (a
    relative 1e-6 in the GELU's negative tail)."""
    return activation in APPROXIMATE and tf.as_dtype(dtype) in (tf.float32, tf.bfloat16, tf.float16)


@tf.function(jit_compile=True)
def _forward(x, approximate):
    return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=approximate), x.dtype)


@tf.function(jit_compile=True)
def _gradient(x, dy, approximate):
    x = tf.cast(x, tf.float32)
    if approximate:
        # y = x/2 (1 + t), t = tanh(c (x + a x^3)): dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2)
        square = x * x
        t = tf.tanh(_SQRT_2_OVER_PI * (x + _CUBIC * square * x))
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * _CUBIC * square)
    else:
        # y = x Phi(x): dy/dx = Phi(x) + x phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2
        slope = 0.5 * tf.math.erfc(-x * _INV_SQRT_2) + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return tf.cast(tf.cast(dy, tf.float32) * slope, dy.dtype)
