import numpy as np

from bert_tf.layers import BertEmbeddings


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_sum_of_three_tables_then_layer_norm():
    layer = BertEmbeddings(vocab_size=20, hidden_size=8, type_vocab_size=2, max_position_embeddings=10,
                           layer_norm_eps=1e-12)
    ids = np.array([[3, 4, 5, 0], [7, 8, 0, 0]], "int32")
    types = np.array([[0, 0, 1, 1], [0, 1, 0, 0]], "int32")
    out = layer(ids, types).numpy()
    summed = (layer.word_embeddings.numpy()[ids] + layer.token_type_embeddings.numpy()[types]
              + layer.position_embeddings.numpy()[None, :4])
    ref = layer_norm(summed, layer.layer_norm.gamma.numpy(), layer.layer_norm.beta.numpy(), 1e-12)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)  # fp32 LayerNorm: ~1e-6 absolute


def test_any_sequence_length_up_to_the_table_and_dropout_only_in_training():
    layer = BertEmbeddings(vocab_size=20, hidden_size=8, max_position_embeddings=10, dropout_rate=0.5)
    short = layer(np.ones((1, 3), "int32"), np.zeros((1, 3), "int32"))
    full = layer(np.ones((1, 10), "int32"), np.zeros((1, 10), "int32"))
    # LayerNorm outputs are O(1); an element near 0 needs an absolute tolerance (fp32 sums of another length
    # differ in the last bits: 3e-8 seen in CI)
    np.testing.assert_allclose(short.numpy(), full.numpy()[:, :3], rtol=1e-6, atol=1e-6)
    trained = layer(np.ones((1, 10), "int32"), np.zeros((1, 10), "int32"), training=True).numpy()
    assert (trained == 0).mean() > 0.2


def test_config_round_trip():
    layer = BertEmbeddings(vocab_size=20, hidden_size=8, type_vocab_size=3, max_position_embeddings=10,
                           initializer_range=0.1, layer_norm_eps=1e-6, dropout_rate=0.2, name="embeddings")
    clone = BertEmbeddings.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
