import json
import re

import pytest

from bert_tf import BertConfig, ConfigError

# bert_config.json of the released uncased_L-12_H-768_A-12 checkpoint, as published with it.
ORIGINAL_BASE = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 512,
    "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 2, "vocab_size": 30522,
}


def write(tmp_path, data, name="bert_config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_reads_original_config_and_maps_gelu_to_tanh_approximation(tmp_path):
    cfg = BertConfig.from_json_file(write(tmp_path, ORIGINAL_BASE))
    assert cfg == BertConfig.preset("base")
    assert cfg.hidden_act == "gelu_tanh"  # google-research/bert's gelu is the tanh approximation
    assert cfg.layer_norm_eps == 1e-12


def test_reads_hf_config_and_keeps_exact_gelu(tmp_path, minilm_dir):
    cfg = BertConfig.from_json_file(f"{minilm_dir}/config.json")
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (6, 384, 12)
    assert cfg.hidden_act == "gelu"
    hf = dict(ORIGINAL_BASE, model_type="bert", hidden_act="gelu_new", layer_norm_eps=1e-5)
    cfg = BertConfig.from_json_file(write(tmp_path, hf, "config.json"))
    assert cfg.hidden_act == "gelu_tanh" and cfg.layer_norm_eps == 1e-5


def test_json_round_trip_writes_what_the_original_code_reads(tmp_path):
    cfg = BertConfig.preset("mini", vocab_size=1234)
    cfg.to_json_file(tmp_path / "out.json")
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["hidden_act"] == "gelu"  # the original spelling of the tanh GELU
    assert BertConfig.from_json_file(tmp_path / "out.json") == cfg


@pytest.mark.parametrize("name, layers, hidden", [("tiny", 2, 128), ("mini", 4, 256), ("small", 4, 512),
                                                 ("medium", 8, 512), ("base", 12, 768), ("large", 24, 1024),
                                                 ("L6_H256", 6, 256), ("L10_H768", 10, 768)])
def test_presets(name, layers, hidden):
    cfg = BertConfig.preset(name)
    assert (cfg.num_hidden_layers, cfg.hidden_size) == (layers, hidden)
    assert cfg.num_attention_heads == hidden // 64 and cfg.intermediate_size == 4 * hidden


def test_preset_grid_is_complete():
    grid = [n for n in BertConfig.preset_names() if n.startswith("L")]
    assert len(grid) == 24
    for name in grid:
        BertConfig.preset(name)


@pytest.mark.parametrize("content, message", [
    ("not json", "not a JSON file"),
    ('{"model_type": "gpt2", "vocab_size": 3}', "not a BERT config"),
    ('{"hidden_size": 768}', "missing field(s) vocab_size"),
    (json.dumps(dict(ORIGINAL_BASE, hidden_size=770)), "hidden_size=770"),
    (json.dumps(dict(ORIGINAL_BASE, hidden_act="mish")), "hidden_act='mish'"),
    (json.dumps(dict(ORIGINAL_BASE, hidden_dropout_prob=1.5)), "hidden_dropout_prob"),
    ("[1, 2]", "expected a JSON object"),
])
def test_bad_config_files_name_the_problem(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_missing_file_and_unknown_preset():
    with pytest.raises(ConfigError, match="config file not found"):
        BertConfig.from_json_file("/nonexistent/bert_config.json")
    with pytest.raises(ConfigError, match="unknown BERT preset 'huge'"):
        BertConfig.preset("huge")
    with pytest.raises(ConfigError, match="unknown BERT preset"):
        BertConfig.preset("L3_H128")


def test_misspelt_key_is_refused_with_the_closest_known_key(tmp_path):
    path = write(tmp_path, dict(ORIGINAL_BASE, max_position_embedings=128))
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(path)
    assert str(info.value).startswith(f"{path}: unknown key 'max_position_embedings' (did you mean "
                                      "'max_position_embeddings'?); fix or remove it")
    path = write(tmp_path, dict(ORIGINAL_BASE, hiden_size=768, colour="blue"))
    with pytest.raises(ConfigError, match=r"unknown keys 'hiden_size' \(did you mean 'hidden_size'\?\), 'colour';"):
        BertConfig.from_json_file(path)


def test_keys_of_released_configs_that_do_not_change_the_model_are_accepted(tmp_path, minilm_dir):
    import dataclasses

    import transformers

    from bert_tf.config import FOREIGN_KEYS

    # google-research/bert's multi_cased_L-12_H-768_A-12/bert_config.json, as published with it
    multilingual = dict(ORIGINAL_BASE, vocab_size=119547, directionality="bidi", pooler_fc_size=768,
                        pooler_num_attention_heads=12, pooler_num_fc_layers=3, pooler_size_per_head=128,
                        pooler_type="first_token_transform")
    assert BertConfig.from_json_file(write(tmp_path, multilingual)) == BertConfig.preset("base", vocab_size=119547)
    # what the installed HF transformers writes for a BERT config: every key is either read or listed
    fields = {f.name for f in dataclasses.fields(BertConfig)}
    hf_keys = set(transformers.BertConfig().to_dict())
    assert hf_keys - fields <= set(FOREIGN_KEYS), hf_keys - fields - set(FOREIGN_KEYS)
    ref = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=40, layer_norm_eps=1e-7)
    ref.save_pretrained(tmp_path / "hf")
    cfg = BertConfig.from_json_file(tmp_path / "hf" / "config.json")
    assert (cfg.max_position_embeddings, cfg.layer_norm_eps, cfg.hidden_act) == (40, 1e-7, "gelu")
    # and the HF config.json we write reads back as the same config, for both GELUs
    for act in ("gelu", "gelu_tanh"):
        ours = BertConfig.preset("tiny", hidden_act=act)
        ours.to_json_file(tmp_path / "config.json", hf_architecture="BertModel")
        assert BertConfig.from_json_file(tmp_path / "config.json") == ours
        assert transformers.BertConfig.from_pretrained(tmp_path).hidden_act == {"gelu": "gelu",
                                                                               "gelu_tanh": "gelu_new"}[act]


@pytest.mark.parametrize("key, value, why", [
    ("position_embedding_type", "relative_key", "relative position embeddings are not implemented"),
    ("is_decoder", True, "causal attention"),
    ("add_cross_attention", True, "cross-attention"),
    ("pruned_heads", {"0": [1]}, "pruned attention heads"),
    ("tie_word_embeddings", False, "always the word-embedding matrix"),
    ("classifier_dropout", 0.3, "--dropout_rate"),
    ("pooler_type", "mean", "first-token transform"),
    ("is_decoder", 0, "causal attention"),  # JSON 0 is not false
])
def test_accepted_keys_at_a_value_that_would_change_the_model_are_refused(tmp_path, key, value, why):
    path = write(tmp_path, dict(ORIGINAL_BASE, model_type="bert", **{key: value}), "config.json")
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(path)
    assert str(info.value).startswith(f"{path}: {key}={value!r} is not supported") and why in str(info.value)


def test_layer_norm_eps_and_its_alias_must_agree(tmp_path):
    assert BertConfig.from_json_file(write(tmp_path, dict(ORIGINAL_BASE, layer_norm_epsilon=1e-6))).layer_norm_eps \
        == 1e-6
    with pytest.raises(ConfigError, match="layer_norm_eps=1e-05 and layer_norm_epsilon=1e-06 disagree"):
        BertConfig.from_json_file(write(tmp_path, dict(ORIGINAL_BASE, layer_norm_eps=1e-5, layer_norm_epsilon=1e-6)))


def test_preset_or_file_says_which_it_is(tmp_path):
    assert BertConfig.from_preset_or_file("mini") == BertConfig.preset("mini")
    assert BertConfig.from_preset_or_file(write(tmp_path, ORIGINAL_BASE)) == BertConfig.preset("base")
    with pytest.raises(ConfigError, match=r"'bsae' is neither a config file \(no such file\) nor a BERT preset; "
                                          r"did you mean 'base'\?"):
        BertConfig.from_preset_or_file("bsae")
    for path in (tmp_path / "configs" / "bert", tmp_path / "bert_config.jsn"):  # missing paths, no .json suffix
        with pytest.raises(ConfigError, match=f"{re.escape(str(path))}: config file not found"):
            BertConfig.from_preset_or_file(path)
    with pytest.raises(ConfigError, match=f"{re.escape(str(tmp_path))}: is a directory"):
        BertConfig.from_preset_or_file(tmp_path)
    with pytest.raises(ConfigError, match="not a JSON file"):
        BertConfig.from_preset_or_file(write(tmp_path, "vocab_size: 3", "bert_config"))
