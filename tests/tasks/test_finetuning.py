"""Fine-tuning: the official GLUE metrics on hand-computed cases, the GLUE file readers and their errors, and
run_classifier end to end on small tasks in the original file formats (from real BERT weights and from scratch)."""

import json
import os
import random

import numpy as np
import pytest

from bert_tf.tasks import DataError, get_task, metrics, task_names

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------------------------------------- metrics
def test_metrics_on_hand_computed_cases():
    predictions = [1, 1, 1, 1, 0, 0, 0]
    labels = [1, 1, 1, 0, 1, 0, 0]  # tp 3, fp 1, fn 1, tn 2
    assert metrics.accuracy(predictions, labels) == pytest.approx(5 / 7)
    assert metrics.f1(predictions, labels) == pytest.approx(2 * 3 / (4 + 4))
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx((3 * 2 - 1 * 1) / np.sqrt(4 * 4 * 3 * 3))
    assert metrics.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # a constant prediction
    # Pearson of [1, 2, 3, 4] and [2, 4, 5, 9]: deviations [-1.5 -.5 .5 1.5], [-3 -1 0 4]; 11 / sqrt(5 * 26)
    assert metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / np.sqrt(5 * 26))
    # Spearman with a tie: ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4] -> 4.5 / sqrt(4.5 * 5)
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / np.sqrt(4.5 * 5))


# ------------------------------------------------------------------------------------------------- readers
def _write(path, rows):
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows), encoding="utf-8")


def test_every_glue_format_reads(tmp_path):
    assert set(task_names()) >= {"cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "qnli", "rte", "wnli"}
    _write(tmp_path / "train.tsv", [["gj04", 1, "", "The sailors rode the breeze clear of the rocks."]])  # CoLA
    (example,) = get_task("CoLA").examples(str(tmp_path), "train")
    assert (example.text_a, example.text_b, example.label) == ("The sailors rode the breeze clear of the rocks.",
                                                               None, "1")
    # CoLA is scored by Matthews correlation, and reports accuracy too, as the original's eval_results.txt does
    assert get_task("cola").metrics([1, 0, 1], [1, 1, 1]) == {"mcc": 0.0, "accuracy": pytest.approx(2 / 3)}
    mnli = tmp_path / "mnli"
    mnli.mkdir()
    header = ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p", "sentence1", "sentence2",
              "label1", "gold_label"]
    _write(mnli / "dev_mismatched.tsv", [header, [0, 1, 2, "g", "", "", "", "", "A man eats.", "Someone eats.",
                                                   "entailment", "entailment"]])
    (example,) = get_task("mnli").examples(str(mnli), "dev_mismatched")
    assert (example.text_a, example.text_b, example.label) == ("A man eats.", "Someone eats.", "entailment")
    _write(tmp_path / "test.tsv", [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], [7, 1, 2, "a", "b"]])
    (example,) = get_task("MRPC").examples(str(tmp_path), "test")
    assert (example.guid, example.text_a, example.text_b, example.label) == ("7", "a", "b", None)
    stsb = tmp_path / "stsb"
    stsb.mkdir()
    _write(stsb / "dev.tsv", [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                               "sentence2", "score"], [0, "g", "f", 2012, 1, "s", "s", "A plane.", "An airplane.",
                                                       "5.000"]])
    (example,) = get_task("STS-B").examples(str(stsb), "dev")
    assert example.label == 5.0 and get_task("sts-b").num_outputs == 1


