"""Multi-head self-attention with BERT's sub-layer names (`attention/self`, `attention/output`): bidirectional,
or left-to-right with `causal_bias`."""

import math

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.activations import initializer
from bert_tf.layers.dropout import Dropout
from bert_tf.onednn import runs_bfloat16_in_float32


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(keras.layers.Layer):
    """Scaled dot-product attention over all positions, with the additive padding mask, plus the output projection.

    This is the paper's "multi-head attention" box together with the residual-free output dense, so the layer owns
    exactly the variables `attention/self/{query,key,value}` and `attention/output/dense` of the original checkpoint.
    The softmax and dropout are computed in float32 under any mixed-precision policy (in bfloat16 inference, inside
    oneDNN's softmax: `_probabilities`); masked keys get -10000 added before the softmax as in the original code.

    Args:
      hidden_size: model width H; each of `num_heads` heads has width H / num_heads.
      num_heads: number of attention heads.
      dropout_rate: dropout on the attention probabilities.
      initializer_range: stddev of the truncated-normal kernel initializer.
    """

    def __init__(self, hidden_size, num_heads, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        def dense(name):
            return keras.layers.Dense(hidden_size, kernel_initializer=initializer(initializer_range),
                                      dtype=self.dtype_policy, name=name)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense")
        # applied to the float32 probabilities before they are rounded to the compute dtype
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, autocast=False)

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))
        self.built = True

    def _split_heads(self, x, batch, seq):
        x = ops.reshape(x, (batch, seq, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))  # [batch, heads, seq, head_size]

    def call(self, hidden_states, attention_bias=None, training=None, flat=False):
        """`attention_bias` float32 [batch, 1, 1, seq] or [batch, 1, seq, seq]: 0 for keys a query may see, -10000
        for the others (`padding_bias`, `causal_bias`). `flat`: return [batch * seq, H] instead of [batch, seq, H].
        The projections run on the [batch * seq, H] matrix (see `BertTransformerBlock.call`)."""
        batch, seq = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        tokens = ops.reshape(hidden_states, (-1, self.hidden_size))
        q = self._split_heads(self.query(tokens), batch, seq)
        k = self._split_heads(self.key(tokens), batch, seq)
        v = self._split_heads(self.value(tokens), batch, seq)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        probs = self._probabilities(scores, attention_bias, training)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        # shaped as `tokens` (not (-1, H)): a graph with unknown batch and length then still knows the output has
        # the residual's shape, and fuses the residual add into this GEMM as it does with known shapes
        out = self.output_dense(tf.reshape(context, tf.shape(tokens)))
        return out if flat else ops.reshape(out, (batch, seq, self.hidden_size))

    def _probabilities(self, scores, attention_bias, training):
        """softmax(scores / sqrt(head_size) + attention_bias), with dropout in training, in the compute dtype.

        The softmax is computed in float32 and rounded once to the compute dtype. In inference, where oneDNN runs
        this graph's bfloat16 softmax (`runs_bfloat16_in_float32`: it computes in float32 and rounds once), the
        bfloat16 scores go to it as they are, scaled and masked in bfloat16, which saves two casts and a float32
        pass over the [batch, heads, seq, seq] scores. Scaling by 1/sqrt(head_size) is then exact (a power of two:
        head sizes of 4^k, 64 in every BERT), and adding 0 is, so every key a query may see gets the same value as
        through float32; the masked keys' -10000 (-9984 in bfloat16) still gives them a probability of exactly 0.
        The one difference is in a row whose keys are all masked (an input with no tokens): its scores are lost in
        the bfloat16 rounding of -10000 + score, so its probabilities come out near-uniform, where float32 gives the
        softmax of the scores."""
        scale = 1.0 / math.sqrt(self.head_size)
        if not training and math.frexp(scale)[0] == 0.5 and runs_bfloat16_in_float32(scores.dtype):
            scores = scores * ops.cast(scale, scores.dtype)
            if attention_bias is not None:
                scores = scores + ops.cast(attention_bias, scores.dtype)
            return ops.softmax(scores, axis=-1)
        scores = ops.cast(scores, "float32") * scale
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, "float32")  # Keras autocasts inputs to compute dtype
        return ops.cast(self.dropout(ops.softmax(scores, axis=-1), training=training), self.compute_dtype)

    def compute_output_shape(self, hidden_states_shape, attention_bias_shape=None):
        return hidden_states_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


def padding_bias(input_mask):
    """[batch, seq] 1/0 mask -> [batch, 1, 1, seq] float32 additive bias, computed once per batch for all layers."""
    mask = ops.cast(input_mask, "float32")
    return ((1.0 - mask) * -10000.0)[:, None, None, :]


def causal_bias(input_mask):
    """`padding_bias` plus -10000 wherever a key comes after its query: [batch, 1, seq, seq] float32. A future key's
    probability is then exactly 0 in float32, so an output never depends on the tokens after it."""
    position = ops.cumsum(ops.ones_like(input_mask, dtype="int32"), axis=1)  # [batch, seq] (symbolic-safe)
    later = ops.cast(position[:, None, None, :] > position[:, None, :, None], "float32")  # [batch, 1, query, key]
    return padding_bias(input_mask) + later * -10000.0
