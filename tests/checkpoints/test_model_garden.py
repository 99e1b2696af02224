"""Model Garden / TF Hub BERT encoders in, against tf-models-official itself (the README's test command installs it
beside our TensorFlow): its BertEncoder and BertEncoderV2 with weights perturbed from their initialisation (so that
a swapped or transposed tensor cannot pass), saved as Model Garden checkpoints and exported by its own TF Hub
exporter, load into encoders that give its outputs on a batch with padding, through load_model_garden,
convert_checkpoint and --init_checkpoint; what does not fit is refused."""

import os

import numpy as np
import pytest

from bert_tf import BertClassifier, BertConfig, BertEncoder, checkpoints
from bert_tf.checkpoints import CheckpointError
from tests import forking

import tf_keras  # noqa: E402,F401  (test requirements; missing them must fail, not skip)
from official.legacy.bert import configs as garden_configs  # noqa: E402
from official.nlp.modeling import networks  # noqa: E402
from official.nlp.tools import export_tfhub_lib  # noqa: E402

pytestmark = pytest.mark.reference
SIZES = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=40, type_vocab_size=2)


def _batch():
    rng = np.random.default_rng(1)
    mask = np.ones((3, 12), "int32")
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    return {"input_word_ids": rng.integers(1, 99, (3, 12)).astype("int32") * mask, "input_mask": mask,
            "input_type_ids": (np.arange(12)[None] >= 6).astype("int32") * mask}


def _outputs(encoder, batch):
    out = encoder(batch)
    return np.asarray(out["sequence_output"]) * batch["input_mask"][..., None], np.asarray(out["pooled_output"])


def _perturbed(encoder, batch, seed):
    encoder(batch)
    rng = np.random.default_rng(seed)
    for variable in encoder.variables:
        variable.assign(variable + rng.normal(0.0, 0.1, variable.shape).astype("float32"))
    return encoder


def _export(root, name, checkpoint, hidden_act="gelu"):
    config = garden_configs.BertConfig(**SIZES, hidden_act=hidden_act)
    (root / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                                              [f"w{i}" for i in range(94)]) + "\n")
    export_tfhub_lib.export_model(str(root / name), bert_config=config, model_checkpoint_path=checkpoint,
                                  with_mlm=False, vocab_file=str(root / "vocab.txt"), do_lower_case=True)
    return str(root / name)


@pytest.fixture(scope="module")
def garden(tmp_path_factory):
    """Model Garden's two BERT encoders as checkpoints, the first also as its TF Hub SavedModel, and their outputs:
    made once per session, by whichever xdist worker asks first."""
    return forking.once_per_session(tmp_path_factory, "garden", _make_garden)


def _make_garden(root):
    import tensorflow as tf

    batch = _batch()
    v1 = _perturbed(export_tfhub_lib.get_bert_encoder(garden_configs.BertConfig(**SIZES)), batch, 0)
    v2 = _perturbed(networks.BertEncoderV2(vocab_size=99, hidden_size=32, num_layers=2, num_attention_heads=4,
                                           inner_dim=64, max_sequence_length=40, type_vocab_size=2), batch, 1)
    paths = {"v1": tf.train.Checkpoint(encoder=v1).save(str(root / "v1" / "ckpt")),
             "v2": tf.train.Checkpoint(encoder=v2).save(str(root / "v2" / "ckpt"))}
    paths["hub"] = _export(root, "hub", paths["v1"])
    expected = {"v1": _outputs(v1, batch), "v2": _outputs(v2, batch)}
    expected["hub"] = expected["v1"]
    return root, paths, expected, batch


