import keras
import numpy as np
import pytest

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
