import numpy as np
import pytest

from bert_tf.layers import BertTransformerBlock, padding_bias
from bert_tf.layers.activations import get_activation
from tests.layers.test_attention import reference_attention
from tests.layers.test_embeddings import layer_norm


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def test_post_layer_norm_block_matches_reference():
    rng = np.random.default_rng(0)
    block = BertTransformerBlock(hidden_size=16, num_heads=4, intermediate_size=64, activation="gelu_tanh",
                                 dropout_rate=0.0, attention_dropout_rate=0.0, layer_norm_eps=1e-12)
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], "float32")
    out = block(x, padding_bias(mask)).numpy()

    def ln(layer, v):
        return layer_norm(v, layer.gamma.numpy(), layer.beta.numpy(), 1e-12)

    h = ln(block.attention_layer_norm, x + reference_attention(block.attention, x, mask))
    inner = gelu_tanh(h @ block.intermediate.kernel.numpy() + block.intermediate.bias.numpy())
    ffn = inner @ block.output_dense.kernel.numpy() + block.output_dense.bias.numpy()
    ref = ln(block.output_layer_norm, h + ffn)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-5)


def test_exact_and_tanh_gelu_are_the_two_published_formulas():
    from math import erf

    x = np.linspace(-5, 5, 201).astype("float32")
    exact = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x.astype("float64")])
    np.testing.assert_allclose(get_activation("gelu")(x).numpy(), exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(get_activation("gelu_tanh")(x).numpy(), gelu_tanh(x.astype("float64")), rtol=1e-5,
                               atol=1e-6)
    assert np.abs(exact - gelu_tanh(x.astype("float64"))).max() > 1e-4  # distinguishable, so the choice matters


def test_config_round_trip():
    block = BertTransformerBlock(hidden_size=16, num_heads=2, intermediate_size=32, activation="gelu",
                                 dropout_rate=0.2, attention_dropout_rate=0.3, layer_norm_eps=1e-6)
    clone = BertTransformerBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config() and clone.activation == "gelu"


def _bfloat16_grid():
    """Every bfloat16 value with magnitude in [2^-6, 8), both signs, as a [36, 64] float32 array."""
    magnitudes = np.array([2.0 ** e * (1 + m / 128) for e in range(-6, 3) for m in range(128)], "float32")
    return np.concatenate([-magnitudes, magnitudes]).reshape(-1, 64)


def _within_an_ulp(out, x, name):
    """Where `out` (bfloat16 outputs as float64) is within one bfloat16 step of the float64 activation of `x`, plus
    1e-6 for the float32 GELU's own cancellation in its far negative tail."""
    from math import erf

    x = x.astype("float64")
    exact = {"gelu": x * (1 + np.vectorize(erf)(x / np.sqrt(2))) / 2, "gelu_tanh": gelu_tanh(x)}[name]
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** -126))) - 7)
    return np.abs(out - exact) <= ulp + 1e-6


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh"])
def test_the_ffn_activation_is_computed_in_float32_under_mixed_bfloat16(name):
    """Keras runs a GELU on bfloat16 op by op, rounding after each op (its negative tail zeroed or doubled). The
    block's activation is the float32 one rounded once, or better, wherever it runs: eagerly, in a graph (fused into
    the oneDNN GEMM where TensorFlow does that), under XLA, in training and in inference. Its GEMM is the identity
    here, so the activation's input is exactly the bfloat16 grid."""
    import keras
    import tensorflow as tf

    x = _bfloat16_grid()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        block = BertTransformerBlock(hidden_size=64, num_heads=1, intermediate_size=64, activation=name)
        block.build((None, None, 64))
    finally:
        keras.config.set_dtype_policy("float32")
    block.intermediate.kernel.assign(np.eye(64, dtype="float32"))
    block.intermediate.bias.assign(np.zeros(64, "float32"))
    h = tf.constant(x, tf.bfloat16)

    def ffn_activation(training):
        return lambda h: block._activation(block._intermediate(h), training)

    runs = {"eager": ffn_activation(False)(h), "eager training": ffn_activation(True)(h),
            "graph": tf.function(ffn_activation(False))(h), "graph training": tf.function(ffn_activation(True))(h),
            "xla": tf.function(ffn_activation(False), jit_compile=True)(h)}
    for where, out in runs.items():
        assert out.dtype == tf.bfloat16, where
        ok = _within_an_ulp(tf.cast(out, tf.float64).numpy(), x, name)
        assert ok.all(), (where, x[~ok][:5])
    keras_own = tf.cast(get_activation(name, in_float32=False)(h), tf.float64).numpy()
    assert (~_within_an_ulp(keras_own, x, name)).mean() > 0.05  # what the float32 computation is for


@pytest.mark.parametrize("policy", ["float32", "bfloat16"])
def test_a_graph_of_unknown_batch_and_length_computes_what_one_of_known_shapes_does(policy):
    """TensorFlow's CPU graph optimizer fuses a residual add into the GEMM before it only where it can tell that
    both have the same shape; the fused add is computed on the float32 accumulator and rounded once. A SavedModel's
    signature (unknown batch and length) and `model.predict` (known shapes) must fuse alike, or the same model serves
    different numbers from what it predicts."""
    import tensorflow as tf

    block = BertTransformerBlock(hidden_size=32, num_heads=2, intermediate_size=64, dtype=policy)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(4, 24, 32)), block.compute_dtype)
    bias = padding_bias(np.ones((4, 24), "float32"))
    block(x, bias)
    for variable in block.weights:  # weights large enough that the attention output is not small beside x
        variable.assign(rng.normal(scale=0.5, size=variable.shape).astype(variable.dtype))
    known = tf.function(lambda x, bias: block(x, bias, training=False))
    unknown = tf.function(lambda x, bias: block(x, bias, training=False),
                          input_signature=[tf.TensorSpec([None, None, 32], x.dtype),
                                           tf.TensorSpec([None, 1, 1, None], tf.float32)])
    np.testing.assert_array_equal(tf.cast(unknown(x, bias), tf.float32), tf.cast(known(x, bias), tf.float32))
