"""keras-hub's BERT in and out, against keras-hub itself (requirements-test.txt): a BertBackbone preset saved by
keras-hub with perturbed weights (so that a swapped or transposed tensor cannot pass) loads into an encoder that
gives keras-hub's outputs on a batch with padding; our encoder written as a preset loads with
`BertBackbone.from_preset` and gives ours; ours -> keras-hub -> ours is bit-identical; convert_checkpoint and
--init_checkpoint take presets; what a BertBackbone cannot hold, and presets of other families, are refused."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertConfig, BertEncoder, checkpoints
from bert_tf.checkpoints import CheckpointError
from bert_tf.tokenization import VocabError

import keras_hub  # noqa: E402  (a test requirement; missing it must fail, not skip)

SIZES = dict(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=32, intermediate_dim=64,
             max_sequence_length=64, num_segments=2)


def _perturb(weights, seed):
    rng = np.random.default_rng(seed)
    for weight in weights:
        weight.assign(rng.normal(0.0, 0.3, tuple(weight.shape)).astype("float32")
                      + (1.0 if weight.path.endswith("gamma") else 0.0))


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 100, (3, 12))
    mask = np.ones((3, 12), "int32")
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    segments = np.zeros_like(ids)
    segments[:, 6:] = 1
    return ids, mask, segments


def _compare(ours, backbone):
    """Largest difference of the sequence output at real tokens and of the pooled output, over their scale."""
    ids, mask, segments = _batch()
    theirs = backbone({"token_ids": ids, "padding_mask": mask, "segment_ids": segments})
    mine = ours({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments})
    real = mask.astype(bool)
    scale = np.abs(theirs["sequence_output"].numpy()).max()
    return (np.abs(mine["sequence_output"].numpy() - theirs["sequence_output"].numpy())[real].max() / scale,
            np.abs(mine["pooled_output"].numpy() - theirs["pooled_output"].numpy()).max())


@pytest.mark.reference
def test_keras_hub_presets_in_and_out_match_keras_hub(tmp_path):
    backbone = keras_hub.models.BertBackbone(**SIZES)
    _perturb(backbone.weights, 0)
    backbone.save_to_preset(str(tmp_path / "preset"))
    encoder = checkpoints.load_keras_hub(str(tmp_path / "preset"))
    assert encoder.bert_config.hidden_act == "gelu_tanh" and encoder.bert_config.num_attention_heads == 4
    sequence, pooled = _compare(encoder, backbone)
    assert sequence < 1e-5 and pooled < 1e-5, (sequence, pooled)
    # a .weights.h5 with the backbone's config.json beside it
    (tmp_path / "h5").mkdir()
    backbone.save_weights(str(tmp_path / "h5" / "bert.weights.h5"))
    (tmp_path / "h5" / "config.json").write_text((tmp_path / "preset" / "config.json").read_text())
    from_h5 = checkpoints.load_keras_hub(str(tmp_path / "h5" / "bert.weights.h5"))
    for a, b in zip(from_h5.weights, encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    ours = BertEncoder(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, hidden_act="gelu_tanh"))
    _perturb(ours.weights, 1)
    fmt, written = checkpoints.convert(_original(ours, tmp_path), str(tmp_path / "out"),
                                       output_format_name="keras_hub")
    assert fmt == "keras_hub"
    loaded = keras_hub.models.BertBackbone.from_preset(written)
    sequence, pooled = _compare(ours, loaded)
    assert sequence < 1e-5 and pooled < 1e-5, (sequence, pooled)
    back = checkpoints.load_keras_hub(written)  # ours -> keras-hub -> ours
    for a, b in zip(back.weights, ours.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # --init_checkpoint=<preset>: a classifier starts from the backbone, its head as initialised
    classifier = BertClassifier(ours.bert_config, num_classes=3)
    assert checkpoints.restore_weights(classifier, written) == written
    for a, b in zip(classifier.encoder.weights, ours.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # and from the preset to the other formats
    fmt, converted = checkpoints.convert(written, str(tmp_path / "again.ckpt"))
    assert fmt == "original" and json.loads((tmp_path / "bert_config.json").read_text())["num_attention_heads"] == 4


def _original(encoder, tmp_path):
    """`encoder` written as an original checkpoint (the input convert_checkpoint reads)."""
    directory = tmp_path / "original"
    directory.mkdir()
    checkpoints.save_original(encoder, str(directory / "bert_model.ckpt"))
    encoder.bert_config.to_json_file(str(directory / "bert_config.json"))
    return str(directory / "bert_model.ckpt")


@pytest.mark.reference
def test_what_a_bert_backbone_cannot_hold_is_refused(tmp_path):
    erf = BertEncoder(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64, hidden_act="gelu"))
    with pytest.raises(CheckpointError, match=r"cannot hold this model: hidden_act='gelu' \(BertBackbone computes "
                                              r"the tanh GELU"):
        checkpoints.save_keras_hub(erf, str(tmp_path / "erf"))
    assert not os.path.exists(tmp_path / "erf")
    with pytest.raises(CheckpointError, match="--model=pretrainer: a keras-hub preset written here holds the "
                                              "encoder"):
        checkpoints.convert(_original(erf, tmp_path), str(tmp_path / "kh"), model="pretrainer",
                            output_format_name="keras_hub")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"afile: the name does not say what to write.*--output_format \(one of "
                                         r"original, keras, hf, keras_hub\)"):
        checkpoints.output_format(str(tmp_path / "afile"))
    # a preset of another family
    other = keras_hub.models.DistilBertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=32,
                                                intermediate_dim=64, max_sequence_length=64)
    other.save_to_preset(str(tmp_path / "distil"))
    with pytest.raises(CheckpointError, match="a keras-hub DistilBertBackbone preset, not BertBackbone"):
        checkpoints.load_keras_hub(str(tmp_path / "distil"))
    # a keras-hub preset into a model with the erf GELU
    backbone = keras_hub.models.BertBackbone(**SIZES)
    backbone.save_to_preset(str(tmp_path / "preset"))
    model = BertEncoder(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=64, hidden_act="gelu"))
    with pytest.raises(CheckpointError, match="its encoder computes hidden_act='gelu_tanh', the model's config has "
                                              "'gelu'; set hidden_act to gelu_tanh"):
        checkpoints.restore_weights(model, str(tmp_path / "preset"))
    # ... and into one with another number of heads: the [H, H] projections would load and compute another model
    model = BertEncoder(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=64, hidden_act="gelu_tanh"))
    with pytest.raises(CheckpointError, match="its encoder has 4 attention heads, the model's config 2"):
        checkpoints.restore_weights(model, str(tmp_path / "preset"))


@pytest.mark.reference
def test_a_fine_tuned_classifier_becomes_a_keras_hub_text_classifier(minilm_dir, tmp_path, caplog):
    """run_classifier's output directory (weights perturbed after training) written with --model=classifier loads
    with BertTextClassifier.from_preset: its preprocessor packs raw text pairs as ours does and its logits are ours."""
    import keras

    from bert_tf.finetuning import MODEL_FILE, FinetuneOptions
    from bert_tf.serving import Preprocessor
    from bert_tf.tasks import get_task
    from bert_tf.tasks.classification import run_classifier
    from tests.tasks.test_finetuning import _pair_task

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model_dir = str(tmp_path / "model")
    run_classifier(get_task("mrpc"), config, os.path.join(minilm_dir, "vocab.txt"), model_dir,
                   FinetuneOptions(do_train=True, max_seq_length=24, train_batch_sizes=8, num_train_epochs=1),
                   data_dir=str(_pair_task(tmp_path / "MRPC", 16, 4, 4)))
    trained = keras.saving.load_model(os.path.join(model_dir, MODEL_FILE))
    _perturb([w for w in trained.weights if "embeddings" not in w.path], 2)  # the 30522-row table stays
    trained.save(os.path.join(model_dir, MODEL_FILE))

    fmt, written = checkpoints.convert(model_dir, str(tmp_path / "kh"), model="classifier",
                                       output_format_name="keras_hub")
    loaded = keras_hub.models.BertTextClassifier.from_preset(written)
    words = "one two three four five six seven eight nine ten eleven twelve thirteen"
    first = ["The quick brown fox jumps.", "Naïve café déjà vu, twice.", "A much longer first sentence " * 4, words]
    second = ["It jumped!", "Pair, with punctuation?", "short", words]  # truncated longest-first, ties from B
    tokens = loaded.preprocessor(x=(np.array(first), np.array(second)))  # positional, a pair reads as (x, y)
    ours = Preprocessor(os.path.join(model_dir, "vocab.txt"), do_lower_case=True, seq_length=24)
    inputs = {key: value.numpy() for key, value in ours.serve_pairs(np.array(first), np.array(second)).items()}
    np.testing.assert_array_equal(tokens["token_ids"].numpy(), inputs["input_word_ids"])
    np.testing.assert_array_equal(tokens["segment_ids"].numpy(), inputs["input_type_ids"])
    np.testing.assert_array_equal(tokens["padding_mask"].numpy(), inputs["input_mask"].astype(bool))
    np.testing.assert_allclose(loaded(tokens).numpy(), trained(inputs)["logits"].numpy(), atol=1e-5)
    assert fmt == "keras_hub" and loaded.num_classes == 2
    # ... but not on text the warning names: keras-hub's tokenizer is not the original's there
    assert "is keras-hub's BertTokenizer, which is not the original's" in caplog.text
    odd = ["a\u00a0b", "a\u200bb", "ﬁne", "x" * 150]
    theirs = loaded.preprocessor.tokenizer(np.array(odd))
    for text, ids, expected in zip(odd, theirs, ours.tokenize(tf.constant(odd)).to_list()):
        assert list(np.asarray(ids)) != expected, text
    # the encoder of the same directory as a BertBackbone; refusals name what to do instead
    checkpoints.convert(model_dir, str(tmp_path / "backbone"), output_format_name="keras_hub")
    keras_hub.models.BertBackbone.from_preset(str(tmp_path / "backbone"))
    # the preprocessor's casing is held to the vocabulary, or taken from it
    with pytest.raises(VocabError, match="an uncased vocabulary .* with do_lower_case off"):
        checkpoints.save_keras_hub(trained, str(tmp_path / "cased_kh"), os.path.join(model_dir, "vocab.txt"), False)
    caseless = tmp_path / "caseless.txt"
    caseless.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "東", "京", "سلام"]))
    with pytest.raises(CheckpointError, match="does not tell whether the model lower-cases"):
        checkpoints.save_keras_hub(trained, str(tmp_path / "caseless_kh"), str(caseless))
    assert not (tmp_path / "cased_kh").exists() and not (tmp_path / "caseless_kh").exists()
    with pytest.raises(CheckpointError, match="--model=classifier: a fine-tuned classifier is written as a keras-hub"):
        checkpoints.convert(model_dir, str(tmp_path / "c.ckpt"), model="classifier")
    with pytest.raises(CheckpointError, match="--model=classifier: --input=.* is not a fine-tuning output directory"):
        checkpoints.convert(minilm_dir, str(tmp_path / "x"), model="classifier", output_format_name="keras_hub")
    with pytest.raises(CheckpointError, match="--model=pretrainer: .* has no pretraining heads"):
        checkpoints.convert(model_dir, str(tmp_path / "p.ckpt"), model="pretrainer")
