"""extract_features: the original's JSONL from real BERT weights, checked against HF transformers' hidden states;
the paper's layer combinations."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_extract_features_matches_hf_hidden_states(minilm_dir, tmp_path):
    import torch
    import transformers

    lines = ["The quick brown fox jumps over the lazy dog. ||| It was not amused.",
             "Naïve café déjà vu — 東京 " * 20,  # truncated to max_seq_length
             "", "Short one.", "one ||| two ||| three"]  # split at the last separator, as the original's regex
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = forking.python(["-m", "bert_tf.cli.extract_features", f"--input_file={tmp_path}/input.txt",
                          f"--output_file={tmp_path}/features.jsonl", f"--vocab_file={minilm_dir}/vocab.txt",
                          f"--bert_config_file={minilm_dir}/config.json", f"--init_checkpoint={minilm_dir}",
                          "--layers=-1,-2,-7", "--max_seq_length=24", "--batch_size=2"],  # -7: embeddings
                         cwd=ROOT, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "features.jsonl").read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3, 4]  # every line, the blank one too, as the original
    hf_tokenizer = transformers.BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), do_lower_case=True)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    for record, line in zip(records, lines):
        a, _, b = line.rpartition(" ||| ") if " ||| " in line else (line, "", "")
        encoded = hf_tokenizer(a, b or None, truncation="longest_first", max_length=24, return_tensors="pt")
        tokens = hf_tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
        assert [f["token"] for f in record["features"]] == tokens
        with torch.no_grad():
            hidden = model(**encoded, output_hidden_states=True).hidden_states
        for layer_index in (-1, -2, -7):  # HF's hidden_states[-7] (= [0]) is the embedding output
            ours = np.array([[v for item in f["layers"] if item["index"] == layer_index for v in item["values"]]
                             for f in record["features"]])
            np.testing.assert_allclose(ours, hidden[layer_index][0].numpy(), atol=2e-5)


def test_layer_combinations_and_the_embedding_output(tiny_config):
    """The paper's Table 7 combinations of a real encoder's outputs; layer 0 is the embedding layer's own output
    (after its LayerNorm); the weighted sums start as the mean and learn (their scalars and scale are trainable and
    get gradients), and the layer round-trips through Keras serialization."""
    import keras
    import tensorflow as tf

    from bert_tf import BertEncoder
    from bert_tf.feature_extraction import COMBINATIONS, FeatureCombination
    from tests.conftest import make_batch

    config = dataclasses.replace(tiny_config, num_hidden_layers=5)
    encoder = BertEncoder(config)
    batch = make_batch(config)
    outputs = encoder(batch)
    np.testing.assert_array_equal(outputs["embedding_output"].numpy(), encoder.embeddings(
        batch["input_word_ids"], batch["input_type_ids"]).numpy())
    layers = [t.numpy().astype(np.float64) for t in outputs["encoder_outputs"]]
    expected = {"embeddings": outputs["embedding_output"].numpy(), "last_hidden": layers[-1],
                "second_to_last_hidden": layers[-2], "concat_last_four": np.concatenate(layers[-4:], -1),
                "weighted_sum_last_four": np.mean(layers[-4:], 0), "weighted_sum_all": np.mean(layers, 0),
                "sum_last_four": np.sum(layers[-4:], 0), "sum_all": np.sum(layers, 0)}
    assert set(expected) == set(COMBINATIONS)
    for name, want in expected.items():
        layer = FeatureCombination(name, config.num_hidden_layers)
        np.testing.assert_allclose(layer(outputs).numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
        again = FeatureCombination.from_config(layer.get_config())
        np.testing.assert_allclose(again(outputs).numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
    mix = FeatureCombination("weighted_sum_all", config.num_hidden_layers)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(mix(outputs) * tf.constant(np.random.default_rng(0).normal(size=layers[0].shape),
                                                        tf.float32))
    grads = tape.gradient(loss, mix.trainable_weights)
    assert len(mix.trainable_weights) == 2 and all(np.abs(g.numpy()).sum() > 0 for g in grads)
    mix.mix.scalars.assign([5.0, 0, 0, 0, 0])  # softmax-normalised: almost all weight on the first layer
    weights = mix.mix.weights_of_layers().numpy()
    assert weights.sum() == pytest.approx(1) and weights[0] > 0.97
    np.testing.assert_allclose(mix(outputs).numpy(), np.tensordot(weights, layers, 1), rtol=1e-5, atol=1e-5)
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(mix)).combination == \
        "weighted_sum_all"
    with pytest.raises(ValueError, match="choose one of"):
        FeatureCombination("mean", 5)


def test_layer_numbers_in_both_numberings_and_in_the_written_features(tiny_config, tmp_path, minilm_dir):
    """Negative numbers mean the same in both numberings (-(L+1) = the embedding output); non-negative ones are the
    original's (0 = first Transformer layer) or the paper's (0 = embeddings), and refused without saying which."""
    import json as json_lib

    from bert_tf import BertEncoder
    from bert_tf.feature_extraction import extract, hidden_state_index, hidden_states
    from bert_tf.tokenization import FullTokenizer

    L = 3
    assert [hidden_state_index(n, L) for n in (-1, -3, -4)] == [3, 1, 0]
    assert [hidden_state_index(n, L, "original") for n in (0, 2)] == [1, 3]
    assert [hidden_state_index(n, L, "paper") for n in (0, 3)] == [0, 3]
    for bad, numbering in ((-5, None), (3, "original"), (4, "paper")):
        with pytest.raises(ValueError, match=f"--layers: {bad} is not a layer of a 3-layer model"):
            hidden_state_index(bad, L, numbering)
    with pytest.raises(ValueError, match="--layers=0: .* --layer_numbering=original or --layer_numbering=paper"):
        hidden_state_index(0, L)

    config = dataclasses.replace(tiny_config, vocab_size=30522, num_hidden_layers=L)
    encoder = BertEncoder(config)
    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    out = tmp_path / "f.jsonl"
    extract(encoder, tokenizer, [("hello world", None)], str(out), layers=(0, 1, -1), max_seq_length=16,
            layer_numbering="paper")
    record = json_lib.loads(out.read_text())
    ids = tokenizer.convert_tokens_to_ids([f["token"] for f in record["features"]])
    batch = {"input_word_ids": np.array([ids], np.int32), "input_mask": np.ones((1, len(ids)), np.int32),
             "input_type_ids": np.zeros((1, len(ids)), np.int32)}
    states = hidden_states(encoder(batch))
    assert len(states) == L + 1
    for number, index in ((0, 0), (1, 1), (-1, 3)):
        values = np.array([[v for item in f["layers"] if item["index"] == number for v in item["values"]]
                           for f in record["features"]])
        np.testing.assert_allclose(values, states[index].numpy()[0], atol=1e-6)


def test_values_are_rounded_as_pythons_round_rounds_them():
    """`six_decimals` (vectorised) against `round(float(v), 6)`, the original's, value by value and in their JSON
    text: float32 values of every exponent (random bit patterns), values one ulp around the halfway points of the
    sixth decimal, 16-bit values, and float64 ones (which take Python's round: NumPy's differs on float64 halfway
    points such as 2.5e-06)."""
    import ml_dtypes

    from bert_tf.feature_extraction import six_decimals

    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = ((rng.integers(-5_000_000, 5_000_000, 100_000) + 0.5) / 1e6).astype(np.float32)
    cases = [bits[np.isfinite(bits)], halves, np.nextafter(halves, np.float32(np.inf)),
             np.nextafter(halves, np.float32(-np.inf)), np.array([0.0, -0.0, -4e-7, 5e-7, 1.5e-6, 3.4e38], np.float32),
             rng.normal(0, 3, 20_000).astype(np.float16), rng.normal(0, 3, 20_000).astype(ml_dtypes.bfloat16),
             rng.normal(0, 3, 2_000), (rng.integers(-5_000_000, 5_000_000, 20_000) + 0.5) / 1e6]
    for values in cases:
        want = [round(float(v), 6) for v in values]
        got = six_decimals(values.reshape(-1, 2) if values.size % 2 == 0 else values).ravel().tolist()
        assert json.dumps(got) == json.dumps(want), values.dtype


def test_repeated_extracts_share_one_traced_encoder_that_goes_with_it(tiny_config, tmp_path, minilm_dir):
    """The traced forward pass is made once per encoder: later `extract` calls (batches of 2, then a last one of 1)
    trace nothing new, and it is released with the encoder."""
    import gc
    import weakref

    from bert_tf import BertEncoder
    from bert_tf.feature_extraction import _TRACED, _traced_states, extract
    from bert_tf.tokenization import FullTokenizer

    encoder = BertEncoder(dataclasses.replace(tiny_config, vocab_size=30522))
    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    pairs = [("hello world", None), ("a second line", "and its pair"), ("third", None)]
    for round_ in range(3):
        extract(encoder, tokenizer, pairs, str(tmp_path / f"f{round_}.jsonl"), layers=(-1,), max_seq_length=16,
                batch_size=2)
    assert _traced_states(encoder).experimental_get_tracing_count() <= 2
    assert (tmp_path / "f0.jsonl").read_text() == (tmp_path / "f2.jsonl").read_text()
    held, traced = weakref.ref(encoder), weakref.ref(_TRACED[encoder])
    del encoder
    gc.collect()
    assert held() is None and traced() is None  # the cache kept neither the encoder nor its traces
