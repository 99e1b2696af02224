import numpy as np

from bert_tf.layers import BertSelfAttention, padding_bias
from tests.conftest import graph_nodes


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


BFLOAT16_EPS = 2.0 ** -8  # unit roundoff: half an ulp, relative


def softmax_dtypes(graph_def) -> set:
    """The dtypes of the softmaxes in a traced graph, its functions' included."""
    import tensorflow as tf

    return {tf.as_dtype(n.attr["T"].type).name for n in graph_nodes(graph_def) if n.op == "Softmax"}


def onednn_takes_bfloat16():
    import tensorflow as tf

    from bert_tf import onednn

    seen = []
    tf.function(lambda: seen.append(onednn.runs_bfloat16_in_float32(tf.bfloat16)) or tf.constant(0))()
    return seen[0]


def test_where_onednn_runs_a_bfloat16_softmax_it_is_the_float32_one_rounded_once():
    """The premise of the bfloat16 inference path: in a graph where oneDNN takes bfloat16 (`runs_bfloat16_in_float32`)
    the softmax of bfloat16 scores, BERT-sized rows with masked keys among them, is within one bfloat16 rounding of
    the float32 softmax of the same scores (bit for bit on the AVX512_BF16 machine that measured it)."""
    import tensorflow as tf

    if not onednn_takes_bfloat16():
        return  # the attention keeps its float32 softmax on this CPU (checked in the next test)
    rng = np.random.default_rng(2)
    scores = rng.normal(0, 3, (4, 12, 128, 128)).astype("float32")
    scores[1, :, :, 90:] -= 10000.0
    scores = tf.cast(scores, tf.bfloat16)
    onednn_path = tf.function(lambda s: tf.nn.softmax(s, axis=-1))(scores)
    float32_path = tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1).numpy().astype("float64")
    error = np.abs(tf.cast(onednn_path, tf.float64).numpy() - float32_path)
    assert (error <= 2 * BFLOAT16_EPS * float32_path).all(), error.max()


def test_bfloat16_inference_gives_the_probabilities_of_the_float32_softmax_path():
    """Under `mixed_bfloat16`, inference in a graph where oneDNN takes bfloat16 hands it the bfloat16 scores
    (scaled and masked in bfloat16: exact for a head size of 4^k) instead of casting them to float32 and back. Its
    probabilities, with padded keys, are within one bfloat16 rounding of the float32-softmax path's (each rounded
    once), and so is the layer's output; training keeps the float32 softmax and its dropout, and so does a CPU
    where oneDNN does not take bfloat16."""
    from unittest import mock

    import keras
    import tensorflow as tf

    from bert_tf.layers import attention

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = BertSelfAttention(hidden_size=64, num_heads=4, dropout_rate=0.1)  # head size 16
        layer.build((None, None, 64))
    finally:
        keras.config.set_dtype_policy("float32")
    rng = np.random.default_rng(3)
    bias = padding_bias(np.array([[1] * 20, [1] * 14 + [0] * 6, [1] * 3 + [0] * 17], "float32"))
    scores = tf.constant(rng.normal(0, 8, (3, 4, 20, 20)), tf.bfloat16)
    x = tf.constant(rng.normal(size=(3, 20, 64)), tf.float32)

    def traced(training):
        probabilities = tf.function(lambda s: layer._probabilities(s, bias, training))
        output = tf.function(lambda x: layer(x, bias, training=training))
        softmaxes = softmax_dtypes(output.get_concrete_function(x).graph.as_graph_def())
        return probabilities(scores), output(x), softmaxes

    takes_bfloat16 = onednn_takes_bfloat16()
    probabilities, output, softmaxes = traced(False)
    assert softmaxes == {"bfloat16" if takes_bfloat16 else "float32"}
    assert traced(True)[2] == {"float32"}
    with mock.patch.object(attention, "runs_bfloat16_in_float32", lambda dtype: False):
        float32_probabilities, float32_output, softmaxes = traced(False)
    assert softmaxes == {"float32"}
    ours, theirs = (tf.cast(p, tf.float64).numpy() for p in (probabilities, float32_probabilities))
    assert (np.abs(ours - theirs) <= 2 * BFLOAT16_EPS * theirs).all()
    assert (theirs[1, :, :, 14:] == 0).all() and (ours[1, :, :, 14:] == 0).all()  # padded keys: exactly 0
    ours, theirs = (tf.cast(o, tf.float32).numpy() for o in (output, float32_output))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=4 * BFLOAT16_EPS * np.abs(theirs).max())


def test_a_head_size_whose_scale_bfloat16_would_round_keeps_the_float32_softmax():
    """1 / sqrt(32) is not a power of two, so scaling bfloat16 scores by it would round: the float32 path stays."""
    import keras
    import tensorflow as tf

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = BertSelfAttention(hidden_size=64, num_heads=2)  # head size 32
        layer.build((None, None, 64))
    finally:
        keras.config.set_dtype_policy("float32")
    x = tf.ones((1, 4, 64))
    graph = tf.function(lambda x: layer(x, training=False)).get_concrete_function(x).graph.as_graph_def()
    assert softmax_dtypes(graph) == {"float32"}
