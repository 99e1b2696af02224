"""The input embeddings of BERT: word piece + segment + learned absolute position, then LayerNorm and dropout."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.activations import initializer
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.layer_norm import LayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Sums the token, segment (token type) and position embeddings, then normalises (paper fig. 2).

    The word table is public as `word_embeddings` because the masked-LM decoder reuses it (tied weights). Position
    embeddings are sliced to the input length, so sequences of any length up to `max_position_embeddings` run
    without padding to the maximum.

    Args:
      vocab_size, hidden_size, type_vocab_size, max_position_embeddings: table sizes.
      initializer_range: stddev of the truncated-normal initializer.
      layer_norm_eps: LayerNorm epsilon (original: 1e-12).
      dropout_rate: dropout after the LayerNorm.
    """

    def __init__(self, vocab_size, hidden_size, type_vocab_size=2, max_position_embeddings=512,
                 initializer_range=0.02, layer_norm_eps=1e-12, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout_rate
        self.layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = initializer(self.initializer_range)
        # not autocast: under a mixed policy the rows are gathered and summed in the variables' float32 and the
        # sum cast once, where an autocast table would be cast whole (30,522 rows) on every call
        self.word_embeddings = self.add_weight(shape=(self.vocab_size, self.hidden_size), initializer=init,
                                               name="word_embeddings", autocast=False)
        self.token_type_embeddings = self.add_weight(shape=(self.type_vocab_size, self.hidden_size),
                                                     initializer=init, name="token_type_embeddings", autocast=False)
        self.position_embeddings = self.add_weight(shape=(self.max_position_embeddings, self.hidden_size),
                                                   initializer=init, name="position_embeddings", autocast=False)
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        tf.debugging.assert_less_equal(
            seq_length, self.max_position_embeddings,
            message=f"sequence longer than max_position_embeddings={self.max_position_embeddings}; truncate the "
                    "inputs (max_seq_length) or use a model with a larger position table")
        words = ops.take(self.word_embeddings, input_word_ids, axis=0)
        types = ops.take(self.token_type_embeddings, input_type_ids, axis=0)
        positions = self.position_embeddings[:seq_length]
        x = ops.cast(words + types + positions[None], self.compute_dtype)
        return self.dropout(self.layer_norm(x), training=training)

    def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None):
        return tuple(input_word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size, type_vocab_size=self.type_vocab_size,
                      max_position_embeddings=self.max_position_embeddings,
                      initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
                      dropout_rate=self.dropout_rate)
        return config
