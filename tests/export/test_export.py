"""export: SavedModels taking raw strings, reloaded from a copied directory in a process that imports only
tensorflow and tensorflow_text, compared with the Keras model in this process; the op audit; TF Serving
PredictRequest protos run against the loaded signature."""

import collections
import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from tests import forking
from tests.conftest import graph_nodes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS_A = ["The quick brown fox.", "", "Naïve café déjà vu — 東京 ünïcödé", "word " * 10000,  # 50 kB
           "Short one here."]
TEXTS_B = ["A fox.", "Empty first.", "", "Another sentence.", "x"]


# Read by hand from github.com/tensorflow/serving, not from export/ops.py: at each release tag, the
# `org_tensorflow_text` url in tensorflow_serving/workspace.bzl (.../text/archive/v<version>.zip) and `_TF_VERSION`
# in tensorflow_serving/tools/pip_package/setup.py. What stops a release loading our exports follows from what they
# use: FastWordpieceTokenizeWithOffsets (in tensorflow-text from 2.7.0), DisableCopyOnRead (not in TensorFlow
# 2.9.1's op list, in 2.10.1's) and VarHandleOp's debug_name attribute (not in 2.13's VarHandleOp, in 2.15's).
SERVING_FACTS = {  # release: (TensorFlow, tensorflow-text linked, what it lacks)
    "2.7.0": ("2.7", "2.6.0", ["DisableCopyOnRead", "FastWordpieceTokenizeWithOffsets", "VarHandleOp.debug_name"]),
    "2.7.3": ("2.7", "2.7.3", ["DisableCopyOnRead", "VarHandleOp.debug_name"]),
    "2.9.3": ("2.9", "2.6.0", ["DisableCopyOnRead", "FastWordpieceTokenizeWithOffsets", "VarHandleOp.debug_name"]),
    "2.10.0": ("2.10", "2.7.3", ["VarHandleOp.debug_name"]),
    "2.14.1": ("2.14", "2.12.1", ["VarHandleOp.debug_name"]),
    "2.15.1": ("2.15", "2.12.1", []),
    "2.19.0": ("2.19", "2.12.1", []),
    "2.20.0": ("2.20", "2.20.0", []),
}


@pytest.fixture(scope="module")
def finetuned(minilm_dir, tmp_path_factory):
    """A small MRPC-format classifier fine-tuned for a few steps (tiny random encoder, the real uncased vocab)."""
    from bert_tf import BertConfig
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.classification import run_classifier
    from bert_tf.tasks import get_task
    from tests.tasks.test_finetuning import _pair_task

    root = tmp_path_factory.mktemp("export")
    data = _pair_task(root / "MRPC", 32, 8, 4)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    run_classifier(get_task("mrpc"), config, os.path.join(minilm_dir, "vocab.txt"), str(root / "model"),
                   FinetuneOptions(do_train=True, max_seq_length=32, train_batch_sizes=8, num_train_epochs=1),
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
outputs = {k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in args["inputs"].items()}).items()}
# The session-based loader, which TF Serving's C++ loader mirrors (restore op, init op, feeds by tensor name):
with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], args["dir"])
    signature_def = meta.signature_def[args["signature"]]
    fetched = session.run({k: v.name for k, v in signature_def.outputs.items()},
                          {signature_def.inputs[k].name: v for k, v in args["inputs"].items()})
assert set(fetched) == set(outputs)
for key, value in outputs.items():
    if value.dtype == object:
        assert (fetched[key] == value).all(), key
    else:
        np.testing.assert_allclose(fetched[key], value, atol=1e-5, err_msg=key)
