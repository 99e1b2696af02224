"""Dropout that keeps the paper's rate and scale under a 16-bit compute dtype."""

import keras
from keras import ops

_SIXTEEN_BIT = ("bfloat16", "float16")


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
    """Keras's `Dropout`, except that a bfloat16 or float16 input is dropped in float32.

    Keras drops a tensor in its own dtype. In bfloat16 the uniform draw has 128 levels and `1 / (1 - rate)` is
    rounded to 8 bits, so under `mixed_bfloat16` a rate of 0.1 drops 10.13 % of the values and scales the others by
    1.109375: every dropout shrinks its output by 0.3 % on average, where the original's (float32) leaves it
    unchanged. Here the draw, the comparison and the scale are float32 and only the result is rounded to the input's
    dtype, so the masks are those a float32 model draws from the same seed. Float32 input is dropped by Keras itself.
    """

    def call(self, inputs, training=False):
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        if not (training and self.rate > 0) or dtype not in _SIXTEEN_BIT:
            return super().call(inputs, training=training)
        return ops.cast(super().call(ops.cast(inputs, "float32"), training=True), dtype)
