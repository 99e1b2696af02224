"""LayerNorm computed by one oneDNN kernel where the graph runs TensorFlow's oneDNN ops, by Keras's ops elsewhere."""

import functools

import keras
import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_library

from bert_tf.onednn import graph_runs_onednn_here

_KERNEL = "_MklLayerNorm"
_FLOATS = ("bfloat16", "float16", "float32")


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """Keras's `LayerNormalization` over the last axis, the same variables and float32 arithmetic, that in a graph
    running TensorFlow's oneDNN ops on this CPU (`graph_runs_onednn_here`) normalizes in one kernel.

    Keras's LayerNorm is about a dozen element-wise ops (two means, a squared difference, the rsqrt, the scale and
    shift), each a pass over the activations and a dispatch: in BERT the largest share of the work between the
    GEMMs. TensorFlow has a oneDNN LayerNorm kernel (`_MklLayerNorm`), but its graph optimizer substitutes it for
    none of the spellings of LayerNorm tried (BENCHMARKS.md), so this layer calls it: in float32 as Keras computes
    (a 16-bit input is cast up, the result cast back to the input's dtype), with the float32 gamma and beta. Its
    outputs differ from Keras's by float32 rounding and are as close to float64's (tested). Its gradient is the
    textbook one, in TensorFlow ops from the input (`_onednn_layer_norm`).

    Anywhere else (eagerly, under XLA, with a GPU, in graphs traced for other machines such as SavedModels for TF
    Serving, in a TensorFlow without the kernel, for other axes, float64, or without center or scale) it is
    Keras's layer unchanged. The choice is made when a graph is traced, so a graph traced here and run or converted
    elsewhere keeps the kernel: a concrete function traced before `tf.saved_model.save` (as `signatures=`), one
    handed to a converter (TFLite, ONNX, OpenVINO), or a `tf.function` traced outside XLA and then called inside a
    `jit_compile` function, which XLA refuses. Trace those under `bert_tf.onednn.traced_to_run_elsewhere()`.
    """

    def call(self, inputs):
        if not self._one_kernel(inputs):
            return super().call(inputs)
        x = tf.cast(inputs, tf.float32)
        rank = inputs.shape.rank
        flat = x if rank in (2, 3) else tf.reshape(x, [-1, tf.shape(x)[-1]])  # the kernel takes 2-D or 3-D
        y = _onednn_layer_norm(flat, tf.cast(self.gamma, tf.float32), tf.cast(self.beta, tf.float32), self.epsilon)
        y = y if rank in (2, 3) else tf.reshape(y, tf.shape(x))
        return tf.cast(tf.cast(y, inputs.dtype), self.compute_dtype)  # as Keras: back to the input's, then compute

    def _one_kernel(self, inputs) -> bool:
        rank = inputs.shape.rank
        axis = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        return (bool(rank) and [a % rank for a in axis] == [rank - 1] and self.center and self.scale
                and not self.rms_scaling and keras.backend.standardize_dtype(inputs.dtype) in _FLOATS
                and kernel_available() and graph_runs_onednn_here())


@functools.cache
def kernel_available() -> bool:
    """Whether this TensorFlow registers oneDNN's float32 LayerNorm kernel for the CPU."""
    return any(k.device_type == "CPU" and any(tf.float32.as_datatype_enum in c.allowed_values.list.type
                                              for c in k.constraint)
               for k in kernels.get_registered_kernels_for_op(_KERNEL).kernel)


def _onednn_layer_norm(x, gamma, beta, epsilon):
    """oneDNN's LayerNorm of float32 `x` over its last axis, `(x - mean) / sqrt(var + epsilon) * gamma + beta`."""

    @tf.custom_gradient
    def layer_norm(x, gamma, beta):
        _, _, op, _ = op_def_library._apply_op_helper(_KERNEL, name="OneDnnLayerNorm", x=x, scale=gamma,
                                                      offset=beta, epsilon=epsilon)

        def grad(dy):
            mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
            inverse = tf.math.rsqrt(variance + epsilon)
            normalized = (x - mean) * inverse
            leading = tf.range(tf.rank(x) - 1)
            scaled = dy * gamma
            dx = inverse * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                            - normalized * tf.reduce_mean(scaled * normalized, -1, keepdims=True))
            return dx, tf.reduce_sum(dy * normalized, leading), tf.reduce_sum(dy, leading)

        return op.outputs[0], grad

    return layer_norm(x, gamma, beta)
