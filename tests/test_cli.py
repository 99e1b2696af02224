"""The CLIs as users call them: subprocesses with flags, one-line errors, outputs on disk."""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from bert_tf import BertEncoder, BertPretrainer, checkpoints
from bert_tf.checkpoints import convert
from bert_tf.tokenization import VocabError
from tests import forking
from tests.conftest import make_batch
from tests.checkpoints.test_checkpoints import encode_real_sentences, relative_error, torch_inputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(module, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return forking.python(["-m", module, *args], env=env, cwd=ROOT, timeout=300)


def test_convert_checkpoint_hf_to_original_to_keras(minilm_dir, tmp_path):
    result = cli("bert_tf.cli.convert_checkpoint", f"--input={minilm_dir}", f"--output={tmp_path}/tf1/bert_model.ckpt")
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and "(original TF1 checkpoint)" in result.stdout
    assert {"bert_config.json", "vocab.txt", "checkpoint", "bert_model.ckpt.index"} <= set(os.listdir(tmp_path / "tf1"))
    assert "bert/encoder/layer_5/output/LayerNorm/gamma" in tf.train.load_checkpoint(
        str(tmp_path / "tf1" / "bert_model.ckpt")).get_variable_to_shape_map()
    fmt, out = convert(tmp_path / "tf1" / "bert_model.ckpt", tmp_path / "enc.keras")
    assert fmt == "keras"
    import keras

    from_keras = keras.saving.load_model(out)
    hf = checkpoints.load_hf(minilm_dir)
    batch = make_batch(hf.bert_config, seq=9)
    np.testing.assert_array_equal(from_keras(batch)["sequence_output"].numpy(), hf(batch)["sequence_output"].numpy())


def test_convert_checkpoint_to_hf_layout_loads_in_transformers(minilm_dir, tmp_path):
    import torch
    import transformers

    encoder = checkpoints.load_hf(minilm_dir)
    checkpoints.save_original(encoder, tmp_path / "tf1" / "bert_model.ckpt")
    encoder.bert_config.to_json_file(tmp_path / "tf1" / "bert_config.json")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    fmt, out = convert(tmp_path / "tf1" / "bert_model.ckpt", tmp_path / "hf" / "model.safetensors", vocab_file=vocab)
    assert (fmt, out) == ("hf", str(tmp_path / "hf"))
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors", "tokenizer_config.json",
                                                   "vocab.txt"]
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == open(vocab, "rb").read()
    assert not [f for f in os.listdir(tmp_path) if "tmp" in f]
    # the casing travels with the vocabulary: without tokenizer_config.json transformers lower-cases any model's text
    assert transformers.BertTokenizer.from_pretrained(tmp_path / "hf").tokenize("Hello World") == ["hello", "world"]
    cased = tmp_path / "cased.txt"
    cased.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "World", "hello", "world"]))
    checkpoints.save_hf(encoder, str(tmp_path / "hf_cased"), vocab_file=str(cased))
    assert transformers.BertTokenizer.from_pretrained(tmp_path / "hf_cased").tokenize("Hello World") == [
        "Hello", "World"]
    with pytest.raises(VocabError, match="a cased vocabulary .* with do_lower_case on"):  # the caller's is held to it
        checkpoints.save_hf(encoder, str(tmp_path / "hf_wrong"), vocab_file=str(cased), do_lower_case=True)
    assert not (tmp_path / "hf_wrong").exists()
    # a vocabulary without case tells nothing: the caller's setting, where it has one (accents are stripped or not)
    caseless = tmp_path / "caseless.txt"
    caseless.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "東", "京", "سلام"]))
    for setting, name in ((False, "hf_kept"), (None, "hf_unknown")):
        checkpoints.save_hf(encoder, str(tmp_path / name), vocab_file=str(caseless), do_lower_case=setting)
    assert json.loads((tmp_path / "hf_kept" / "tokenizer_config.json").read_text()) == {"do_lower_case": False}
    assert not (tmp_path / "hf_unknown" / "tokenizer_config.json").exists()

    converted, info = transformers.BertModel.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    original = transformers.BertModel.from_pretrained(minilm_dir).state_dict()
    for name, value in converted.state_dict().items():  # every weight came through the TF1 format unchanged
        assert torch.equal(value, original[name]), name
    batch = encode_real_sentences(minilm_dir)
    real = batch["input_mask"].astype(bool)
    with torch.no_grad():
        ref = converted.eval()(**torch_inputs(batch))
    ours = encoder(batch)
    # Real tokens and the pooled output; padded positions are ill-conditioned in fp32 (test_checkpoints bounds them)
    scale = np.abs(ref.last_hidden_state.numpy()).max()
    assert np.abs(ours["sequence_output"].numpy() - ref.last_hidden_state.numpy())[real].max() / scale < 1e-5
    assert relative_error(ours["pooled_output"], ref.pooler_output.numpy()) < 1e-5