def test_bad_rows_are_counted_or_named(tmp_path, caplog):
    qqp = get_task("qqp")
    _write(tmp_path / "train.tsv", [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                                    [0, 1, 2, "How?", "Why?", 0], [1, 3, 4, "truncated row"], [2, 5, 6, "A", "B", 1]])
    examples = qqp.examples(str(tmp_path), "train")
    assert [e.label for e in examples] == ["0", "1"]
    assert "skipped 1 malformed line(s)" in caplog.text
    _write(tmp_path / "dev.tsv", [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                                  [0, 1, 2, "How?", "Why?", "maybe"]])
    with pytest.raises(DataError, match=r"dev.tsv:2: label 'maybe' is not one of qqp's labels \['0', '1'\]"):
        qqp.examples(str(tmp_path), "dev")
    _write(tmp_path / "test.tsv", [["id", "question1", "question2"]])
    with pytest.raises(DataError, match="test.tsv: no usable examples"):
        qqp.examples(str(tmp_path), "test")
    # a test row is refused, not skipped: predictions are one line per row, and later lines would shift
    _write(tmp_path / "test.tsv", [["id", "question1", "question2"], [0, "How?", "Why?"], [1, "truncated"],
                                   [2, "A", "B"]])
    with pytest.raises(DataError, match=r"test.tsv:3: 2 column\(s\) where the test rows need 3; fix or remove"):
        qqp.examples(str(tmp_path), "test")
    with open(tmp_path / "test.tsv", "w") as f:  # blank lines, inside and at the end, are no rows
        f.write("id\tquestion1\tquestion2\n0\tHow?\tWhy?\n\n1\tA\tB\n\n")
    assert [e.guid for e in qqp.examples(str(tmp_path), "test")] == ["0", "1"]
    with pytest.raises(DataError, match="rte.*not found|not found.*rte"):
        get_task("rte").examples(str(tmp_path / "nowhere"), "train")
    # a stray carriage return inside a line joins its two sides, as TensorFlow's GFile (the original's reader) reads
    # it, instead of cutting the row short; CRLF line ends are plain ends
    mrpc = tmp_path / "mrpc"
    mrpc.mkdir()
    (mrpc / "train.tsv").write_bytes(b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t5\t6\ta\tb\rc\r\n")
    (example,) = get_task("mrpc").examples(str(mrpc), "train")
    assert (example.text_a, example.text_b, example.label) == ("a", "bc", "1")
    # XNLI counts its short rows as the GLUE readers do
    (tmp_path / "xnli.dev.tsv").write_text("language\tgold_label\ta\tb\tc\td\tsentence1\tsentence2\n"
                                           "zh\tentailment\t\t\t\t\tshort row\n"
                                           "zh\tneutral\t\t\t\t\tA.\tB.\n")
    caplog.clear()
    (example,) = get_task("xnli").examples(str(tmp_path), "dev")
    assert example.label == "neutral" and "xnli.dev.tsv: skipped 1 malformed line(s)" in caplog.text
    (tmp_path / "xnli.test.tsv").write_bytes((tmp_path / "xnli.dev.tsv").read_bytes())
    with pytest.raises(DataError, match=r"xnli.test.tsv:2: 7 column\(s\) where the test rows need 8"):
        get_task("xnli").examples(str(tmp_path), "test")
    # another language's short row, or a blank line, is no row of this language's predictions: skipped
    (tmp_path / "xnli.test.tsv").write_text((tmp_path / "xnli.dev.tsv").read_text().replace("zh\tentailment",
                                                                                            "th\tentailment") + "\n")
    (example,) = get_task("xnli").examples(str(tmp_path), "test")
    assert example.label == "neutral"
    with pytest.raises(DataError, match="unknown task"):
        get_task("squadd")


# ------------------------------------------------------------------------------------------------ end to end
def _pair_task(directory, n_train, n_dev, n_test, seed=0):
    """MRPC-format files of a sentence-pair task from real docstring sentences: B is A with its words shuffled and
    two dropped (label 1) or another sentence (label 0). Deciding needs both segments."""
    from bench.common import docstring_lines

    lines = [line for line in docstring_lines() if len(line.split()) >= 6]
    rng = random.Random(seed)
    rng.shuffle(lines)

    def rows(offset, n, test=False):
        out = [["index" if test else "Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]]
        for k in range(n):
            a = lines[offset + k]
            if rng.random() < 0.5:
                words = a.split()
                rng.shuffle(words)
                b, y = " ".join(words[:-2]), 1
            else:
                b, y = lines[rng.randrange(len(lines))], 0
            out.append([k if test else y, k, k + 1, a, b])
        return out

    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / "train.tsv", rows(0, n_train))
    _write(directory / "dev.tsv", rows(n_train, n_dev))
    _write(directory / "test.tsv", rows(n_train + n_dev, n_test, test=True))
    return directory


def test_run_classifier_cli_from_real_weights_beats_random_weights(minilm_dir, tmp_path):
    """The CLI fine-tunes all-MiniLM-L6-v2 (real BERT weights, HF directory) on 160 pairs and writes the original's
    outputs; the same run from random weights of the same architecture stays far behind. (Two epochs at 1e-4: a
    single epoch at 2e-4 collapses to one class for some example orders.)"""
    data = _pair_task(tmp_path / "MRPC", 160, 120, 20)
    common = ["--task_name=MRPC", f"--data_dir={data}", f"--vocab_file={minilm_dir}/vocab.txt",
              f"--bert_config_file={minilm_dir}/config.json", "--max_seq_length=32", "--train_batch_size=16",
              "--learning_rate=1e-4", "--num_train_epochs=2", "--do_train", "--do_eval"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    pretrained = forking.python(["-m", "bert_tf.cli.run_classifier", *common, "--do_predict",
                                 f"--init_checkpoint={minilm_dir}", f"--output_dir={tmp_path / 'pre'}"],
                                env=env, cwd=ROOT, timeout=600)
    assert pretrained.returncode == 0, pretrained.stderr[-3000:]
    scratch = forking.python(["-m", "bert_tf.cli.run_classifier", *common, f"--output_dir={tmp_path / 'scratch'}"],
                             env=env, cwd=ROOT, timeout=600)
    assert scratch.returncode == 0, scratch.stderr[-3000:]

    def results(name):
        lines = (tmp_path / name / "eval_results.txt").read_text().splitlines()
        return {k: float(v) for k, v in (line.split(" = ") for line in lines)}

    pre, rand = results("pre"), results("scratch")
    labels = [int(line.split("\t")[0]) for line in (data / "dev.tsv").read_text().splitlines()[1:]]
    majority = max(np.mean(labels), 1 - np.mean(labels))
    print(f"dev accuracy: pretrained {pre['eval_accuracy']:.3f}, random init {rand['eval_accuracy']:.3f}, "
          f"majority {majority:.3f}")
    assert pre["eval_accuracy"] > majority + 0.25, (pre, majority)
    assert pre["eval_accuracy"] > rand["eval_accuracy"] + 0.1, (pre, rand)
    assert set(pre) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"} and pre["global_step"] == 20
    # the Estimator's `loss`: the mean of the batch means, 120 dev examples in batches of 8 (the default)
    assert pre["loss"] == pytest.approx(pre["eval_loss"], rel=1e-6)
    fields = [line.split("\t") for line in (tmp_path / "pre" / "test_results.tsv").read_text().splitlines()]
    assert all(text == str(np.float32(text)) for row in fields for text in row)  # float32 as str() writes it
    probabilities = np.array(fields, np.float32)
    assert probabilities.shape == (20, 2) and np.allclose(probabilities.sum(1), 1, atol=1e-6)
    submission = (tmp_path / "pre" / "glue_submission" / "MRPC.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 21
    assert [line.split("\t")[1] for line in submission[1:]] == [str(p) for p in probabilities.argmax(1)]
    info = json.loads((tmp_path / "pre" / "task.json").read_text())
    assert info["task"] == "mrpc" and info["labels"] == ["0", "1"] and info["max_seq_length"] == 32
    assert {"model.keras", "vocab.txt", "bert_config.json"} <= set(os.listdir(tmp_path / "pre"))


@pytest.mark.parametrize("batch_size", [4, 64])
def test_tfds_rows_are_the_rows_tfds_as_numpy_gives(batch_size):
    """`tfds_rows`, which the TFDS readers use, gives `tfds.as_numpy`'s rows in its order (values equal, with a
    variable-length feature as a list): scalars, a fixed-shape feature and nested variable-length ones (SQuAD's
    answers), lengths from 0 up, a batch in which every row has the same length, a short last batch; and no row
    from an empty split."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from bert_tf.tasks.base import tfds_rows

    lengths = [0, 3, 1, 2, 2, 2, 2, 2, 0, 5, 1]
    rows = [{"id": f"q{i}".encode(), "label": -i, "pair": np.array([i, 2 * i], np.int64),
             "answers": {"text": [f"a{i}-{j}".encode() for j in range(n)], "answer_start": list(range(i, i + n))}}
            for i, n in enumerate(lengths)]
    spec = {"id": tf.TensorSpec([], tf.string), "label": tf.TensorSpec([], tf.int64),
            "pair": tf.TensorSpec([2], tf.int64), "answers": {"text": tf.TensorSpec([None], tf.string),
                                                              "answer_start": tf.TensorSpec([None], tf.int32)}}
    dataset = tf.data.Dataset.from_generator(lambda: iter(rows), output_signature=spec)
    plain = lambda row: tf.nest.map_structure(lambda value: np.asarray(value).tolist(), row)  # noqa: E731
    got = list(tfds_rows(dataset, batch_size))
    assert [plain(row) for row in got] == [plain(row) for row in tfds.as_numpy(dataset)]
    assert [plain(row) for row in got] == [plain(row) for row in rows]
    assert all(isinstance(row["answers"]["text"], list) for row in got)
    assert list(tfds_rows(dataset.take(0), batch_size)) == []


def test_regression_grid_restarts_and_tfds(minilm_dir, tmp_path):
    """STS-B from TFDS (offline mock data) with a regression head; a grid of two learning rates x two restarts
    keeps the best on dev; evaluation alone reloads the saved model and reproduces the best run's dev figures."""
    import tensorflow_datasets as tfds

    from bert_tf import BertConfig
    from bert_tf.finetuning import FinetuneOptions, read_split
    from bert_tf.tasks.classification import batch_mean_loss, run_classifier

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    options = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=16, train_batch_sizes=8,
                              learning_rates=(1e-3, 1e-4), num_restarts=2, num_train_epochs=1)
    # the original's `loss`: batches [1, 2], [3, 4], [5] -> mean(1.5, 3.5, 5)
    assert batch_mean_loss(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 2) == pytest.approx(10 / 3)
    with pytest.raises(DataError, match="--tfds_name=xnli: xnli is read from its own files only"):
        read_split(get_task("xnli"), "train", None, "xnli")
    with tfds.testing.mock_data(num_examples=24):
        guids = [int(e.guid) for e in read_split(get_task("sts-b"), "test", None, "glue/stsb")]
        assert guids == sorted(guids) and len(set(guids)) > 1  # the GLUE file's order, which TFDS does not keep
        results = run_classifier(get_task("sts-b"), config, os.path.join(minilm_dir, "vocab.txt"),
                                 str(tmp_path / "stsb"), options, tfds_name="glue/stsb")
        grid = results["grid"]
        assert [(g["learning_rate"], g["seed"]) for g in grid] == [(1e-3, 12345), (1e-3, 12346), (1e-4, 12345),
                                                                   (1e-4, 12346)]
        best = max(grid, key=lambda g: g["spearman"])
        assert results["dev"]["spearman"] == pytest.approx(best["spearman"], abs=1e-6)
        info = json.loads((tmp_path / "stsb" / "task.json").read_text())
        assert (info["learning_rate"], info["seed"], info["kind"]) == (best["learning_rate"], best["seed"],
                                                                       "regression")
        again = run_classifier(get_task("sts-b"), config, os.path.join(minilm_dir, "vocab.txt"),
                               str(tmp_path / "stsb"), FinetuneOptions(do_eval=True, max_seq_length=16),
                               tfds_name="glue/stsb")
        assert again["dev"]["pearson"] == pytest.approx(results["dev"]["pearson"], abs=1e-5)
    with pytest.raises(ValueError, match="needs --do_eval"):
        run_classifier(get_task("sts-b"), config, "", str(tmp_path), FinetuneOptions(
            do_train=True, learning_rates=(1e-3, 1e-4)))


@pytest.mark.filterwarnings("error::UserWarning")
def test_a_fine_tuning_run_traces_its_train_step_once_and_warns_nothing(monkeypatch, tmp_path):
    """The optimizer's slots exist before the first step: a step that creates variables is traced twice by
    tf.function, and a second trace of BERT's step is seconds of CPU per fine-tuning run. And Keras has nothing to
    warn about. The input has tf.data's autotuning and static rewrites off (`bert_tf.tf_data`: the rewrites would
    copy the data it reads). Data moved into tensors by `as_tensors` (the dict emptied) trains to the same
    weights as the arrays."""
    import tensorflow as tf

    from bert_tf import BertConfig, training
    from bert_tf.finetuning import Cell, FinetuneOptions, as_tensors, fit
    from bert_tf.models import BertClassifier

    traces, options_seen = [], []
    step = BertClassifier.train_step
    monkeypatch.setattr(BertClassifier, "train_step", lambda self, data: traces.append(1) or step(self, data))
    train = training.train

    def seen(model, strategy, dataset_fn, *a, **kw):
        options_seen.append(dataset_fn(tf.distribute.InputContext()).options())
        return train(model, strategy, dataset_fn, *a, **kw)

    monkeypatch.setattr(training, "train", seen)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=8)
    options = FinetuneOptions(do_train=True, train_batch_sizes=4, num_train_epochs=2)
    ids = np.random.default_rng(0).integers(1, 64, (8, 8)).astype(np.int32)
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    labels = {"logits": np.array([0, 1] * 4, np.int32)}
    build = lambda: get_task("mrpc").family.build_model(get_task("mrpc"), config, options.dropout_rate)  # noqa: E731
    model, steps = fit(build, inputs, labels, options, Cell(4, 1e-3, 2, 1), tf.distribute.get_strategy(),
                       str(tmp_path / "arrays"))
    assert model.optimizer.iterations.numpy() == steps == 4 and len(traces) == 1
    assert [(o.autotune.enabled, o.experimental_optimization.apply_default_optimizations)
            for o in options_seen] == [(False, False)]

    moved = dict(inputs)
    tensors = as_tensors(moved)
    assert moved == {} and all(tf.is_tensor(t) and np.array_equal(t, inputs[k]) for k, t in tensors.items())
    assert as_tensors(dict(tensors))["input_mask"] is tensors["input_mask"]  # a tensor is not copied again
    again, _ = fit(build, tensors, as_tensors(dict(labels)), options, Cell(4, 1e-3, 2, 1),
                   tf.distribute.get_strategy(), str(tmp_path / "tensors"))
    for a, b in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_predict_traces_the_model_once_for_a_short_last_batch_and_returns_each_rows_outputs(tiny_config):
    """Keras would trace its predict function again for the short last batch (11 rows in batches of 4: 4, 4, 3);
    `finetuning.predict` pads it, and each row's outputs are still the model's for that row alone."""
    import keras

    from bert_tf.finetuning import predict
    from tests.conftest import make_batch

    task = get_task("mrpc")
    model = task.family.build_model(task, tiny_config, 0.1)
    traces, calls = [], []  # each trace's batch size; the batch sizes of each call of Keras's predict
    step, keras_predict = model.predict_step, model.predict

    def spy(batches, **kw):  # a tf.data input without autotuning (`bert_tf.tf_data`)
        calls.append([len(b["input_word_ids"]) for b in batches] if batches.options().autotune.enabled is False
                     else None)
        return keras_predict(batches, **kw)

    model.predict_step = lambda data: traces.append(keras.tree.flatten(data)[0].shape[0]) or step(data)
    model.predict = spy
    batch = make_batch(tiny_config, batch=11, seq=9, lengths=[9, 8, 7, 6, 5, 9, 8, 7, 6, 5, 4])
    logits = predict(model, batch, 4)["logits"]
    assert traces == [4] and calls == [[4, 4, 4]] and logits.shape == (11, 2)
    for row in (0, 7, 10):
        alone = model({k: v[row:row + 1] for k, v in batch.items()}, training=False)["logits"][0]
        np.testing.assert_allclose(logits[row], alone, rtol=1e-5, atol=1e-6)
    # fewer rows than a batch: one batch of their own size, not padded to the batch size
    few = predict(model, {k: v[:2] for k, v in batch.items()}, 256)["logits"]
    assert few.shape == (2, 2) and calls[1] == [2] and len(traces) == 2
    np.testing.assert_allclose(few, logits[:2], rtol=1e-5, atol=1e-6)


def _swag_task(data, n_train, n_dev, n_test, seed=0):
    """SWAG-format CSVs in `data` from docstring sentences: the right ending is the context's words shuffled (less
    its last two), three others are other sentences."""
    import csv

    from bench.common import docstring_lines

    lines = [line for line in docstring_lines() if 6 <= len(line.split()) <= 14]
    rng = random.Random(seed)
    rng.shuffle(lines)
    data.mkdir()

    def write(name, offset, n, labelled=True):
        with open(data / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                             "ending0", "ending1", "ending2", "ending3"] + (["label"] if labelled else []))
            for k in range(n):
                context = lines[offset + k]
                words = context.split()
                rng.shuffle(words)
                endings = [rng.choice(lines) for _ in range(4)]
                label = rng.randrange(4)
                endings[label] = " ".join(words[:-2])
                writer.writerow([k, "v", k, context, context, "Then", "gold", *endings] + ([label] if labelled
                                                                                          else []))

    write("train.csv", 0, n_train)
    write("val.csv", 1000, n_dev)
    write("test.csv", 2000, n_test, labelled=False)
    return data


def test_run_swag_cli_picks_the_right_ending(minilm_dir, tmp_path):
    """SWAG-format CSVs from docstring sentences (`_swag_task`). From all-MiniLM-L6-v2's weights the model beats
    chance (0.25) by far."""
    data = _swag_task(tmp_path / "swag", 48, 60, 8)
    out = forking.python(["-m", "bert_tf.cli.run_swag", f"--data_dir={data}",
                          f"--vocab_file={minilm_dir}/vocab.txt", f"--bert_config_file={minilm_dir}/config.json",
                          f"--init_checkpoint={minilm_dir}", "--do_train", "--do_eval", "--do_predict",
                          "--max_seq_length=40", "--train_batch_size=8", "--learning_rate=2e-4",
                          "--num_train_epochs=1", f"--output_dir={tmp_path / 'out'}"],
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    results = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    print(f"SWAG-format task: dev accuracy {float(results['eval_accuracy']):.3f} (chance 0.25)")
    assert float(results["eval_accuracy"]) > 0.6
    probabilities = np.loadtxt(tmp_path / "out" / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (8, 4) and np.allclose(probabilities.sum(1), 1, atol=1e-5)


def test_swag_reader_errors(tmp_path):
    swag = get_task("swag")
    (tmp_path / "train.csv").write_text("sent1,sent2,ending0\na,b,c\n")
    with pytest.raises(DataError, match="not a SWAG file .*ending1"):
        swag.examples(str(tmp_path), "train")
    (tmp_path / "val.csv").write_text("sent1,sent2,ending0,ending1,ending2,ending3,label\na,b,c,d,e,f,7\n")
    with pytest.raises(DataError, match=r"val.csv:2: label '7'"):
        swag.examples(str(tmp_path), "dev")
    (tmp_path / "val.csv").write_text("sent1,sent2,ending0,ending1,ending2,ending3,label\nA,b,c,d,e,f,2\n")
    (example,) = swag.examples(str(tmp_path), "dev")
    assert example.text_a == "A" and example.choices == ("b c", "b d", "b e", "b f") and example.label == "2"


def test_xnli_reads_the_originals_format(tmp_path):
    (tmp_path / "multinli").mkdir()
    _write(tmp_path / "multinli" / "multinli.train.de.tsv", [["premise", "hypo", "label"],
                                                            ["Ein Mann isst.", "Jemand isst.", "entailment"],
                                                            ["Ein Hund.", "Eine Katze.", "contradictory"]])
    header = ["language", "gold_label", "a", "b", "c", "d", "sentence1", "sentence2"]
    _write(tmp_path / "xnli.dev.tsv", [header, ["de", "neutral", "", "", "", "", "Er läuft.", "Er eilt."],
                                      ["fr", "neutral", "", "", "", "", "Il court.", "Il se presse."]])
    task = get_task("xnli-de")
    train = task.examples(str(tmp_path), "train")
    assert [(e.text_a, e.label) for e in train] == [("Ein Mann isst.", "entailment"), ("Ein Hund.", "contradiction")]
    (dev,) = task.examples(str(tmp_path), "dev")
    assert (dev.text_a, dev.text_b, dev.label) == ("Er läuft.", "Er eilt.", "neutral")
    assert get_task("xnli").language == "zh"
    with pytest.raises(DataError, match="no usable examples for language 'zh'"):
        get_task("xnli").examples(str(tmp_path), "dev")


def test_evaluation_alone_reports_the_step_of_the_fine_tuned_model(tmp_path, caplog):
    """A run that only evaluates the model fine-tuned earlier in its output_dir writes that model's step (a
    reloaded model carries no optimizer step); with no model there and no checkpoint given it refuses rather than
    write the figures of untrained weights (which the original's Estimator writes after a line in its log), and
    with a grid there that has not finished, rather than score --init_checkpoint's encoder with a fresh head."""
    import dataclasses

    from bench.common import docstring_lines

    from bert_tf import BertConfig
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.classification import run_classifier

    sentences = [line for line in docstring_lines() if len(set(line.split())) >= 4][:60]
    rng = random.Random(0)
    rows = ["label\tsentence"]
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        rng.shuffle(words) if i % 2 else None
        rows.append(f"{'shuffled' if i % 2 else 'original'}\t{' '.join(words)}")
    (tmp_path / "train.tsv").write_text("\n".join(rows[:41]) + "\n")
    (tmp_path / "dev.tsv").write_text("\n".join(rows[:1] + rows[41:]) + "\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted({c for s in sentences for c in s.lower()
                                                                   if not c.isspace()})
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    task, vocab_file = get_task("word_order"), str(tmp_path / "vocab.txt")
    options = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=32, train_batch_sizes=8,
                              num_train_epochs=1.0)

    def global_step(output_dir):
        lines = (tmp_path / output_dir / "eval_results.txt").read_text().splitlines()
        return [line for line in lines if line.startswith("global_step")]

    run_classifier(task, config, vocab_file, str(tmp_path / "out"), options, data_dir=str(tmp_path))
    assert global_step("out") == ["global_step = 5"]  # 40 examples / 8
    evaluate_only = FinetuneOptions(do_eval=True, max_seq_length=32)
    os.remove(tmp_path / "out" / "eval_results.txt")
    run_classifier(task, config, vocab_file, str(tmp_path / "out"), evaluate_only, data_dir=str(tmp_path))
    assert global_step("out") == ["global_step = 5"]
    # evaluation alone reads the model as it was saved: flags that say otherwise are refused, and one that is not
    # read is said to be
    other_vocab = tmp_path / "other_vocab.txt"
    other_vocab.write_text("\n".join(vocab[:5] + vocab[5:][::-1]) + "\n")  # the same size, other ids
    bigger = dataclasses.replace(config, hidden_size=32, intermediate_size=64)
    for args, message in (((config, str(other_vocab), evaluate_only), "--vocab_file=.*other_vocab.txt is not the "
                                                                      "vocabulary the model"),
                          ((bigger, vocab_file, evaluate_only), "--bert_config_file: hidden_size=32, "
                                                                "intermediate_size=64, but the model fine-tuned"),
                          ((config, vocab_file, dataclasses.replace(evaluate_only, dtype="bf16")),
                           "--dtype=bf16: the model in --output_dir=.* runs as it was saved \\(float32\\)")):
        with pytest.raises(ValueError, match=message):
            run_classifier(task, args[0], args[1], str(tmp_path / "out"), args[2], data_dir=str(tmp_path))
    with caplog.at_level("WARNING"):
        run_classifier(task, config, vocab_file, str(tmp_path / "out"),
                       dataclasses.replace(evaluate_only, init_checkpoint=str(tmp_path / "elsewhere")),
                       data_dir=str(tmp_path))
    assert "--init_checkpoint=" in caplog.text and "is not read: --output_dir=" in caplog.text
    with pytest.raises(ValueError, match=r"fresh holds no fine-tuned model \(model.keras\) to evaluate or predict "
                                         r"with, and no --init_checkpoint is given"):  # untrained weights' figures
        run_classifier(task, config, vocab_file, str(tmp_path / "fresh"), evaluate_only, data_dir=str(tmp_path))
    assert not (tmp_path / "fresh" / "eval_results.txt").exists()
    # a grid killed before it saved its model: scoring --init_checkpoint's encoder with a fresh head is refused
    os.remove(tmp_path / "out" / "model.keras")
    os.remove(tmp_path / "out" / "eval_results.txt")
    with pytest.raises(ValueError, match=r"out holds a fine-tuning grid that has not finished \(grid.json, no "
                                         r"model.keras yet\): rerun the training command"):
        run_classifier(task, config, vocab_file, str(tmp_path / "out"),
                       dataclasses.replace(evaluate_only, init_checkpoint=str(tmp_path / "out" / "grid")),
                       data_dir=str(tmp_path))
    assert not (tmp_path / "out" / "eval_results.txt").exists()


def test_a_bfloat16_fine_tuned_model_evaluates_with_its_own_dtype_flag(tiny_config, tmp_path):
    """The CLIs build `BertEncoder(config, dtype=...)`: such a model reads back as mixed_bfloat16 (it read back as
    float32, the global policy, so `--dtype=bf16` with evaluation alone was refused as contradicting it)."""
    import dataclasses

    from bert_tf.finetuning import FinetuneOptions, MODEL_FILE, check_fits_model, load_finetuned

    model = get_task("mrpc").family.build_model(get_task("mrpc"), tiny_config, 0.1, "mixed_bfloat16")
    model.save(tmp_path / MODEL_FILE)
    loaded = load_finetuned(str(tmp_path))
    options = FinetuneOptions(do_eval=True)
    check_fits_model(str(tmp_path), loaded, dataclasses.replace(options, dtype="bf16"))
    with pytest.raises(ValueError, match=r"--dtype=fp32: .* runs as it was saved \(mixed_bfloat16\)"):
        check_fits_model(str(tmp_path), loaded, dataclasses.replace(options, dtype="fp32"))


def test_the_training_order_is_a_new_permutation_each_epoch_and_checkpoints_in_bytes(tmp_path):
    """`example_order`: every epoch is a permutation of the examples, epochs differ, the same seed gives the same
    order and another seed another; a checkpoint of the position, with autotuning off as training reads it, stays
    a few KB at 100,000 examples (a shuffle buffer of the set would hold every index) and resumes at the next
    index; no examples at all is refused rather than an endless empty order."""
    import tensorflow as tf

    from bert_tf.finetuning import example_order
    from bert_tf.tf_data import without_autotuning

    count = 100_000
    order = iter(example_order(count, seed=3).batch(count))
    first, second = next(order).numpy(), next(order).numpy()
    assert sorted(first) == sorted(second) == list(range(count)) and (first != second).any()
    assert (next(iter(example_order(count, seed=3).batch(count))).numpy() == first).all()
    assert (next(iter(example_order(count, seed=4).batch(count))).numpy() != first).any()
    position = iter(without_autotuning(example_order(count, seed=3)))
    for _ in range(count + 10):  # into the second epoch
        next(position)
    saved = tf.train.Checkpoint(data=position).write(str(tmp_path / "position"))
    assert sum(os.path.getsize(path) for path in tmp_path.glob("position*")) < 5_000
    resumed = iter(without_autotuning(example_order(count, seed=3)))
    tf.train.Checkpoint(data=resumed).read(saved).assert_consumed()
    assert int(next(resumed)) == int(next(position)) == second[10]
    with pytest.raises(ValueError, match="no training examples"):
        example_order(0, seed=3)
