import numpy as np
import pytest
import tensorflow as tf

import keras
from bert_tf import (BertClassifier, BertConfig, BertEncoder, BertMultipleChoice, BertPretrainer, BertSpanQA,
                     BertTokenClassifier)
from bert_tf.checkpoints import restore_weights
from bert_tf.layers.precision import global_policy
from bert_tf.models import with_dtype
from tests.conftest import make_batch


def test_encoder_outputs_follow_the_tf_hub_contract(tiny_config):
    encoder = BertEncoder(tiny_config)
    out = encoder(make_batch(tiny_config))
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs", "embedding_output"}
    assert out["embedding_output"].shape == (3, 11, 32)
    assert out["sequence_output"].shape == (3, 11, 32) and out["pooled_output"].shape == (3, 32)
    assert len(out["encoder_outputs"]) == tiny_config.num_hidden_layers
    np.testing.assert_array_equal(out["encoder_outputs"][-1].numpy(), out["sequence_output"].numpy())
    assert sorted(i.name for i in encoder.inputs) == ["input_mask", "input_type_ids", "input_word_ids"]


def test_padding_does_not_change_real_tokens(tiny_config):
    encoder = BertEncoder(tiny_config)
    batch = make_batch(tiny_config, batch=1, seq=6, lengths=[6])
    longer = {k: np.pad(v, ((0, 0), (0, 9))) for k, v in batch.items()}
    longer["input_word_ids"][:, 6:] = 17  # garbage under the mask
    a = encoder(batch)["sequence_output"].numpy()
    b = encoder(longer)["sequence_output"].numpy()[:, :6]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # fp32 softmax over 6 vs 15 keys: ~1e-7 apart


def test_too_long_input_is_a_clear_error(tiny_config):
    encoder = BertEncoder(tiny_config)
    batch = make_batch(tiny_config, batch=1, seq=41, lengths=[41])
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings=40"):
        encoder(batch)


def test_parameter_counts_match_the_paper():
    # the variables' shapes without their 445M initial values, which are never drawn: the variables are forgotten
    with keras.StatelessScope(initialize_variables=False):
        counts = {name: BertEncoder(BertConfig.preset(name)).count_params() for name in ("base", "large")}
    keras.backend.clear_session()
    print("parameters:", counts)
    assert 108e6 < counts["base"] < 112e6  # paper: 110M
    assert 330e6 < counts["large"] < 345e6  # paper: 340M


def all_models(config):
    encoder = BertEncoder(config)
    return [encoder, BertPretrainer(encoder), BertClassifier(encoder, num_classes=3),
            BertClassifier(encoder, num_classes=1), BertTokenClassifier(encoder, num_classes=5), BertSpanQA(encoder),
            BertMultipleChoice(encoder)]


def inputs_for(model, config):
    batch = make_batch(config)
    if isinstance(model, BertPretrainer):
        batch["masked_lm_positions"] = np.array([[1, 2, 0], [3, 4, 5], [1, 1, 1]], "int32")
    if isinstance(model, BertMultipleChoice):
        batch = {k: np.stack([v, v[::-1], v], axis=1) for k, v in batch.items()}
    return batch


def flat(outputs):
    return [np.asarray(t) for t in tf.nest.flatten(outputs)]


def test_task_model_outputs(tiny_config):
    shapes = {type(m).__name__ + str(getattr(m, "num_classes", "")): {k: tuple(v.shape) for k, v in
              tf.nest.map_structure(lambda t: t, m(inputs_for(m, tiny_config))).items() if k != "encoder_outputs"}
              for m in all_models(tiny_config)}
    assert shapes["BertPretrainer"] == {"mlm_logits": (3, 3, 99), "nsp_logits": (3, 2)}
    assert shapes["BertClassifier3"] == {"logits": (3, 3)}
    assert shapes["BertClassifier1"] == {"logits": (3, 1)}
    assert shapes["BertTokenClassifier5"] == {"logits": (3, 11, 5)}
    assert shapes["BertSpanQA"] == {"start_logits": (3, 11), "end_logits": (3, 11)}
    assert shapes["BertMultipleChoice"] == {"logits": (3, 3)}


