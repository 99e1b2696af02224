import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertEncoder, BertPretrainer
from bert_tf.layers import Dropout

SHAPE = (4096, 1024)
RATE = 0.1


def dropped(policy, seed=7):
    """Our Dropout at `policy` over values in [1, 2): (output as float64, the input as the layer's dtype sees it)."""
    x = np.random.default_rng(0).uniform(1, 2, SHAPE).astype("float32")
    layer = Dropout(RATE, seed=seed, dtype=policy)
    seen = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(x, layer.compute_dtype), "float64"))
    out = keras.ops.convert_to_numpy(keras.ops.cast(layer(x, training=True), "float64"))
    unchanged = keras.ops.convert_to_numpy(keras.ops.cast(layer(x, training=False), "float64"))
    assert np.array_equal(unchanged, seen)  # not in inference
    return out, seen


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_sixteen_bit_inputs_are_dropped_at_the_exact_rate_and_scale(policy):
    """Keras drops a bfloat16 tensor with a 128-level draw and a rounded 1 / (1 - rate): 10.13 % dropped and the
    mean shrunk by 0.3 % at rate 0.1. Ours draws in float32: the masks are the float32 layer's from the same seed,
    the dropped share is the rate within sampling noise and the kept values are x / (1 - rate) rounded once."""
    reference, _ = dropped("float32")
    out, seen = dropped(policy)
    assert np.array_equal(out == 0, reference == 0)  # the same draw as in float32
    sigma = (RATE * (1 - RATE) / out.size) ** 0.5
    assert abs((out == 0).mean() - RATE) < 5 * sigma
    assert abs(out.sum() / seen.sum() - 1) < 1e-3  # Keras's bfloat16 dropout: 0.997
    kept = out != 0
    epsilon = {"mixed_bfloat16": 2.0 ** -8, "mixed_float16": 2.0 ** -11}[policy]  # half an ulp, relative
    np.testing.assert_allclose(out[kept], seen[kept] / (1 - RATE), rtol=epsilon)


def test_every_dropout_in_the_models_is_ours(tiny_config):
    for model in (BertPretrainer(BertEncoder(tiny_config)), BertClassifier(BertEncoder(tiny_config), 3)):
        layers = list(model._flatten_layers())
        assert any(isinstance(layer, Dropout) for layer in layers)
        assert not [layer.name for layer in layers if type(layer) is keras.layers.Dropout]


@pytest.mark.parametrize("noise_shape", [None, (None, 1, None)])
def test_masks_are_keras_masks_without_xla(noise_shape):
    """Without XLA the generator is the one Keras's own layer gets from TensorFlow (Philox), so the same seed gives
    Keras's masks bit for bit, eagerly and in a graph, call after call."""
    x = np.random.default_rng(1).uniform(1, 2, (16, 32, 48)).astype("float32")
    ours, keras_layer = (cls(RATE, seed=11, noise_shape=noise_shape) for cls in (Dropout, keras.layers.Dropout))
    for run in (lambda layer: layer(x, training=True), tf.function(lambda layer: layer(x, training=True))):
        for _ in range(2):
            np.testing.assert_array_equal(run(ours).numpy(), run(keras_layer).numpy())


def test_under_xla_the_rate_and_scale_hold():
    """Under XLA the masks come from XLA's Philox (not TensorFlow's kernel): still the rate within sampling noise,
    the kept values scaled by 1 / (1 - rate), a new mask per call and the same masks from the same seed."""
    x = np.random.default_rng(2).uniform(1, 2, SHAPE).astype("float32")

    def masks(seed):
        layer = Dropout(RATE, seed=seed)
        step = tf.function(lambda: layer(x, training=True), jit_compile=True)
        return [step().numpy() for _ in range(2)]

    first, second = masks(5)
    sigma = (RATE * (1 - RATE) / first.size) ** 0.5
    for out in (first, second):
        assert abs((out == 0).mean() - RATE) < 5 * sigma
        np.testing.assert_allclose(out[out != 0], x[out != 0] / (1 - RATE), rtol=1e-6)
    assert not np.array_equal(first == 0, second == 0)
    again = masks(5)
    np.testing.assert_array_equal(again[0], first)
    np.testing.assert_array_equal(again[1], second)


def test_the_generator_is_named_except_on_tpus(monkeypatch):
    """Philox outright (XLA compiles "auto_select" into a far slower generator on CPUs), and under a TPU strategy
    TensorFlow's own choice for the device."""
    from bert_tf.layers import dropout

    assert dropout._rng_algorithm() == "philox"
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        assert dropout._rng_algorithm() == "philox"
    tpu = object.__new__(tf.distribute.TPUStrategy)  # no TPU here: only the type is looked at
    monkeypatch.setattr(tf.distribute, "get_strategy", lambda: tpu)
    assert dropout._rng_algorithm() == "auto_select"
