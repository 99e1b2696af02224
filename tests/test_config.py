import json

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
