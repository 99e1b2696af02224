"""One post-LayerNorm transformer encoder block, named like the original checkpoint's `layer_N`."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.activations import get_activation, initializer
from bert_tf.layers.attention import BertSelfAttention
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.gelu import APPROXIMATE, compiled_gelu, compiles
from bert_tf.layers.layer_norm import LayerNorm
from bert_tf.layers.precision import parameter_policy
from bert_tf.onednn import fuses_activation_in_float32, graph_runs_on_this_cpu


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTransformerBlock(keras.layers.Layer):
    """Self-attention and a position-wise feed-forward network, each followed by dropout, residual add and LayerNorm.

    Post-LN as in the paper (and Vaswani et al.): `LN(x + Dropout(Attn(x)))`, then `LN(h + Dropout(W2 act(W1 h)))`
    with W1 of width `intermediate_size` (4H in every released model).

    Args:
      hidden_size, num_heads, intermediate_size: widths.
      activation: canonical activation name of the FFN (`gelu_tanh` for original checkpoints, `gelu` for exact).
      dropout_rate: hidden dropout; attention_dropout_rate: dropout on attention probabilities.
      initializer_range: stddev of the truncated-normal initializer; layer_norm_eps: LayerNorm epsilon.
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, activation="gelu_tanh", dropout_rate=0.1,
                 attention_dropout_rate=0.1, initializer_range=0.02, layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

        policy = self.dtype_policy
        self.attention = BertSelfAttention(hidden_size=hidden_size, num_heads=num_heads,
                                           dropout_rate=attention_dropout_rate, initializer_range=initializer_range,
                                           dtype=policy, name="attention")
        self.attention_layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=parameter_policy(policy),
                                              name="attention_LayerNorm")
        self.activation_fn = get_activation(activation)
        self._fusable_activation = get_activation(activation, in_float32=False)
        self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=initializer(initializer_range),
                                               dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=initializer(initializer_range),
                                               dtype=policy, name="output_dense")
        self.output_layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=parameter_policy(policy),
                                           name="output_LayerNorm")
        self.dropout = Dropout(dropout_rate, dtype=policy)

    def build(self, input_shape):
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.attention_layer_norm.build(shape)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(shape)
        self.built = True

    def call(self, hidden_states, attention_bias=None, training=None):
        batch, seq = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        # the position-wise work on a [tokens, H] matrix, so that each GEMM is a 2-D MatMul, which TensorFlow's CPU
        # graph optimizer fuses with the bias and what follows (residual add, GELU: see `_intermediate`); on 3-D
        # input Keras's Dense reshapes between the MatMul and its bias, and nothing is fused
        tokens = ops.reshape(hidden_states, (-1, self.hidden_size))
        attended = self.attention(hidden_states, attention_bias, training=training, flat=True)
        h = self.attention_layer_norm(tokens + self.dropout(attended, training=training))
        ffn = self.output_dense(self._activation(self._intermediate(h), training))
        out = self.output_layer_norm(h + self.dropout(ffn, training=training))
        return ops.reshape(out, (batch, seq, self.hidden_size))

    def _intermediate(self, h):
        """`self.intermediate(h)` for a [tokens, H] `h`, with its bias added by `tf.nn.bias_add`: TensorFlow's graph
        optimizer then fuses the MatMul, the bias and the GELU after it (`_activation`) into one oneDNN GEMM, which
        it does not do with the bias add of Keras's Dense (BENCHMARKS.md, "Fusing the FFN"). Same variables, same
        arithmetic."""
        layer = self.intermediate
        return tf.nn.bias_add(tf.matmul(h, ops.cast(layer.kernel, h.dtype)), ops.cast(layer.bias, h.dtype))

    def _activation(self, x, training):
        """The FFN activation of `x`, in float32 (`get_activation`). In inference, where TensorFlow fuses it into
        the oneDNN GEMM before it, which computes it in float32 anyway (`fuses_activation_in_float32`), it is left
        as Keras's own, because casts around it would stop the fusion. Training keeps its input for the gradient,
        which stops the fusion too: there a GELU in a graph that runs on this CPU is two XLA-compiled kernels
        (`compiled_gelu`) instead of ~20 element-wise ops."""
        if not training and fuses_activation_in_float32(x.dtype):
            return self._fusable_activation(x)
        if training and compiles(self.activation, x.dtype) and graph_runs_on_this_cpu():
            return compiled_gelu(x, APPROXIMATE[self.activation])
        return self.activation_fn(x)

    def compute_output_shape(self, hidden_states_shape, attention_bias_shape=None):
        return hidden_states_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, activation=self.activation,
                      dropout_rate=self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
        return config
