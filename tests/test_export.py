"""export: SavedModels taking raw strings, reloaded from a copied directory in a process that imports only
tensorflow and tensorflow_text, compared with the Keras model in this process; the op audit; TF Serving
PredictRequest protos run against the loaded signature."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS_A = ["The quick brown fox.", "", "Naïve café déjà vu — 東京 ünïcödé", "word " * 10000,  # 50 kB
           "Short one here."]
TEXTS_B = ["A fox.", "Empty first.", "", "Another sentence.", "x"]


@pytest.fixture(scope="module")
def finetuned(minilm_dir, tmp_path_factory):
    """A small MRPC-format classifier fine-tuned for a few steps (tiny random encoder, the real uncased vocab)."""
    from bert_tf import BertConfig
    from bert_tf.finetuning import FinetuneOptions, run_classifier
    from bert_tf.tasks import get_task
    from tests.test_finetuning import _pair_task

    root = tmp_path_factory.mktemp("export")
    data = _pair_task(root / "MRPC", 32, 8, 4)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    run_classifier(get_task("mrpc"), config, os.path.join(minilm_dir, "vocab.txt"), str(root / "model"),
                   FinetuneOptions(do_train=True, max_seq_length=32, train_batch_size=8, num_train_epochs=1),
                   data_dir=str(data))
    return root


LOADER = r'''
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops, as TF Serving links them)
assert not any(m.split(".")[0] in ("bert_tf", "export") for m in sys.modules)
args = json.loads(sys.argv[1])
loaded = tf.saved_model.load(args["dir"])
signature = loaded.signatures[args["signature"]]
outputs = signature(**{k: tf.constant(v) for k, v in args["inputs"].items()})
print(json.dumps({k: v.numpy().tolist() if v.dtype != tf.string else [s.decode() for s in v.numpy()]
                  for k, v in outputs.items()}))
'''


def _load_elsewhere(export_dir, tmp_path, signature, inputs):
    """Copy the export, then run a signature in a fresh process that imports only TF and tensorflow-text."""
    copy = tmp_path / "copied"
    shutil.copytree(export_dir, copy)
    shutil.rmtree(export_dir)  # nothing may point back to where it was written
    script = tmp_path / "load.py"
    script.write_text(LOADER)
    out = subprocess.run([sys.executable, str(script), json.dumps({"dir": str(copy), "signature": signature,
                                                                   "inputs": inputs})],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), copy


def test_classifier_export_takes_raw_text_and_matches_keras(finetuned, tmp_path):
    from bert_tf.finetuning import encode, load_finetuned
    from bert_tf.tasks import Example
    from export.exporting import export

    report = export("classifier", str(tmp_path / "exported" / "1"), model_dir=str(finetuned / "model"))
    assert report["unregistered"] == []
    assert set(report["tensorflow_text"]) == {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8",
                                              "RegexSplitWithOffsets"}
    served, copy = _load_elsewhere(tmp_path / "exported" / "1", tmp_path, "serving_default",
                                   {"text_a": TEXTS_A, "text_b": TEXTS_B})
    model = load_finetuned(str(finetuned / "model"))
    features = encode([Example(str(i), a, b) for i, (a, b) in enumerate(zip(TEXTS_A, TEXTS_B))],
                      str(finetuned / "model" / "vocab.txt"), True, 32)
    want = model.predict(features, verbose=0)["logits"]
    want = np.exp(want - want.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)
    labels = json.loads((finetuned / "model" / "task.json").read_text())["labels"]
    assert served["label"] == [labels[i] for i in want.argmax(-1)]
    assert (copy / "assets" / "vocab.txt").exists() and (copy / "assets" / "labels.txt").read_text().split() == \
        labels
    assert json.loads((copy / "assets.extra" / "ops.json").read_text())["unregistered"] == []


def test_preprocessor_export_packs_like_the_library(minilm_dir, tmp_path):
    from bert_tf.finetuning import encode
    from bert_tf.tasks import Example
    from export.exporting import export

    vocab = os.path.join(minilm_dir, "vocab.txt")
    export("preprocessor", str(tmp_path / "pre"), vocab_file=vocab, seq_length=24)
    served, _ = _load_elsewhere(tmp_path / "pre", tmp_path, "pairs", {"text_a": TEXTS_A, "text_b": TEXTS_B})
    want = encode([Example(str(i), a, b) for i, (a, b) in enumerate(zip(TEXTS_A, TEXTS_B))], vocab, True, 24)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(served[key], want[key])
    # the TF-Hub-style pieces, from the reloaded object
    import tensorflow as tf

    loaded = tf.saved_model.load(str(tmp_path / "copied"))
    packed = loaded.bert_pack_inputs([loaded.tokenize(tf.constant(TEXTS_A)), loaded.tokenize(tf.constant(TEXTS_B))],
                                     tf.constant(24))
    np.testing.assert_array_equal(packed["input_word_ids"].numpy(), want["input_word_ids"])
    single = loaded.bert_pack_inputs([loaded.tokenize(tf.constant(["Hello world"]))], tf.constant(8))
    assert single["input_word_ids"].shape == (1, 8) and int(loaded.cls_id) == int(want["input_word_ids"][0, 0])
    ids, starts, ends = loaded.tokenize_with_offsets(tf.constant(["Naïve café"]))
    spans = ["Naïve café".encode()[s:e].decode() for s, e in zip(starts[0].numpy(), ends[0].numpy())]
    assert list(dict.fromkeys(spans)) == ["Naïve", "café"] and len(spans) == len(ids[0])


def test_encoder_export_matches_keras_and_serves_predict_requests(minilm_dir, tmp_path):
    """The TF-Hub-style encoder from real weights; a tensorflow-serving-api PredictRequest, decoded the way the
    model server decodes it, runs against the signature with the same input names and dtypes."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    from bert_tf import checkpoints
    from export.exporting import export
    from tests.conftest import make_batch

    export("encoder", str(tmp_path / "enc"), bert_config_file=os.path.join(minilm_dir, "config.json"),
           init_checkpoint=minilm_dir)
    encoder = checkpoints.load_hf(minilm_dir)
    batch = make_batch(encoder.bert_config, batch=3, seq=12)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "bert"
    request.model_spec.signature_name = "serving_default"
    for key, value in batch.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=tf.int32))
    wire = predict_pb2.PredictRequest.FromString(request.SerializeToString())  # as received over gRPC
    loaded = tf.saved_model.load(str(tmp_path / "enc"))
    signature = loaded.signatures[wire.model_spec.signature_name]
    assert set(signature.structured_input_signature[1]) == set(batch)
    outputs = signature(**{k: tf.constant(tf.make_ndarray(v)) for k, v in wire.inputs.items()})
    want = encoder(batch)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), want["pooled_output"].numpy(), atol=1e-5)
    np.testing.assert_allclose(outputs["sequence_output"].numpy(), want["sequence_output"].numpy(), atol=1e-5)
    assert len([k for k in outputs if k.startswith("encoder_outputs_")]) == encoder.bert_config.num_hidden_layers


def test_export_errors_are_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "export.export_saved_model", "--kind=classifier",
                          f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'x'}"], capture_output=True,
                         text=True, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert out.returncode == 1 and "export_saved_model: error:" in out.stderr and "Traceback" not in out.stderr
    assert "no fine-tuned model" in out.stderr and not (tmp_path / "x").exists()
