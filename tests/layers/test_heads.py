import numpy as np

from bert_tf.layers import BertPooler, ClassificationHead, FoldChoices, MaskedLMHead


def test_pooler_reads_only_the_first_token():
    pooler = BertPooler(hidden_size=8)
    x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
    changed = x.copy()
    changed[:, 1:] += 5
    np.testing.assert_array_equal(pooler(x).numpy(), pooler(changed).numpy())
    ref = np.tanh(x[:, 0] @ pooler.dense.kernel.numpy() + pooler.dense.bias.numpy())
    np.testing.assert_allclose(pooler(x).numpy(), ref, rtol=1e-5, atol=1e-6)
    frozen = BertPooler(hidden_size=8, initializer_range=0.05, trainable=False, name="frozen_pooler")
    clone = BertPooler.from_config(frozen.get_config())
    assert clone.get_config() == frozen.get_config() and not clone.trainable and clone.name == "frozen_pooler"


def test_masked_lm_head_predicts_at_positions_with_tied_decoder():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(30, 8)).astype("float32")
    head = MaskedLMHead(vocab_size=30, hidden_size=8, activation="gelu_tanh")
    seq = rng.normal(size=(2, 6, 8)).astype("float32")
    positions = np.array([[1, 4, 0], [5, 2, 2]], "int32")
    logits = head(seq, positions, table).numpy()
    assert logits.shape == (2, 3, 30) and logits.dtype == np.float32
    head.output_bias.assign(rng.normal(size=30).astype("float32"))
    # predicting at every position then gathering must give the same rows
    everywhere = head(seq, np.tile(np.arange(6, dtype="int32"), (2, 1)), table).numpy()
    picked = head(seq, positions, table).numpy()
    # logits are O(1-10): an element near 0 needs an absolute tolerance (2.9e-7 seen in CI across batch shapes)
    np.testing.assert_allclose(picked, np.take_along_axis(everywhere, positions[:, :, None], axis=1), rtol=1e-5,
                               atol=1e-5)
    # the decoder is the embedding table: scaling the table scales the logits before the bias
    bias = head.output_bias.numpy()
    np.testing.assert_allclose(head(seq, positions, 2 * table).numpy() - bias, 2 * (picked - bias), rtol=1e-4,
                               atol=1e-4)


def test_classification_head_and_fold_choices_round_trip():
    head = ClassificationHead(3, dropout_rate=0.1)
    assert head(np.ones((4, 8), "float32")).shape == (4, 3)
    assert ClassificationHead.from_config(head.get_config()).get_config() == head.get_config()
    fold = FoldChoices()
    x = np.arange(2 * 3 * 5, dtype="int32").reshape(2, 3, 5)
    flat = fold(x).numpy()
    np.testing.assert_array_equal(flat, x.reshape(6, 5))
    np.testing.assert_array_equal(fold(flat[:, :1], like=x).numpy(), x[:, :, 0])
    head = MaskedLMHead(vocab_size=30, hidden_size=8, activation="gelu", layer_norm_eps=1e-6)
    assert MaskedLMHead.from_config(head.get_config()).get_config() == head.get_config()


def test_masked_lm_head_transform_activation_is_computed_in_float32_under_mixed_bfloat16():
    """The MLM transform's GELU, like the encoder's, is the float32 one rounded once on a bfloat16 input, eagerly,
    in a graph and under XLA (Keras's own runs it op by op in bfloat16: `test_transformer_block`)."""
    import keras
    import tensorflow as tf

    from tests.layers.test_transformer_block import _bfloat16_grid, _within_an_ulp

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        head = MaskedLMHead(vocab_size=10, hidden_size=64)
    finally:
        keras.config.set_dtype_policy("float32")
    x = _bfloat16_grid()
    h = tf.constant(x, tf.bfloat16)
    for run in (head.activation_fn, tf.function(head.activation_fn), tf.function(head.activation_fn, jit_compile=True)):
        out = run(h)
        assert out.dtype == tf.bfloat16 and _within_an_ulp(tf.cast(out, tf.float64).numpy(), x, "gelu_tanh").all()
    half = tf.constant(x, tf.float16)  # mixed_float16 too: the float32 GELU rounded once to float16
    expected = tf.cast(keras.activations.gelu(tf.cast(half, tf.float32), approximate=True), tf.float16)
    np.testing.assert_array_equal(head.activation_fn(half).numpy(), expected.numpy())
