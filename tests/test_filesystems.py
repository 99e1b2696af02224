"""Every path on a filesystem other than the local disk: TensorFlow's in-memory `ram://`, in this process.

Records are generated, a model pretrained, stopped, resumed, evaluated and exported, and a classifier fine-tuned,
re-evaluated and exported, with every input and output path on `ram://`; each result is checked against the same
work on local disk (bytes, weights, scores, served outputs). `ram://` goes through the same `tf.io.gfile` calls as
`gs://` or `hdfs://`, so a path that silently went to Python's `open` instead would fail here.
"""

import json
import os
import uuid

import numpy as np
import pytest

from tests import forking
from tests.test_pretraining import CONFIG, PREDS, SEQ, data  # noqa: F401  (the session fixture)


@pytest.fixture
def ram():
    from bert_tf import fileio

    root = f"ram://{uuid.uuid4().hex}"
    yield root
    fileio.rmtree(root)
    assert not os.path.exists("ram:"), "a ram:// path was written to the local directory 'ram:'"


def _read(path):
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _weights(prefix):
    import tensorflow as tf

    reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # not load_checkpoint: see bert_tf.fileio._listed
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_generate_pretrain_resume_and_export_with_every_path_on_ram(data, ram, tmp_path):  # noqa: F811
    import tensorflow as tf

    from bert_tf import BertConfig, fileio
    from bert_tf.pretraining import PretrainingOptions, run_pretraining
    from data_gen.generate import Options, generate, output_paths
    from export.exporting import export

    for name in ("corpus.txt", "vocab.txt", "bert_config.json"):
        fileio.copy(str(data / name), f"{ram}/{name}")

    # build_vocab: read and written on ram://, the same file as on disk
    from data_gen.vocab import build_vocab

    for where in (ram, str(tmp_path)):
        build_vocab(f"{ram}/corpus.txt" if where == ram else str(data / "corpus.txt"), f"{where}/learned.txt",
                    vocab_size=300, num_unused=5)
    assert _read(f"{ram}/learned.txt") == (tmp_path / "learned.txt").read_bytes()

    # data_gen: the workers append to local files, which are put on ram:// at commit; the same bytes as on disk
    options = Options(max_seq_length=SEQ, max_predictions_per_seq=PREDS, dupe_factor=2, window_size=200)
    meta = generate(f"{ram}/corpus.txt", output_paths(f"{ram}/records/", 4), f"{ram}/vocab.txt", options,
                    num_workers=2, progress=False)
    local_meta = json.loads((data / "records" / "metadata.json").read_text())
    assert sorted(tf.io.gfile.listdir(f"{ram}/records")) == sorted(os.listdir(data / "records"))
    for shard in local_meta["shards"]:
        assert _read(f"{ram}/records/{shard['path']}") == (data / "records" / shard["path"]).read_bytes()
    on_ram = json.loads(_read(f"{ram}/records/metadata.json"))
    assert on_ram["input_files"] == [f"{ram}/corpus.txt"] and on_ram["vocab_file"] == f"{ram}/vocab.txt"
    for key in ("input_files", "vocab_file"):
        del on_ram[key], local_meta[key]
    assert on_ram == local_meta and meta["instances"] == local_meta["instances"]

    # pretraining: checkpoints, TensorBoard, eval results and the released-model directory on ram://
    config = BertConfig.from_json_file(f"{ram}/bert_config.json")
    train = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=16,
                               num_train_steps=20, num_warmup_steps=5, learning_rate=1e-3, save_checkpoints_steps=10,
                               iterations_per_loop=10, do_eval=True, max_eval_steps=2, vocab_file=f"{ram}/vocab.txt")
    out = f"{ram}/pretrained"
    first = run_pretraining(config, f"{ram}/records/*.tfrecord", out, train)
    assert first["train"]["step"] == 20
    names = set(tf.io.gfile.listdir(out))
    assert {"ckpt-10.index", "ckpt-20.index", "checkpoint", "eval_results.txt", "bert_model"} <= names, names
    assert tf.io.gfile.glob(f"{out}/train/events.out.tfevents.*")
    assert sorted(tf.io.gfile.listdir(f"{out}/bert_model")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint",
        "vocab.txt"]
    finished = _weights(f"{out}/bert_model/bert_model.ckpt")
    scores = _read(f"{out}/eval_results.txt")

    # stopped after step 10: the directory as a killed run leaves it; the rerun resumes from ram:// and ends equal
    for name in tf.io.gfile.glob(f"{out}/ckpt-20.*"):
        tf.io.gfile.remove(name)
    tf.io.gfile.rmtree(f"{out}/bert_model")
    tf.io.gfile.remove(f"{out}/eval_results.txt")
    with tf.io.gfile.GFile(f"{out}/checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-10"\nall_model_checkpoint_paths: "ckpt-10"\n')
    again = run_pretraining(config, f"{ram}/records/*.tfrecord", out, train)
    assert again["train"]["step"] == 20
    resumed = _weights(f"{out}/bert_model/bert_model.ckpt")
    assert finished.keys() == resumed.keys() and len(finished) > 30
    for name in finished:
        np.testing.assert_array_equal(finished[name], resumed[name], err_msg=name)
    assert _read(f"{out}/eval_results.txt") == scores

    # the same training on local disk: the same weights
    local = run_pretraining(config, str(data / "records" / "*.tfrecord"), str(tmp_path / "pretrained"),
                            PretrainingOptions(**{**train.__dict__, "vocab_file": str(data / "vocab.txt")}))
    assert local["eval"] == first["eval"]
    on_disk = _weights(str(tmp_path / "pretrained" / "bert_model" / "bert_model.ckpt"))
    for name in finished:
        np.testing.assert_array_equal(finished[name], on_disk[name], err_msg=name)

    # export from ram:// to ram://, beside the same export on disk: the same served outputs
    for where in (f"{ram}/export", str(tmp_path / "export")):
        export("mlm", where, bert_config_file=f"{out}/bert_model/bert_config.json",
               init_checkpoint=f"{out}/bert_model/bert_model.ckpt", vocab_file=f"{out}/bert_model/vocab.txt",
               seq_length=SEQ)
    assert "saved_model.pb" in tf.io.gfile.listdir(f"{ram}/export")
    text = tf.constant(["the module [MASK] a file", "a [MASK] sentence"])
    served = [tf.saved_model.load(where).signatures["serving_default"](text=text)
              for where in (f"{ram}/export", str(tmp_path / "export"))]
    assert served[0].keys() == served[1].keys()
    for key in served[0]:
        np.testing.assert_array_equal(served[0][key].numpy(), served[1][key].numpy(), err_msg=key)


def test_fine_tune_evaluate_and_export_a_classifier_on_ram(minilm_dir, ram, tmp_path):
    import tensorflow as tf

    from bert_tf import BertConfig, fileio
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks import get_task
    from bert_tf.tasks.classification import run_classifier
    from export.exporting import export
    from tests.tasks.test_finetuning import _pair_task

    local_data = _pair_task(tmp_path / "MRPC", 32, 8, 4)
    for name in os.listdir(local_data):
        fileio.copy(os.path.join(local_data, name), f"{ram}/MRPC/{name}")
    fileio.copy(os.path.join(minilm_dir, "vocab.txt"), f"{ram}/vocab.txt")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    options = FinetuneOptions(do_train=True, do_eval=True, do_predict=True, max_seq_length=32, train_batch_sizes=8,
                              num_train_epochs=1)
    out = f"{ram}/mrpc"
    trained = run_classifier(get_task("mrpc"), config, f"{ram}/vocab.txt", out, options, data_dir=f"{ram}/MRPC")
    local = run_classifier(get_task("mrpc"), config, os.path.join(minilm_dir, "vocab.txt"), str(tmp_path / "mrpc"),
                           options, data_dir=str(local_data))
    assert trained["dev"] == local["dev"]
    names = set(tf.io.gfile.listdir(out))
    assert {"model.keras", "task.json", "vocab.txt", "bert_config.json", "eval_results.txt"} <= names, names
    assert names == set(os.listdir(tmp_path / "mrpc"))
    for name in names - {"model.keras", "grid.json", "grid_results.tsv"}:  # (those two hold each cell's seconds)
        if not tf.io.gfile.isdir(f"{out}/{name}"):
            assert _read(f"{out}/{name}") == (tmp_path / "mrpc" / name).read_bytes(), name

    again = run_classifier(get_task("mrpc"), config, f"{ram}/vocab.txt", out, FinetuneOptions(
        do_eval=True, max_seq_length=32), data_dir=f"{ram}/MRPC")
    assert again["dev"] == trained["dev"]

    served = []
    for model_dir, where in ((out, f"{ram}/export"), (str(tmp_path / "mrpc"), str(tmp_path / "export"))):
        export("classifier", where, model_dir=model_dir)
        serve = tf.saved_model.load(where).signatures["serving_default"]
        served.append(serve(text_a=tf.constant(["a first sentence"]), text_b=tf.constant(["sentence a first"])))
    assert served[0].keys() == served[1].keys() and served[0]
    for key in served[0]:
        np.testing.assert_array_equal(served[0][key].numpy(), served[1][key].numpy(), err_msg=key)


def test_fileio_answers_for_ram_as_for_a_local_directory(ram, tmp_path):
    """The same tree on disk and on ram://, where TensorFlow's own calls make up names (`bert_tf.fileio`): every
    question gets the local answer, and a directory moves and goes whole."""
    from bert_tf import fileio

    for root in (str(tmp_path / "t"), f"{ram}/t"):
        for name in ("model.ckpt.index", "assets/a.txt", "assets.extra/ops.json", "assets/sub/b.txt"):
            fileio.makedirs(fileio.dirname(f"{root}/{name}"))
            with fileio.open(f"{root}/{name}", "w") as f:
                f.write(name)
    local, far = str(tmp_path / "t"), f"{ram}/t"

    def answers(root):
        names = ("model.ckpt", "model.ckpt.index", "assets", "asse", "assets.extra", "nothing")
        return ([(fileio.exists(f"{root}/{n}"), fileio.isdir(f"{root}/{n}"), fileio.isfile(f"{root}/{n}"))
                 for n in names], fileio.listdir(root), fileio.listdir(f"{root}/assets"),
                [(top[len(root):], sorted(dirs), sorted(files)) for top, dirs, files in fileio.walk(root)])

    assert answers(far) == answers(local)
    assert answers(local)[0][0] == (False, False, False) and answers(local)[2] == ["a.txt", "sub"]
    fileio.replace(f"{far}/assets", f"{ram}/moved")
    with fileio.open(f"{ram}/moved/sub/b.txt") as f:
        assert f.read() == "assets/sub/b.txt"
    assert not fileio.exists(f"{far}/assets") and fileio.exists(f"{far}/assets.extra/ops.json")
    fileio.rmtree(far)
    assert not fileio.exists(far) and fileio.listdir(ram) == ["moved"]
    with pytest.raises(FileNotFoundError):
        fileio.open(f"{ram}/missing.txt")
    assert fileio.dirname(f"{ram}") == "ram://" and fileio.absolute(f"{ram}/x") == f"{ram}/x"


def test_convert_between_formats_on_ram(tiny_config, ram, tmp_path):
    """convert_checkpoint's writers and readers on ram://: original -> HF -> keras-hub -> original (and .keras), each
    step from and to ram://, ends with the weights it started from; the HF files equal those written on disk."""
    import tensorflow as tf

    from bert_tf.checkpoints import save_original
    from bert_tf.checkpoints.conversion import convert
    from bert_tf.models import BertEncoder
    from tests.conftest import make_batch

    encoder = BertEncoder(tiny_config)
    encoder(make_batch(tiny_config))
    for variable in encoder.weights:  # not the initial values: a swapped or skipped tensor must show
        variable.assign(tf.random.stateless_normal(variable.shape, [len(variable.path), 7]) * 0.1)
    save_original(encoder, f"{ram}/original/bert_model.ckpt")
    tiny_config.to_json_file(f"{ram}/original/bert_config.json")
    convert(f"{ram}/original/bert_model.ckpt", f"{ram}/hf")
    convert(f"{ram}/hf", f"{ram}/kerashub", output_format_name="keras_hub")
    convert(f"{ram}/kerashub", f"{ram}/model.keras")  # (written only: convert_checkpoint does not read .keras)
    convert(f"{ram}/kerashub", f"{ram}/back/bert_model.ckpt")
    convert(f"{ram}/hf", str(tmp_path / "hf"))
    for name in ("config.json", "model.safetensors"):
        with tf.io.gfile.GFile(f"{ram}/hf/{name}", "rb") as f:
            assert f.read() == (tmp_path / "hf" / name).read_bytes(), name
    import keras

    assert len(keras.saving.load_model(f"{ram}/model.keras").weights) == len(encoder.weights)
    start = _weights(f"{ram}/original/bert_model.ckpt")
    end = _weights(f"{ram}/back/bert_model.ckpt")
    assert start.keys() == end.keys() and len(start) > 10
    for name in start:
        np.testing.assert_allclose(start[name], end[name], atol=0, rtol=0, err_msg=name)


UNREACHABLE = "gs://bert-tf-unreachable-bucket"


@pytest.mark.parametrize("module,flags,names", [
    ("data_gen.create_pretraining_data", ["--input_file={gs}/corpus.txt", "--output_file={tmp}/out.tfrecord",
                                          "--vocab_file={vocab}"], "{gs}/"),
    ("data_gen.create_pretraining_data", ["--input_file={tmp}/corpus.txt", "--output_file={gs}/out.tfrecord",
                                          "--vocab_file={vocab}"], "--output_file={gs}/out.tfrecord"),
    ("data_gen.beam", ["--input_file={tmp}/corpus.txt", "--output_prefix={tmp}/out", "--vocab_file={gs}/vocab.txt"],
     "{gs}/vocab.txt"),
    ("bert_tf.cli.run_pretraining", ["--input_file={gs}/records/*.tfrecord", "--output_dir={tmp}/out",
                                     "--bert_config_file=tiny", "--do_train", "--num_train_steps=2"], "{gs}/records"),
])
def test_an_unreachable_gs_path_is_one_line_naming_it(module, flags, names, minilm_dir, tmp_path):
    """Google Cloud Storage out of reach (no network, no credentials): TensorFlow's GCS client is sent to a proxy
    whose name cannot resolve (`.invalid`, RFC 2606), which it reports at once as it would a missing network, and
    without asking a metadata server for credentials. Nothing is written."""
    import subprocess
    import sys

    (tmp_path / "corpus.txt").write_text("The first sentence.\nThe second one.\n\nAnother document here.\n")
    values = {"gs": UNREACHABLE, "tmp": tmp_path, "vocab": os.path.join(minilm_dir, "vocab.txt")}
    env = {k: v for k, v in os.environ.items() if k.upper() not in ("HTTPS_PROXY", "GOOGLE_APPLICATION_CREDENTIALS")}
    env.update(https_proxy="http://proxy.invalid:9", NO_GCE_CHECK="true", TF_CPP_MIN_LOG_LEVEL="3")
    result = forking.python(["-m", module, *(f.format(**values) for f in flags)], env=env, timeout=120,
                            cwd=os.path.dirname(os.path.dirname(__file__)))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert names.format(**values) in lines[0] and "cannot reach" in lines[0] and "credentials" in lines[0], lines[0]
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]