def test_the_feature_based_probe_reads_its_frozen_encoder_without_dropout(tiny_config, tmp_path):
    """Table 7's probe trains on fixed features: its encoder runs in inference mode in a training call, where Keras
    passes the outer call's mode on to a nested model whatever its own call said (dropout 0.5 changed the logits of
    two training calls by ~1e-2), also once saved and reloaded; an encoder on its own still drops out in training."""
    import dataclasses

    from bert_tf.models import BertFeatureTagger

    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
    batch = make_batch(config)
    probe = BertFeatureTagger(BertEncoder(config), num_classes=3, combination="weighted_sum_all", lstm_units=8,
                              dropout_rate=0.0)
    first, second = (probe(batch, training=True)["logits"].numpy() for _ in range(2))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, probe(batch, training=False)["logits"].numpy())
    probe.save(tmp_path / "probe.keras")
    reloaded = keras.saving.load_model(tmp_path / "probe.keras")
    np.testing.assert_array_equal(reloaded(batch, training=True)["logits"].numpy(), first)
    encoder = BertEncoder(config)
    assert not np.array_equal(*(encoder(batch, training=True)["sequence_output"].numpy() for _ in range(2)))


def test_multiple_choice_scores_each_choice_independently(tiny_config):
    model = BertMultipleChoice(BertEncoder(tiny_config))
    batch = make_batch(tiny_config)
    two = {k: np.stack([v, v[::-1]], 1) for k, v in batch.items()}
    four = {k: np.stack([v, v[::-1], v, v], 1) for k, v in batch.items()}
    a, b = model(two)["logits"].numpy(), model(four)["logits"].numpy()
    np.testing.assert_allclose(a, b[:, :2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[:, 0], b[:, 2], rtol=1e-6, atol=1e-6)  # logits near 0 need an absolute bound


def test_every_model_saves_and_reloads_as_keras_file(tiny_config, tmp_path):
    for model in all_models(tiny_config):
        batch = inputs_for(model, tiny_config)
        before = flat(model(batch))
        path = tmp_path / f"{model.name}.keras"
        model.save(path)
        clone = keras.saving.load_model(path)
        assert type(clone) is type(model) and clone.get_config() == model.get_config()
        # extends Keras's own config (name, trainable, dtype: the encoder's as given, the task models' heads')
        assert keras.Model.get_config(model).keys() <= model.get_config().keys()
        for x, y in zip(before, flat(clone(batch))):
            np.testing.assert_array_equal(x, y)


def _trainable_count(model):
    return len(model.trainable_variables)


def test_what_was_frozen_stays_frozen_after_reloading(tiny_config, tmp_path):
    """These models rebuild their layers from their arguments, and Keras's functional constructor applies
    `trainable=False` before it tracks a layer: a reloaded model trained all 41 variables of a classifier whose
    encoder its user had frozen (2 trainable). The frozen parts, whole or partial, and the accumulation setting
    survive saving; a step of `fit` on the reloaded model leaves the frozen weights as they were."""
    def frozen(build):
        model = build()
        return model, {w.path for w in model.weights} - {w.path for w in model.trainable_weights}

    def encoder_frozen():
        encoder = BertEncoder(tiny_config)
        encoder.trainable = False
        return BertClassifier(encoder, num_classes=3)

    def layer_frozen():
        model = BertClassifier(BertEncoder(tiny_config), num_classes=3)
        model.encoder.embeddings.trainable = model.encoder.transformer_layers[0].attention.trainable = False
        model.gradient_accumulation_steps = 3
        return model

    def all_frozen():
        model = BertPretrainer(BertEncoder(tiny_config))
        model.trainable = False
        return model

    def inside_a_users_model():
        encoder = BertEncoder(tiny_config)
        encoder.trainable = False
        inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in encoder.input}
        return keras.Model(inputs, keras.layers.Dense(2, name="mine")(encoder(inputs)["pooled_output"]))

    for build, expected in ((encoder_frozen, 2), (layer_frozen, None), (all_frozen, 0), (inside_a_users_model, 2)):
        model, untrainable = frozen(build)
        expected = _trainable_count(model) if expected is None else expected
        assert _trainable_count(model) == expected and untrainable, build.__name__
        model.save(tmp_path / "m.keras")
        clone = keras.saving.load_model(tmp_path / "m.keras")
        assert _trainable_count(clone) == expected, build.__name__
        assert {w.path for w in clone.weights} - {w.path for w in clone.trainable_weights} == untrainable
        assert getattr(clone, "gradient_accumulation_steps", 1) == getattr(model, "gradient_accumulation_steps", 1)
    clone.compile(keras.optimizers.SGD(0.5), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [w.numpy() for w in clone.get_layer("bert").weights]
    clone.fit(make_batch(tiny_config), np.array([0, 1, 1]), verbose=0)
    for old, new in zip(before, clone.get_layer("bert").weights):
        np.testing.assert_array_equal(old, new.numpy())


def test_the_heads_compute_in_the_encoders_policy_and_keep_it_when_reloaded(tiny_config, tmp_path):
    """`BertEncoder(config, dtype=...)`, as the CLIs build it, makes a whole model of that policy: the encoder
    reports it and the heads take it (they took the global policy, float32, so a bf16 fine-tuned model read back
    as float32). Saved, the policies are the model's: another global policy at load time changes nothing."""
    from bert_tf.models import BertFeatureTagger

    mixed = BertClassifier(BertEncoder(tiny_config, dtype="mixed_bfloat16"), num_classes=3)
    assert mixed.encoder.dtype_policy.name == mixed.head.dtype_policy.name == mixed.dtype_policy.name == \
        "mixed_bfloat16"
    qa = BertSpanQA(BertEncoder(tiny_config, dtype="mixed_bfloat16"), bilstm_head=True)
    assert {layer.dtype_policy.name for layer in qa.bilstm._flatten_layers()} == {"mixed_bfloat16"}  # its LSTMs
    models = [mixed, BertClassifier(BertEncoder(tiny_config), num_classes=3), BertSpanQA(tiny_config, bilstm_head=True),
              BertFeatureTagger(BertEncoder(tiny_config), num_classes=3, combination="weighted_sum_all", lstm_units=4),
              BertMultipleChoice(BertEncoder(tiny_config))]
    for model in models:  # each sub-layer's policy is saved, the LSTMs' and the layer mix's too
        batch = inputs_for(model, tiny_config)
        expected = flat(model(batch))
        model.save(tmp_path / "m.keras")
        for policy in ("mixed_float16", "float32"):
            with global_policy(policy):
                clone = keras.saving.load_model(tmp_path / "m.keras")
            assert clone.dtype_policy.name == model.dtype_policy.name
            for x, y in zip(flat(clone(batch)), expected):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("policy, tolerance", [("mixed_bfloat16", 0.1), ("mixed_float16", 0.02)])
def test_mixed_precision_keeps_norms_and_logits_in_float32(tiny_config, policy, tolerance):
    reference = BertPretrainer(BertEncoder(tiny_config))
    model = BertPretrainer(BertEncoder(tiny_config, dtype=policy))
    model.set_weights(reference.get_weights())
    batch = inputs_for(model, tiny_config)
    out, ref = model(batch), reference(batch)
    assert out["mlm_logits"].dtype == tf.float32 and out["nsp_logits"].dtype == tf.float32
    assert all(w.dtype == "float32" for w in model.weights)  # variables stay float32
    assert model.encoder.embeddings.layer_norm.compute_dtype == model.encoder.embeddings.compute_dtype
    seq = model.encoder(batch_without_positions(batch))["sequence_output"]
    assert seq.dtype == policy.removeprefix("mixed_")
    scale = np.abs(ref["mlm_logits"].numpy()).max()
    # bf16 keeps 8 bits of mantissa (~0.4 % per op), fp16 11 bits; errors relative to the logit scale
    assert np.abs(out["mlm_logits"].numpy() - ref["mlm_logits"].numpy()).max() / scale < tolerance


def batch_without_positions(batch):
    return {k: v for k, v in batch.items() if k != "masked_lm_positions"}


def test_jit_compile_matches_eager(tiny_config):
    model = BertPretrainer(BertEncoder(tiny_config))
    batch = inputs_for(model, tiny_config)
    eager = model(batch)
    compiled = tf.function(lambda b: model(b), jit_compile=True)(batch)
    for key in eager:
        np.testing.assert_allclose(eager[key].numpy(), compiled[key].numpy(), rtol=1e-4, atol=1e-5)


def _random_weights(model, seed=0):
    """Every weight drawn anew (LayerNorm scales of 1 and zero biases are exact in bfloat16 and would hide a
    rounding) at a scale where a rounded weight moves the outputs."""
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in model.get_weights()])


