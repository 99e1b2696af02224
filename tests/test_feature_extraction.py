"""extract_features: the original's JSONL from real BERT weights, checked against HF transformers' hidden states;
the paper's layer combinations."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_extract_features_matches_hf_hidden_states(minilm_dir, tmp_path):
    import torch
    import transformers

    lines = ["The quick brown fox jumps over the lazy dog. ||| It was not amused.",
             "Naïve café déjà vu — 東京 " * 20,  # truncated to max_seq_length
             "", "Short one."]
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "bert_tf.cli.extract_features", f"--input_file={tmp_path}/input.txt",
                          f"--output_file={tmp_path}/features.jsonl", f"--vocab_file={minilm_dir}/vocab.txt",
                          f"--bert_config_file={minilm_dir}/config.json", f"--init_checkpoint={minilm_dir}",
                          "--layers=-1,-2", "--max_seq_length=24", "--batch_size=2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "features.jsonl").read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2]  # the blank line is skipped
    hf_tokenizer = transformers.BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), do_lower_case=True)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    for record, line in zip(records, [lines[0], lines[1], lines[3]]):
        a, _, b = line.partition(" ||| ")
        encoded = hf_tokenizer(a, b or None, truncation="longest_first", max_length=24, return_tensors="pt")
        tokens = hf_tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
        assert [f["token"] for f in record["features"]] == tokens
        with torch.no_grad():
            hidden = model(**encoded, output_hidden_states=True).hidden_states
        for layer_index in (-1, -2):
            ours = np.array([[v for item in f["layers"] if item["index"] == layer_index for v in item["values"]]
                             for f in record["features"]])
            np.testing.assert_allclose(ours, hidden[layer_index][0].numpy(), atol=2e-5)


def test_layer_combinations():
    import tensorflow as tf

    from bert_tf.feature_extraction import VARIANTS, combine_layers

    rng = np.random.default_rng(0)
    layers = [tf.constant(rng.normal(size=(2, 3, 4)), tf.float32) for _ in range(6)]
    arrays = [t.numpy() for t in layers]
    expected = {"last_hidden": arrays[-1], "second_to_last_hidden": arrays[-2],
                "sum_last_four": sum(arrays[-4:]), "concat_last_four": np.concatenate(arrays[-4:], -1),
                "sum_all": sum(arrays)}
    assert set(expected) == set(VARIANTS)
    for name, want in expected.items():
        np.testing.assert_allclose(combine_layers(layers, name).numpy(), want, rtol=1e-6, atol=1e-6)  # float32 sums
    with pytest.raises(ValueError, match="choose one of"):
        combine_layers(layers, "mean")