def test_convert_checkpoint_pretrainer_to_hf_for_pretraining(tiny_config, tmp_path):
    import torch
    import transformers

    model = BertPretrainer(BertEncoder(tiny_config))
    rng = np.random.default_rng(0)
    for variable in model.weights:  # every weight non-trivial, the heads' zero-initialised biases included
        variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    checkpoints.save_original(model, tmp_path / "in" / "bert_model.ckpt")
    tiny_config.to_json_file(tmp_path / "in" / "bert_config.json")
    fmt, out = convert(tmp_path / "in" / "bert_model.ckpt", tmp_path / "hf", model="pretrainer")
    assert fmt == "hf" and sorted(os.listdir(out)) == ["config.json", "model.safetensors"]
    ref, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert ref.config.hidden_act == "gelu_new"  # the original's tanh GELU under HF's name for it
    ref.save_pretrained(tmp_path / "resaved")  # the names are HF's own for this class, not only loadable ones
    assert sorted(load_file(out + "/model.safetensors")) == sorted(load_file(tmp_path / "resaved" / "model.safetensors"))
    batch = make_batch(tiny_config)
    positions = np.array([[1, 2, 5], [0, 3, 4], [2, 2, 1]], "int32")
    with torch.no_grad():
        want = ref.eval()(**torch_inputs(batch))
    got = model(dict(batch, masked_lm_positions=positions))
    want_mlm = np.take_along_axis(want.prediction_logits.numpy(), positions[:, :, None], axis=1)
    assert relative_error(got["mlm_logits"], want_mlm) < 1e-5
    assert relative_error(got["nsp_logits"], want.seq_relationship_logits.numpy()) < 1e-5
    back = checkpoints.load_hf(out, model="pretrainer")  # ours -> HF -> ours, heads included
    assert len(back.weights) == len(model.weights)
    for a, b in zip(back.weights, model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=b.path)


def test_convert_checkpoint_pretrainer_keeps_heads(tiny_config, tmp_path):
    model = BertPretrainer(BertEncoder(tiny_config))
    checkpoints.save_original(model, tmp_path / "in" / "bert_model.ckpt")
    tiny_config.to_json_file(tmp_path / "in" / "bert_config.json")
    _, out = convert(tmp_path / "in", tmp_path / "pre.keras", model="pretrainer")
    import keras

    clone = keras.saving.load_model(out)
    batch = dict(make_batch(tiny_config), masked_lm_positions=np.array([[1], [2], [3]], "int32"))
    np.testing.assert_array_equal(clone(batch)["mlm_logits"].numpy(), model(batch)["mlm_logits"].numpy())


def test_convert_checkpoint_pretrainer_of_a_left_to_right_model(tiny_config, tmp_path, caplog):
    """A causal config (an --objective=ltr run's bert_config.json) converts with its LM head, and stays causal. Its
    .ckpt says that the original's modeling.py, which ignores the key, would compute another model."""
    checkpoints.save_original(BertEncoder(tiny_config), tmp_path / "plain" / "bert_model.ckpt")
    assert "modeling.py ignores" not in caplog.text
    config = dataclasses.replace(tiny_config, causal_attention=True)
    model = BertPretrainer(BertEncoder(config), objective="ltr")
    checkpoints.save_original(model, tmp_path / "in" / "bert_model.ckpt")
    assert "google-research/bert's modeling.py ignores causal_attention=True in bert_config.json" in caplog.text
    checkpoints.save_original(BertEncoder(dataclasses.replace(tiny_config, layer_norm_eps=1e-5)),
                              tmp_path / "eps" / "bert_model.ckpt")
    assert "ignores layer_norm_eps=1e-05 in bert_config.json" in caplog.text
    config.to_json_file(tmp_path / "in" / "bert_config.json")
    _, out = convert(tmp_path / "in", tmp_path / "ltr.keras", model="pretrainer")
    import keras

    clone = keras.saving.load_model(out)
    assert clone.objective == "ltr" and clone.encoder.bert_config.causal_attention
    batch = make_batch(config)
    np.testing.assert_array_equal(clone(batch)["lm_logits"].numpy(), model(batch)["lm_logits"].numpy())