def test_model_garden_checkpoints_and_tf_hub_savedmodels_load_with_their_outputs(garden, tmp_path):
    root, paths, expected, batch = garden
    for name in ("v1", "v2", "hub"):
        assert checkpoints.model_garden.is_model_garden(paths[name])
        encoder = checkpoints.load_model_garden(paths[name])
        assert encoder.bert_config.num_attention_heads == 4 and encoder.bert_config.hidden_act == "gelu_tanh"
        for got, want in zip(_outputs(encoder, batch), expected[name]):
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)
    # convert_checkpoint detects the SavedModel and keeps its vocabulary (an asset there) beside the output
    fmt, written = checkpoints.convert(paths["hub"], str(tmp_path / "out" / "bert_model.ckpt"))
    assert fmt == "original" and (tmp_path / "out" / "vocab.txt").read_text() == (root / "vocab.txt").read_text()
    converted = checkpoints.load_original(written, str(tmp_path / "out" / "bert_config.json"))
    np.testing.assert_array_equal(_outputs(converted, batch)[1], _outputs(encoder, batch)[1])
    # --init_checkpoint: a classifier's encoder from the TF Hub SavedModel, its head left as initialised
    classifier = BertClassifier(BertEncoder(BertConfig(**SIZES, hidden_act="gelu_tanh")), num_classes=3)
    checkpoints.restore_weights(classifier, paths["hub"])
    for got, want in zip(_outputs(classifier.encoder, batch), expected["hub"]):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_what_does_not_fit_a_model_garden_bert_is_refused(garden, tmp_path):
    import tensorflow as tf

    root, paths, expected, batch = garden
    # the head count and the activation, which the weights' shapes cannot show
    for config, message in ((dict(SIZES, num_attention_heads=2, hidden_act="gelu_tanh"), "has 4 attention heads"),
                            (dict(SIZES, hidden_act="gelu"), "computes hidden_act='gelu_tanh'")):
        model = BertEncoder(BertConfig(**config))
        with pytest.raises(CheckpointError, match=message):
            checkpoints.restore_weights(model, paths["v2"])
    with pytest.raises(CheckpointError, match="a Model Garden encoder has no pretraining heads"):
        checkpoints.convert(paths["v1"], str(tmp_path / "x.ckpt"), model="pretrainer")
    # a SavedModel whose encoder computes something else (ReLU) than the config read from its shapes says so ...
    relu = _export(root, "relu", paths["v1"], hidden_act="relu")
    with pytest.raises(CheckpointError, match="computes another function than a BERT encoder"):
        checkpoints.load_model_garden(relu)
    # ... and loads, equal to the SavedModel, with the bert_config.json it was built with
    BertConfig(**SIZES, hidden_act="relu").to_json_file(str(tmp_path / "relu.json"))
    encoder = checkpoints.load_model_garden(relu, str(tmp_path / "relu.json"))
    loaded = tf.saved_model.load(relu)
    np.testing.assert_allclose(_outputs(encoder, batch)[1], loaded(batch, training=False)["pooled_output"],
                               atol=1e-5)
    # a bert_config.json beside the weights is held to what their shapes tell: the head count (the per-head kernels
    # reshape to [H, H] for any count) and the layers (a shallower config would drop the rest)
    for change, message in ((dict(num_attention_heads=2), r"num_attention_heads=2, but the weights in .* have 4 heads"),
                            (dict(num_hidden_layers=1), r"its encoder has 2 layers, its .*beside.json 1")):
        BertConfig(**dict(SIZES, **change), hidden_act="gelu_tanh").to_json_file(str(tmp_path / "beside.json"))
        with pytest.raises(CheckpointError, match=message):
            checkpoints.load_model_garden(paths["v2"], str(tmp_path / "beside.json"))
    # an ALBERT encoder from Model Garden: another family
    albert = networks.AlbertEncoder(vocab_size=99, embedding_width=16, hidden_size=32, num_layers=2,
                                    num_attention_heads=4, intermediate_size=64, max_sequence_length=40)
    albert(batch)
    path = tf.train.Checkpoint(encoder=albert).save(str(tmp_path / "albert" / "ckpt"))
    with pytest.raises(CheckpointError, match="another family"):
        checkpoints.convert(path, str(tmp_path / "albert.ckpt"))
    assert not os.path.exists(tmp_path / "albert.ckpt.index")
