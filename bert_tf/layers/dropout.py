"""Dropout that keeps the paper's rate and scale under a 16-bit compute dtype, and stays cheap under XLA."""

import keras
import tensorflow as tf
from keras import ops

_SIXTEEN_BIT = ("bfloat16", "float16")


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
    """Keras's `Dropout` with the same masks from the same seed, except in two respects.

    A bfloat16 or float16 input is dropped in float32. Keras drops a tensor in its own dtype: in bfloat16 the
    uniform draw has 128 levels and `1 / (1 - rate)` is rounded to 8 bits, so under `mixed_bfloat16` a rate of 0.1
    drops 10.13 % of the values and scales the others by 1.109375, and every dropout shrinks its output by 0.3 % on
    average where the original's (float32) leaves it unchanged. Here the draw, the comparison and the scale are
    float32 and only the result is rounded to the input's dtype, so the masks are those a float32 model draws.

    The random numbers are Philox's, named outright (`_rng_algorithm`). Keras leaves TensorFlow to pick the
    algorithm ("auto_select"), which is Philox on CPUs and GPUs without XLA, so the masks are Keras's there bit for
    bit. Under XLA, "auto_select" compiles to a generator that XLA's CPU compiler, when a shape of random numbers
    occurs once in the program, fuses into the dropout element by element, re-deriving the key for every number:
    many times slower than the Philox XLA builds when the algorithm is named (`python -m bench.profile
    --dropout`). XLA's Philox draws other masks than TensorFlow's kernel from the same seed (as "auto_select" does
    under XLA), equally random.
    """

    def call(self, inputs, training=False):
        if not (training and self.rate > 0):
            return inputs
        if self.rate >= 1.0:
            return ops.zeros_like(inputs)
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        x = ops.cast(inputs, "float32") if dtype in _SIXTEEN_BIT else inputs
        seed = self.seed_generator.next()
        if seed.dtype != tf.int32:  # as Keras: the generator's int64 state folded into the int32 the kernels take
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        noise_shape = None
        if self.noise_shape is not None:
            shape = tf.shape(x)
            noise_shape = [shape[i] if size is None else size for i, size in enumerate(self.noise_shape)]
        dropped = tf.nn.experimental.stateless_dropout(x, rate=self.rate, seed=seed, rng_alg=_rng_algorithm(),
                                                       noise_shape=noise_shape)
        return ops.cast(dropped, dtype)


def _rng_algorithm():
    """Philox, except under a TPU strategy, where TensorFlow's own choice for the device stays."""
    tpu = (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)
    return "auto_select" if isinstance(tf.distribute.get_strategy(), tpu) else "philox"
