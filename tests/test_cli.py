"""The CLIs as users call them: subprocesses with flags, one-line errors, outputs on disk."""

import os
import re
import subprocess
import sys

import numpy as np

from bert_tf import BertEncoder, BertPretrainer, checkpoints
from bert_tf.cli.convert_checkpoint import convert
from tests.conftest import make_batch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(module, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


def test_convert_checkpoint_hf_to_original_to_keras(minilm_dir, tmp_path):
    result = cli("bert_tf.cli.convert_checkpoint", f"--input={minilm_dir}", f"--output={tmp_path}/tf1/bert_model.ckpt")
    assert result.returncode == 0, result.stderr
    assert {"bert_config.json", "vocab.txt", "checkpoint", "bert_model.ckpt.index"} <= set(os.listdir(tmp_path / "tf1"))
    out = convert(tmp_path / "tf1" / "bert_model.ckpt", tmp_path / "enc.keras")
    import keras

    from_keras = keras.saving.load_model(out)
    hf = checkpoints.load_hf(minilm_dir)
    batch = make_batch(hf.bert_config, seq=9)
    np.testing.assert_array_equal(from_keras(batch)["sequence_output"].numpy(), hf(batch)["sequence_output"].numpy())


def test_convert_checkpoint_pretrainer_keeps_heads(tiny_config, tmp_path):
    model = BertPretrainer(BertEncoder(tiny_config))
    checkpoints.save_original(model, tmp_path / "in" / "bert_model.ckpt")
    tiny_config.to_json_file(tmp_path / "in" / "bert_config.json")
    out = convert(tmp_path / "in", tmp_path / "pre.keras", model="pretrainer")
    import keras

    clone = keras.saving.load_model(out)
    batch = dict(make_batch(tiny_config), masked_lm_positions=np.array([[1], [2], [3]], "int32"))
    np.testing.assert_array_equal(clone(batch)["mlm_logits"].numpy(), model(batch)["mlm_logits"].numpy())


def test_convert_checkpoint_bad_input_is_one_line(tmp_path):
    result = cli("bert_tf.cli.convert_checkpoint", f"--input={tmp_path}/missing.ckpt", f"--output={tmp_path}/x.keras")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert re.search(r"convert_checkpoint: error: .*missing.ckpt: no TF checkpoint here", result.stderr)
    assert not os.path.exists(tmp_path / "x.keras")