def test_the_bfloat16_inference_policy_gives_mixed_bfloat16s_outputs_bit_for_bit(tiny_config, tmp_path):
    """`with_dtype(model, "bfloat16")` stores the dense layers' weights in bfloat16, rounded once, where
    mixed_bfloat16 rounds the same float32 weights on every call; the embedding tables, LayerNorms and the MLM
    head's float32 bias stay float32, as mixed_bfloat16 uses them unrounded. Outputs: identical, eagerly and in a
    graph (where TensorFlow fuses the GELU into a bfloat16 GEMM on CPUs with bfloat16 arithmetic)."""
    encoder = BertEncoder(tiny_config, dtype="mixed_bfloat16")
    for model in all_models(tiny_config)[1:] + [encoder]:
        if model is not encoder:
            model = type(model).from_config({**model.get_config(), "encoder": encoder})
        _random_weights(model)
        served = with_dtype(model, "bfloat16")
        stored = {w.path: w.dtype for w in served.weights}
        dense = {w.path for w in getattr(served, "encoder", served).weights if w.path.split("/")[-2] in (
            "query", "key", "value", "output_dense", "intermediate", "dense")}  # the heads keep their policy
        assert {p for p, d in stored.items() if d == "bfloat16"} == dense and len(dense) == 6 * 2 * 2 + 2, stored
        for source, copy in zip(model.weights, served.weights):
            np.testing.assert_array_equal(tf.cast(source, copy.dtype).numpy(), copy.numpy())
        batch = inputs_for(model, tiny_config)
        for run in (lambda m: m(batch, training=False), tf.function(lambda m: m(batch, training=False))):
            for x, y in zip(flat(run(model)), flat(run(served))):
                np.testing.assert_array_equal(x, y)
    path = tmp_path / "served.keras"
    served.save(path)  # the last one: the encoder alone
    reloaded = keras.saving.load_model(path)
    assert [w.dtype for w in reloaded.weights] == [w.dtype for w in served.weights]
    for x, y in zip(flat(served(batch)), flat(reloaded(batch))):
        np.testing.assert_array_equal(x, y)


def test_a_model_with_bfloat16_weights_refuses_to_train_and_restores_float32_checkpoints(tiny_config, tmp_path):
    trained = BertClassifier(BertEncoder(tiny_config), num_classes=3)
    _random_weights(trained)
    prefix = tf.train.Checkpoint(model=trained).save(str(tmp_path / "ckpt"))  # `bert_tf.training`'s format
    served = BertClassifier(BertEncoder(tiny_config, dtype="bfloat16"), num_classes=3)
    assert restore_weights(served, prefix) == prefix
    for source, copy in zip(trained.weights, served.weights):
        np.testing.assert_array_equal(tf.cast(source, copy.dtype).numpy(), copy.numpy())
    served.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="bfloat16 weights are for inference only; train under 'mixed_bfloat16'"):
        served.fit(make_batch(tiny_config), np.array([0, 1, 2]), verbose=0)
