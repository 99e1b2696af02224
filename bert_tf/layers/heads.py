"""Output heads that sit on the encoder: pooler, masked-LM, next-sentence and the fine-tuning heads."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.activations import get_activation, initializer
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.layer_norm import LayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPooler(keras.layers.Layer):
    """Dense + tanh on the final hidden state of the first token ([CLS]); the input of NSP and classification.

    Args:
      hidden_size: model width H.
      initializer_range: stddev of the truncated-normal initializer.
      last_token: read the last real token instead (call with the input mask): in a left-to-right (causal) encoder
        the first token sees only itself and the last one sees the whole input, the token OpenAI GPT classifies from.
    """

    def __init__(self, hidden_size, initializer_range=0.02, last_token=False, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.last_token = last_token
        self.dense = keras.layers.Dense(hidden_size, activation="tanh",
                                        kernel_initializer=initializer(initializer_range), dtype=self.dtype_policy,
                                        name="dense")

    def build(self, input_shape):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, input_mask=None):
        if not self.last_token:
            return self.dense(sequence_output[:, 0, :])
        last = ops.maximum(ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1, 0)
        return self.dense(tf.gather(sequence_output, last, batch_dims=1))

    def compute_output_shape(self, sequence_output_shape, input_mask_shape=None):
        return (sequence_output_shape[0], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                      last_token=self.last_token)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original word pieces at the masked positions only (`cls/predictions` of the original), or, with
    `masked_lm_positions=None`, a word piece at every position (the left-to-right LM's next-token head).

    Gathers the hidden states at `masked_lm_positions` first, so the transform and the vocabulary-sized decoder run on
    [batch, max_predictions] rather than on every position. Transform: dense H, activation, LayerNorm; decoder: the
    transposed word-embedding table (tied, passed in as `embedding_table`) plus a per-token output bias. Logits are
    float32 under any mixed-precision policy.

    Args:
      vocab_size, hidden_size: sizes; activation: canonical name (as the encoder's).
      initializer_range, layer_norm_eps: as in the encoder.
    """

    def __init__(self, vocab_size, hidden_size, activation="gelu_tanh", initializer_range=0.02, layer_norm_eps=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.activation = activation
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.activation_fn = get_activation(activation)
        self.transform = keras.layers.Dense(hidden_size, kernel_initializer=initializer(initializer_range),
                                            dtype=self.dtype_policy, name="transform_dense")
        self.layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=self.dtype_policy, name="transform_LayerNorm")

    def build(self, *args):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        # one batched gather (Keras's take_along_axis broadcasts the indices to [batch, predictions, H] first)
        picked = sequence_output if masked_lm_positions is None else \
            tf.gather(sequence_output, tf.cast(masked_lm_positions, tf.int32), batch_dims=1)
        h = self.layer_norm(self.activation_fn(self.transform(picked)))
        # a 2-D matmul against the table as stored: no [H, vocab] transposed copy of the table in either pass
        logits = tf.matmul(tf.reshape(h, (-1, self.hidden_size)), tf.cast(embedding_table, h.dtype), transpose_b=True)
        logits = tf.reshape(logits, tf.concat([tf.shape(h)[:-1], [self.vocab_size]], 0))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_spec(self, sequence_output, masked_lm_positions, embedding_table):
        picked = sequence_output.shape[:2] if masked_lm_positions is None else masked_lm_positions.shape
        return keras.KerasTensor(tuple(picked) + (self.vocab_size,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size, activation=self.activation,
                      initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(keras.layers.Layer):
    """Dropout then a dense layer to `num_outputs` float32 logits; used for NSP, classification, tagging and spans.

    The kernel is stored [H, num_outputs]; the original NSP checkpoint keeps its transpose `output_weights` [2, H],
    which `bert_tf.checkpoints` converts.

    Args:
      num_outputs: number of logits (1 = regression score).
      dropout_rate: dropout on the input features (0 for NSP, as in the original pretraining head).
      initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, num_outputs, dropout_rate=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(num_outputs, kernel_initializer=initializer(initializer_range),
                                        dtype=self.dtype_policy, name="dense")
        self.supports_masking = True  # per position: a padding mask from a layer below (a BiLSTM) passes through

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, features, training=None):
        return ops.cast(self.dense(self.dropout(features, training=training)), "float32")

    def compute_output_spec(self, features, training=None):
        return keras.KerasTensor(tuple(features.shape[:-1]) + (self.num_outputs,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class FoldChoices(keras.layers.Layer):
    """[batch, choices, seq] -> [batch * choices, seq], so each (context, ending) pair is encoded like a sequence.

    With `like` given, unfolds instead: per-pair scores [batch * choices, 1] -> [batch, choices], taking the batch
    and choice counts from `like` at run time (so the number of choices may differ between batches).
    """

    def call(self, inputs, like=None):
        if like is None:
            return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))
        return ops.reshape(inputs, (ops.shape(like)[0], ops.shape(like)[1]))

    def compute_output_spec(self, inputs, like=None):
        if like is None:
            batch = None if inputs.shape[0] is None or inputs.shape[1] is None else inputs.shape[0] * inputs.shape[1]
            return keras.KerasTensor((batch, inputs.shape[-1]), dtype=inputs.dtype)
        return keras.KerasTensor(tuple(like.shape[:2]), dtype=inputs.dtype)
