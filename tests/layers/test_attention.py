import numpy as np

from bert_tf.layers import BertSelfAttention, padding_bias


def reference_attention(layer, x, mask):
    """Plain numpy multi-head attention with the original's -10000 additive mask."""
    def dense(d, v):
        return v @ d.kernel.numpy() + d.bias.numpy()

    b, s, h = x.shape
    heads, size = layer.num_heads, layer.head_size
    split = lambda t: t.reshape(b, s, heads, size).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(dense(d, x)) for d in (layer.query, layer.key, layer.value))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + (1.0 - mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    return dense(layer.output_dense, context)


def test_matches_numpy_reference_with_padding():
    rng = np.random.default_rng(0)
    layer = BertSelfAttention(hidden_size=16, num_heads=4, dropout_rate=0.0)
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "float32")
    out = layer(x, padding_bias(mask)).numpy()
    np.testing.assert_allclose(out, reference_attention(layer, x, mask), rtol=1e-4, atol=1e-5)


def test_padded_keys_do_not_change_real_positions():
    rng = np.random.default_rng(1)
    layer = BertSelfAttention(hidden_size=16, num_heads=2, dropout_rate=0.0)
    x = rng.normal(size=(1, 6, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0]], "float32")
    noisy = x.copy()
    noisy[:, 4:] = rng.normal(size=(1, 2, 16)) * 100
    a = layer(x, padding_bias(mask)).numpy()
    b = layer(noisy, padding_bias(mask)).numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)
    unmasked = layer(noisy, padding_bias(np.ones_like(mask))).numpy()
    assert np.abs(unmasked[:, :4] - a[:, :4]).max() > 1e-3  # the mask is what made them equal


def test_config_round_trip():
    layer = BertSelfAttention(hidden_size=16, num_heads=4, dropout_rate=0.3, initializer_range=0.05)
    assert BertSelfAttention.from_config(layer.get_config()).get_config() == layer.get_config()