plain = lambda v: [plain(x) for x in v] if isinstance(v, list) else v.decode() if isinstance(v, bytes) else v
print(json.dumps({k: plain(v.tolist()) for k, v in outputs.items()}))
'''


def _load_elsewhere(export_dir, tmp_path, signature, inputs):
    """Copy the export, then run a signature in a process that has imported only TF and tensorflow-text (forked from
    one that imported them, tests/forking.py), with `tf.saved_model.load` and with the session-based loader (the two
    must agree)."""
    copy = tmp_path / "copied"
    shutil.copytree(export_dir, copy)
    shutil.rmtree(export_dir)  # nothing may point back to where it was written
    script = tmp_path / "load.py"
    script.write_text(LOADER)
    out = forking.python([script, json.dumps({"dir": str(copy), "signature": signature, "inputs": inputs})],
                         timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=str(tmp_path),
                         preload="tensorflow_text")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), copy


def test_an_export_traces_its_serving_function_once_and_serves_without_run_time_assertions(finetuned, tmp_path,
                                                                                           monkeypatch):
    """TF keys a tf.function's traces on the save options while `tf.saved_model.save` runs, so a function traced
    before the save (to find the variables it captures) would be traced again inside it; and concatenating ragged
    tensors puts run-time assertions, each a conditional, into the graph. The first costs every export, the second
    every request."""
    from export import exporting

    modules = []
    task_module = exporting._task_module
    monkeypatch.setattr(exporting, "_task_module", lambda *args: modules.append(task_module(*args)) or modules[0])
    exporting.export("classifier", str(tmp_path / "1"), model_dir=str(finetuned / "model"))
    assert modules[0].serve.experimental_get_tracing_count() == 1
    assert modules[0].preprocessor.serve_pairs.experimental_get_tracing_count() == 1
    graph = modules[0].serve.get_concrete_function().graph.as_graph_def()
    ops = [node.op for node in graph.node] + [node.op for f in graph.library.function for node in f.node_def]
    assert "FastWordpieceTokenizeWithOffsets" in ops and "MatMul" in ops
    # the two: the embeddings' check of the sequence length, and that text_a and text_b come in pairs
    assert ops.count("Assert") == 2 and "If" not in ops


def test_classifier_export_takes_raw_text_and_matches_keras(finetuned, tmp_path):
    from bert_tf.finetuning import load_finetuned
    from bert_tf.tasks.classification import encode
    from bert_tf.tasks import Example
    from export.exporting import export

    from export import ops

    report = export("classifier", str(tmp_path / "exported" / "1"), model_dir=str(finetuned / "model"))
    assert report["unregistered"] == [] and report["unlisted"] == []  # every op is in the audit's tables
    assert set(report["tensorflow_text"]) == {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8",
                                              "RegexSplitWithOffsets"}
    assert report["min_tensorflow_text_overall"] == "2.7.0"  # FastWordpieceTokenizer's first release
    for release, (tf_version, text_version, lacks) in SERVING_FACTS.items():
        assert ops.SERVING_RELEASES[release] == (tf_version, text_version), release
        assert sorted(p.split()[0] for p in ops.serving_problems(report, release)) == lacks, release
    assert report["min_serving"] == "2.15.1"
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
    # texts that do not pair up are refused, not broadcast (one text_b against every text_a)
    import tensorflow as tf

    serve = tf.saved_model.load(str(copy)).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="the two texts of a pair must come in batches of the "):
        serve(text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B[:1]))


def test_preprocessor_export_packs_like_the_library(minilm_dir, tmp_path):
    from bert_tf.tasks.classification import encode
    from bert_tf.tasks import Example
    from export.exporting import export

    from tests.test_staging import _dead_pid, _saved_model

    vocab = os.path.join(minilm_dir, "vocab.txt")
    _saved_model(tmp_path / "pre", 1)  # an earlier export at the same path, replaced below
    dead = _dead_pid()
    _saved_model(tmp_path / f"pre.tmp-{dead}", 2)  # what an export killed before its swap leaves
    export("preprocessor", str(tmp_path / "pre"), vocab_file=vocab, seq_length=24)
    assert sorted(os.listdir(tmp_path)) == ["pre"]
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


def test_encoder_export_matches_keras_and_serves_predict_requests(minilm_dir, tmp_path, monkeypatch):
    """The TF-Hub-style encoder from real weights; a tensorflow-serving-api PredictRequest, decoded the way the
    model server decodes it, runs against the signature with the same input names and dtypes. Each function of the
    module was traced once, for the save (`__call__` once with dropout and once without)."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    from bert_tf import checkpoints
    from export import exporting
    from tests.conftest import make_batch

    modules = []
    pretrained_module = exporting._pretrained_module
    monkeypatch.setattr(exporting, "_pretrained_module",
                        lambda *args: modules.append(pretrained_module(*args)) or modules[0])
    exporting.export("encoder", str(tmp_path / "enc"), bert_config_file=os.path.join(minilm_dir, "config.json"),
                     init_checkpoint=minilm_dir)
    module = modules[0]
    assert [f.experimental_get_tracing_count() for f in (module.serve, module.serve_training, module.__call__)] \
        == [1, 1, 2]
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


def test_encoder_export_fine_tunes_in_keras_and_through_the_tf_hub_api(tiny_config, tmp_path):
    """The encoder SavedModel as a trainable layer: Keras 3's TFSMLayer on `serve` / `serve_training` (gradients
    reach every encoder weight), `SavedModelLayer` with AdamW learning a tiny task (a token present or not) whose
    result reloads from .keras and exports with the same outputs, and TF Hub's reusable-SavedModel API."""
    import keras
    import tensorflow as tf

    from bert_tf import BertEncoder, checkpoints
    from bert_tf.layers import SavedModelLayer
    from export.exporting import export
    from tests.conftest import make_batch

    encoder = BertEncoder(tiny_config)
    encoder(make_batch(tiny_config))
    checkpoints.save_original(encoder, str(tmp_path / "bert_model.ckpt"))
    tiny_config.to_json_file(str(tmp_path / "bert_config.json"))
    path = str(tmp_path / "enc")
    report = export("encoder", path, bert_config_file=str(tmp_path / "bert_config.json"),
                    init_checkpoint=str(tmp_path / "bert_model.ckpt"))
    # its training endpoint's dropout ops are in the audit's tables too: it loads where the other exports load
    assert report["unlisted"] == [] and report["min_serving"] == "2.15.1"
    rng = np.random.default_rng(0)
    x = make_batch(tiny_config, batch=64, seq=8, lengths=[8, 8, 6] * 21 + [8])
    y = (rng.random(64) < 0.5).astype("int32")
    x["input_word_ids"] = np.where(x["input_word_ids"] == 5, 6, x["input_word_ids"])
    x["input_word_ids"][np.flatnonzero(y), rng.integers(0, 6, y.sum())] = 5  # label: is piece 5 there
    n_weights = len(encoder.trainable_weights)

    def classifier(layer_class):
        inputs = {key: keras.Input((None,), dtype="int32", name=key) for key in x}
        layer = layer_class(path, call_endpoint="serve", call_training_endpoint="serve_training", trainable=True)
        return keras.Model(inputs, keras.layers.Dense(2)(layer(inputs)["pooled_output"])), layer

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for layer_class, optimizer, epochs in ((keras.layers.TFSMLayer, keras.optimizers.SGD(0.1), 1),
                                           (SavedModelLayer, keras.optimizers.AdamW(3e-3), 8)):
        model, layer = classifier(layer_class)
        assert len(layer.trainable_weights) == n_weights
        before = [w.numpy().copy() for w in layer.trainable_weights]
        model.compile(optimizer, loss)
        history = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0).history["loss"]
        assert all((b != w.numpy()).any() for b, w in zip(before, layer.trainable_weights))
    assert history[-1] < 0.5 * history[0], history
    tuned = model.predict(x, batch_size=len(y), verbose=0)  # one batch, as `serve` below runs it
    model.save(str(tmp_path / "tuned.keras"))
    reloaded = keras.saving.load_model(str(tmp_path / "tuned.keras"), safe_mode=False)
    np.testing.assert_array_equal(reloaded.predict(x, batch_size=len(y), verbose=0), tuned)
    model.export(str(tmp_path / "tuned"), verbose=False)
    exported = tf.saved_model.load(str(tmp_path / "tuned"))
    np.testing.assert_array_equal(exported.serve(x).numpy(), tuned)

    hub = tf.saved_model.load(path)  # what hub.KerasLayer(path, trainable=True) calls
    assert len(hub.trainable_variables) == n_weights and len(hub.variables) > n_weights
    assert list(hub.regularization_losses) == []
    with tf.GradientTape() as tape:
        out = hub(x, training=True)
        total = tf.reduce_sum(out["default"])
    assert set(out) == {"sequence_output", "pooled_output", "default", "encoder_outputs"}
    grads = tape.gradient(total, hub.trainable_variables)
    assert all(g is not None and np.abs(tf.convert_to_tensor(g)).max() > 0 for g in grads)
    assert np.abs(hub(x, training=True)["pooled_output"] - out["pooled_output"]).max() > 0  # dropout on
    np.testing.assert_allclose(hub(x)["default"], encoder(x)["pooled_output"], atol=1e-5)
    np.testing.assert_array_equal(hub(x)["sequence_output"], hub.serve(x)["sequence_output"])


def _bfloat16_gelu_ops(graph_def):
    """The names of GELU ops computing in bfloat16 anywhere in `graph_def` and its function library."""
    import tensorflow as tf

    return [n.name for n in graph_nodes(graph_def) if "Gelu" in n.name and "T" in n.attr and n.attr["T"].type == tf.bfloat16]


def _nodes(graph_def, op):
    return [n.name for n in graph_nodes(graph_def) if n.op == op]


def test_a_bfloat16_export_computes_its_gelu_in_float32_whatever_this_cpu_fuses(tiny_config, tmp_path,
                                                                                monkeypatch):
    """A process whose CPU fuses the GELU into oneDNN's bfloat16 GEMM traces Keras's bfloat16 GELU for that fusion
    (`bert_tf.onednn.fuses_activation_in_float32`), and hands oneDNN the bfloat16 attention scores for its softmax
    (`runs_bfloat16_in_float32`); the export runs on other machines and TF Serving builds, so it always casts to
    float32 for both. The CPU's answer is forced to yes here, so the test means the same on every CPU. The
    LayerNorms, which run as oneDNN's kernel in this process, are TensorFlow's portable ops in the export."""
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_utils

    from bert_tf import BertEncoder, checkpoints, onednn
    from bert_tf.layers.layer_norm import kernel_available
    from export.exporting import export
    from tests.conftest import make_batch
    from tests.layers.test_attention import softmax_dtypes

    monkeypatch.setattr(_pywrap_utils, "IsDataTypeSupportedByOneDNNOnThisCPU", lambda dtype: True)
    tiny_config = dataclasses.replace(tiny_config, num_attention_heads=2)  # head size 16, whose scale is exact
    tiny_config.to_json_file(str(tmp_path / "bert_config.json"))
    weights = BertEncoder(tiny_config)
    weights(make_batch(tiny_config))
    checkpoints.save_original(weights, str(tmp_path / "bert_model.ckpt"))
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        encoder = BertEncoder(tiny_config)
        x = {k: tf.constant(v) for k, v in make_batch(tiny_config).items()}
        in_process = tf.function(lambda: encoder(x, training=False)).get_concrete_function().graph.as_graph_def()
        assert _bfloat16_gelu_ops(in_process)  # traced for the fusion here
        assert softmax_dtypes(in_process) == ({"bfloat16"} if onednn.onednn_enabled() else {"float32"})
        kernels_here = kernel_available() and onednn.onednn_enabled()
        assert len(_nodes(in_process, "_MklLayerNorm")) == (2 * tiny_config.num_hidden_layers + 1) * kernels_here
        export("encoder", str(tmp_path / "enc"), bert_config_file=str(tmp_path / "bert_config.json"),
               init_checkpoint=str(tmp_path / "bert_model.ckpt"))
    finally:
        keras.config.set_dtype_policy("float32")
    loaded = tf.saved_model.load(str(tmp_path / "enc"))
    graph_def = loaded.signatures["serving_default"].graph.as_graph_def()
    assert any("Gelu" in n.name for f in graph_def.library.function for n in f.node_def)
    assert not _bfloat16_gelu_ops(graph_def)
    assert softmax_dtypes(graph_def) == {"float32"}
    assert not _nodes(graph_def, "_MklLayerNorm")


def test_export_errors_are_one_line(tmp_path):
    out = forking.python(["-m", "export.export_saved_model", "--kind=classifier", f"--model_dir={tmp_path}",
                          f"--export_dir={tmp_path / 'x'}"], cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                         timeout=300)
    assert out.returncode == 1 and "export_saved_model: error:" in out.stderr and "Traceback" not in out.stderr
    assert "no fine-tuned model" in out.stderr and not (tmp_path / "x").exists()


def test_saved_model_cli_shows_and_runs_the_classifier(finetuned, tmp_path):
    """`saved_model_cli show --all` lists the raw-string signature; `run` (through export.saved_model_cli, which
    registers the tensorflow-text ops) loads the export with the TF1 session loader, the one TF Serving's C++ code
    mirrors, and gives the same label as tf.saved_model.load; an export for a server whose tensorflow-text is
    older than the ops is refused before anything is written."""
    import tensorflow as tf

    from export.exporting import export

    export_dir = str(tmp_path / "cls")
    export("classifier", export_dir, model_dir=str(finetuned / "model"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    show = forking.python(["-m", "tensorflow.python.tools.saved_model_cli", "show", "--all", "--dir", export_dir],
                          env=env, timeout=300, preload="tensorflow_text")
    assert show.returncode == 0, show.stderr[-2000:]
    default = show.stdout.split("signature_def['serving_default']:")[1]
    for line in ("inputs['text_a'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)",
                 "outputs['label'] tensor_info:\n        dtype: DT_STRING",
                 "outputs['probabilities'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 2)"):
        assert line in default
    run = forking.python(["-m", "export.saved_model_cli", "run", "--dir", export_dir, "--tag_set", "serve",
                          "--signature_def", "serving_default", "--input_exprs",
                          'text_a=["The cat sat.", "Naïve"];text_b=["A cat.", ""]'], env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    printed = run.stdout.split("Result for output key label:")[1].splitlines()[1]
    want = tf.saved_model.load(export_dir).signatures["serving_default"](
        text_a=tf.constant(["The cat sat.", "Naïve"]), text_b=tf.constant(["A cat.", ""]))["label"].numpy()
    assert printed == str(want.tolist()).replace(", ", " ")
    with pytest.raises(ValueError, match="FastWordpieceTokenizeWithOffsets"):
        export("classifier", str(tmp_path / "old"), model_dir=str(finetuned / "model"), serving_tf_text="2.6")
    assert not (tmp_path / "old").exists() and not list(tmp_path.glob("old.tmp*"))
    from export import ops

    assert ops.check(export_dir, serving_tf_text="2.7") == ops.check(export_dir, serving_tf_text="2.7.0")
    assert ops.check(export_dir, serving_version="2.15.1")["min_serving"] == "2.15.1"
    with pytest.raises(ValueError, match=r"--serving_version=2.10: TF Serving 2.10.0 \(TensorFlow 2.10, "
                                         r"tensorflow-text 2.7.3\) cannot load .*VarHandleOp.debug_name needs "
                                         r"TensorFlow >= 2.15.*oldest release that loads it is 2.15.1"):
        ops.check(export_dir, serving_version="2.10")
    with pytest.raises(ValueError, match=r"--serving_version=2.15: .*its 2.15 releases: 2.15.1"):
        export("classifier", str(tmp_path / "x"), model_dir=str(finetuned / "model"), serving_version="2.15")
    with pytest.raises(ValueError, match=r"--serving_tf_text='2.x': not a version number"):
        export("classifier", str(tmp_path / "x"), model_dir=str(finetuned / "model"), serving_tf_text="2.x")
    assert not (tmp_path / "x").exists()


def test_a_bfloat16_export_stores_bfloat16_weights_and_serves_the_inference_policys_outputs(finetuned, tmp_path):
    """`--dtype=bfloat16`: the classifier's encoder under the bfloat16 inference policy (its dense weights stored
    in bfloat16), serving what `with_dtype(model, "bfloat16")` predicts when traced for another machine, as an
    export is; refused for the fine-tunable encoder, whose weights must train in float32."""
    import tensorflow as tf

    from bert_tf import onednn
    from bert_tf.finetuning import load_finetuned
    from bert_tf.models import with_dtype
    from bert_tf.tasks import Example
    from bert_tf.tasks.classification import encode
    from export.exporting import export

    export("classifier", str(tmp_path / "bf16"), model_dir=str(finetuned / "model"), dtype="bfloat16")
    loaded = tf.saved_model.load(str(tmp_path / "bf16"))
    reader = tf.train.load_checkpoint(str(tmp_path / "bf16" / "variables" / "variables"))
    stored = collections.Counter(dtype.name for name, dtype in reader.get_variable_to_dtype_map().items()
                                 if name.endswith("VARIABLE_VALUE"))
    assert stored["bfloat16"] == 1 * 6 * 2 + 2 and stored["float32"] > 0, stored  # 1 layer's 6 dense, the pooler
    served = loaded.signatures["serving_default"](text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
    model = with_dtype(load_finetuned(str(finetuned / "model")), "bfloat16")
    features = encode([Example(str(i), a, b) for i, (a, b) in enumerate(zip(TEXTS_A, TEXTS_B))],
                      str(finetuned / "model" / "vocab.txt"), True, 32)
    with onednn.traced_to_run_elsewhere():
        logits = model.predict(features, verbose=0)["logits"]
    np.testing.assert_allclose(served["probabilities"].numpy(), tf.nn.softmax(logits).numpy(), atol=1e-6)
    float32 = load_finetuned(str(finetuned / "model")).predict(features, verbose=0)["logits"]
    assert np.abs(served["probabilities"].numpy() - tf.nn.softmax(float32).numpy()).max() > 1e-6  # it tells them apart
    with pytest.raises(ValueError, match="--kind=encoder exports a fine-tunable encoder"):
        export("encoder", str(tmp_path / "enc"), bert_config_file="unused.json", dtype="bfloat16")
    with pytest.raises(ValueError, match=r"--dtype='bf16': expected one of float32, mixed_bfloat16, bfloat16"):
        export("classifier", str(tmp_path / "x"), model_dir=str(finetuned / "model"), dtype="bf16")
    with pytest.raises(ValueError, match="--kind=preprocessor has no model; drop --dtype"):
        export("preprocessor", str(tmp_path / "x"), vocab_file="unused.txt", dtype="float32")
    assert not (tmp_path / "enc").exists() and not (tmp_path / "x").exists()