@pytest.mark.parametrize("output, message", [
    ("model.pt", "the name does not say what to write"),
    ("weights.safetensors", "only from a file named model.safetensors"),
    ("model.ckpt.index", "the name does not say what to write"),
    ("existing_file", "the name does not say what to write"),
])
def test_convert_checkpoint_refuses_an_output_that_names_no_format(tiny_config, tmp_path, output, message):
    checkpoints.save_original(BertEncoder(tiny_config), tmp_path / "in" / "bert_model.ckpt")
    tiny_config.to_json_file(tmp_path / "in" / "bert_config.json")
    (tmp_path / "existing_file").write_text("not a directory")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=f"--output={re.escape(str(tmp_path / output))}: .*{message}"):
        convert(tmp_path / "in" / "bert_model.ckpt", tmp_path / output)
    assert sorted(os.listdir(tmp_path)) == before


def test_convert_checkpoint_refuses_flags_it_would_ignore(minilm_dir, tiny_config, tmp_path):
    with pytest.raises(ValueError, match="--bert_config_file=.*an HF input is read with its own config; drop the flag"):
        convert(minilm_dir, tmp_path / "out.keras", bert_config_file=f"{minilm_dir}/config.json")
    with pytest.raises(ValueError, match="--vocab_file=.*a .keras file holds no vocabulary"):
        convert(minilm_dir, tmp_path / "out.keras", vocab_file=f"{minilm_dir}/vocab.txt")
    with pytest.raises(ValueError, match="--vocab_file=.*missing.txt: no such file"):
        convert(minilm_dir, tmp_path / "hf/", vocab_file=f"{tmp_path}/missing.txt")
    assert os.listdir(tmp_path) == []


def test_convert_checkpoint_bad_input_is_one_line(tmp_path):
    result = cli("bert_tf.cli.convert_checkpoint", f"--input={tmp_path}/missing.ckpt", f"--output={tmp_path}/x.keras")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert re.search(r"convert_checkpoint: error: .*missing.ckpt: no TF checkpoint here", result.stderr)
    assert not os.path.exists(tmp_path / "x.keras")


# ------------------------------------------------------------------------------------------------ distribution
class _FakeTPU:
    """Stands in for the TPU calls of `get_strategy`, recording what they receive."""

    def __init__(self, monkeypatch, cores=8):
        import tensorflow as tf

        self.calls = []
        fake = self

        class Resolver:
            def __init__(self, tpu=None, zone=None, project=None):
                fake.calls.append(("resolver", tpu, zone, project))

        class Strategy:
            num_replicas_in_sync = cores

            def __init__(self, resolver):
                fake.calls.append(("strategy", type(resolver).__name__))

        monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
        monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                            lambda resolver: self.calls.append(("connect",)))
        monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                            lambda resolver: self.calls.append(("initialize",)))
        monkeypatch.setattr(tf.distribute, "TPUStrategy", Strategy)


def _flags(*argv):
    from absl import flags

    from bert_tf.cli import define_distribution_flags

    values = flags.FlagValues()
    define_distribution_flags(flag_values=values)
    values(["prog", *argv])
    return values


def test_tpu_flags_reach_the_cluster_resolver(monkeypatch):
    from bert_tf.cli import strategy_from_flags

    tpu = _FakeTPU(monkeypatch)
    strategy_from_flags(_flags("--use_tpu", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
                               "--gcp_project=my-project", "--num_tpu_cores=8"))
    assert tpu.calls == [("resolver", "my-tpu", "us-central1-b", "my-project"), ("connect",), ("initialize",),
                         ("strategy", "Resolver")]
    tpu.calls.clear()  # the original's --master: the TPU's address when no name is given
    strategy_from_flags(_flags("--use_tpu", "--master=grpc://10.0.0.2:8470"))
    assert tpu.calls[0] == ("resolver", "grpc://10.0.0.2:8470", None, None) and ("connect",) in tpu.calls
    tpu.calls.clear()
    strategy_from_flags(_flags("--tpu=local"))  # a TPU VM: no connection to a remote cluster
    assert tpu.calls == [("resolver", "local", None, None), ("initialize",), ("strategy", "Resolver")]


