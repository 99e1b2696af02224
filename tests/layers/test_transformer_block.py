import numpy as np

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