def test_tpu_flags_that_would_be_ignored_are_errors(monkeypatch):
    import pytest

    from bert_tf.cli import strategy_from_flags

    _FakeTPU(monkeypatch, cores=32)
    cases = {("--tpu_zone=us-central1-b",): r"--tpu_zone=us-central1-b: TPU settings, but no TPU is selected",
             ("--gcp_project=p", "--num_tpu_cores=8"): r"--gcp_project=p, --num_tpu_cores=8: TPU settings",
             ("--master=grpc://10.0.0.2:8470",): r"--master=grpc://10.0.0.2:8470 is only read with --use_tpu",
             ("--tpu_name=my-tpu",): r"--tpu_name=my-tpu is only read with --use_tpu",
             ("--use_tpu", "--tpu_name=a", "--master=grpc://b"): r"name different TPUs \(a, grpc://b\)",
             ("--tpu=local", "--tpu_zone=z"): r"--tpu_zone=z: a zone and project locate a TPU by name",
             ("--tpu=my-tpu", "--num_tpu_cores=8"): r"--num_tpu_cores=8, but TPU 'my-tpu' has 32 cores",
             ("--strategy=one_device", "--num_gpus=1"): r"--num_gpus=1 only applies to --strategy=mirrored"}
    for argv, message in cases.items():
        with pytest.raises(ValueError, match=message):
            strategy_from_flags(_flags(*argv))


def test_flags_a_command_would_ignore_are_errors(tmp_path):
    """run_squad's --data_dir is TFDS's data_dir: without --tfds_name nothing would read it. export_saved_model
    refuses a flag the chosen kind does not read. Both before any work, in one line."""
    result = cli("bert_tf.cli.run_squad", "--vocab_file=v", "--bert_config_file=c", f"--output_dir={tmp_path}/o",
                 "--do_train", "--train_file=train.json", "--data_dir=squad")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "run_squad: error: --data_dir=squad is the TFDS data_dir of --tfds_name, which is not given" in result.stderr
    result = cli("export.export_saved_model", "--kind=classifier", f"--model_dir={tmp_path}",
                 f"--export_dir={tmp_path}/x", "--top_k=3", "--do_lower_case")
    assert result.returncode == 1 and "Traceback" not in result.stderr and not (tmp_path / "x").exists()
    assert "export_saved_model: error: --kind=classifier does not read --do_lower_case, --top_k" in result.stderr


def test_convert_checkpoint_names_the_formats_it_reads_for_an_input_it_cannot_tell(tmp_path):
    from bert_tf.checkpoints import CheckpointError, convert

    (tmp_path / "notes.txt").write_text("not weights")
    for path in (tmp_path / "notes.txt", tmp_path):
        with pytest.raises(CheckpointError, match="not a format convert_checkpoint reads: an original TF1 checkpoint "
                                                  r".*HF directory.*keras-hub preset.*Model Garden.*fine-tuning"):
            convert(path, tmp_path / "out.ckpt")
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


FREEZE_PROBE = r"""
import atexit, gc, sys
gc.unfreeze()  # as in a fresh interpreter: the fork server froze its own heap
atexit.register(lambda: print("at teardown:", gc.get_freeze_count() > 0, flush=True))  # registered first: runs last
from absl import flags
from bert_tf.cli import FILE, fail, start
flags.DEFINE_string("output_file", None, "")
def main(argv):
    cycle = []
    cycle.append(cycle)
    del cycle
    print("in main:", gc.get_freeze_count() > 0, "collector on:", gc.isenabled(), "its own garbage collected:",
          gc.collect() > 0, flush=True)
    with open(flags.FLAGS.output_file, "w") as f:
        f.write("written")
    if argv[-1] == "fail":
        fail("stopped")
start(main, "probe", {"output_file": FILE})
"""


@pytest.mark.parametrize("ending", ["ok", "fail"])
def test_a_command_hands_the_interpreter_a_frozen_heap_to_tear_down(ending, tmp_path):
    """A command's imports are in the collector's permanent generation when its main runs, while what main makes is
    collected as usual; after main and its exit handlers, whether it succeeded or failed, the whole heap is (the
    teardown frees it by reference counts, without full collections over TensorFlow's modules); what main wrote is
    on disk."""
    out = tmp_path / "out.txt"
    done = forking.python(["-c", FREEZE_PROBE, f"--output_file={out}", ending], cwd=ROOT, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == (0 if ending == "ok" else 1), done.stderr
    assert done.stdout.splitlines() == ["in main: True collector on: True its own garbage collected: True",
                                        "at teardown: True"]
    assert out.read_text() == "written"
