"""The section 5 drivers as a user runs them (subprocesses with flags) at a very small size on the built-in corpus:
every row or size trained and scored, the table, plot, report and results on disk and agreeing with each other and
with the models on disk; a rerun reuses what is done and redoes only what a changed flag touches; bad flags are one
line. Also the missing_word task the ablations fine-tune on: its answers are where they say, and run_squad reads
every one of them."""

import csv
import json
import math
import os

import pytest
import tensorflow as tf

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--corpus_mb=0.15", "--vocab_size=1000", "--max_seq_length=48", "--max_predictions_per_seq=5",
        "--dupe_factor=1", "--train_batch_size=16", "--num_train_steps=20", "--finetune_examples=64",
        "--finetune_epochs=1", "--num_workers=1"]
TINY_MODEL = ["--hidden_size=32", "--num_hidden_layers=1", "--num_attention_heads=2"]


def driver(name, *args):
    return forking.python(["-m", f"bert_tf_experiments.{name}", *args], cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=900)


def _table(directory):
    with open(os.path.join(directory, "table.tsv"), encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _outputs_are_written(directory, plot):
    with open(os.path.join(directory, plot), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(directory, "table.md"), encoding="utf-8") as f:
        table = f.read().strip()
    with open(os.path.join(directory, "report.md"), encoding="utf-8") as f:
        report = f.read()
    assert table in report and f"![{plot}]({plot})" in report
    assert "## What a run of this size cannot show" in report
    with open(os.path.join(directory, "results.json"), encoding="utf-8") as f:
        return json.load(f), report


def _variables(bert_model):
    return {name for name, _ in tf.train.list_variables(os.path.join(bert_model, "bert_model.ckpt"))}


def test_ablations_run_every_table_5_row_then_reuse_them(tmp_path):
    out = tmp_path / "ablations"
    first = driver("ablations", f"--output_dir={out}", *TINY, *TINY_MODEL)
    assert first.returncode == 0, first.stderr[-3000:]
    results, report = _outputs_are_written(out, "ablations.png")
    rows = _table(out)
    assert [r["row"] for r in rows] == ["BERT (MLM + NSP)", "No NSP", "LTR & No NSP", "+ BiLSTM"]
    assert [r["objective"] for r in rows] == ["mlm_nsp", "mlm", "ltr", "ltr"]
    # each model is what its row says: NSP variables only in BERT's; the LTR model causal, fine-tuned causal, and
    # its "+ BiLSTM" span model the only one with a BiLSTM
    models = {row: results[row]["pretrain"]["bert_model"] for row in ("bert", "no_nsp", "ltr")}
    assert any(v.startswith("cls/seq_relationship") for v in _variables(models["bert"]))
    assert not any(v.startswith("cls/seq_relationship") for v in _variables(models["no_nsp"]))
    for directory in (models["ltr"], out / "ltr" / "word_order" / "model", out / "ltr" / "missing_word" / "model"):
        with open(os.path.join(directory, "bert_config.json"), encoding="utf-8") as f:
            assert json.load(f)["causal_attention"] is True, directory
    with open(models["bert"] + "/bert_config.json", encoding="utf-8") as f:
        assert "causal_attention" not in json.load(f)
    for row, bilstm in (("ltr", None), ("ltr_bilstm", True)):
        with open(out / "ltr" / ("missing_word" + ("_bilstm" if bilstm else "")) / "model" / "task.json") as f:
            assert json.load(f).get("bilstm_head") == bilstm, row
    # the table is results.json: masked-LM figures for the masked-LM models (on the same held-out positions),
    # next-token ones for the LTR model, NSP only for BERT, no classification for the BiLSTM row
    for row, r in zip(results.values(), rows):
        p = row["pretrain"]
        masked = p.get("contiguous/masked_lm_loss")
        assert r["held-out masked-LM loss"] == (f"{masked:.3f}" if masked is not None else "—")
        assert (r["held-out next-token loss"] == "—") == (p["objective"] != "ltr")
        assert (r["NSP acc"] == "—") == (p["objective"] != "mlm_nsp")
        assert float(r["missing_word F1"]) == round(row["missing_word"]["f1"], 1)
        assert (r["word_order acc"] == "—") == (row["label"] == "+ BiLSTM")
        for value in p.values():
            assert not isinstance(value, float) or math.isfinite(value)
        assert 0.5 < p.get("contiguous/masked_lm_loss", p.get("contiguous/lm_loss")) < 20
    assert "removing NSP, word_order accuracy: BERT (MLM + NSP)" in report
    assert "a BiLSTM on the left-to-right model, missing_word exact match (%): LTR & No NSP" in report
    # a rerun of a row reuses the pretrained model it shares (the "+ BiLSTM" row's is the LTR row's); a changed
    # fine-tuning flag redoes its fine-tuning only, and the other rows are not touched
    again = driver("ablations", f"--output_dir={out}", *TINY, *TINY_MODEL, "--rows=ltr_bilstm",
                   "--finetune_learning_rate=0.0001")
    assert again.returncode == 0, again.stderr[-3000:]
    for stage in ("corpus", "vocab", "records", "tasks", "ltr/pretrain"):
        assert f"[{stage}] complete, skipped" in again.stdout, stage
    assert "[ltr/missing_word_bilstm] redoing it: finetune_learning_rate 0.0003 -> 0.0001" in again.stdout
    assert not any(f"{row}/" in again.stdout for row in ("bert", "no_nsp")) and "ltr/word_order" not in again.stdout
    assert [r["row"] for r in _table(out)] == ["+ BiLSTM"]


def test_model_size_pretrains_each_size_and_tabulates_perplexity(tmp_path):
    out = tmp_path / "sizes"
    run = driver("model_size", f"--output_dir={out}", *TINY, "--sizes=1x32x2,2x64x4")
    assert run.returncode == 0, run.stderr[-3000:]
    results, _ = _outputs_are_written(out, "model_size.png")
    rows = _table(out)
    assert [(r["#L"], r["#H"], r["#A"]) for r in rows] == [("1", "32", "2"), ("2", "64", "4")]
    for name, row in zip(("1x32x2", "2x64x4"), rows):
        figures = results[name]
        layers, hidden, _ = figures["size"]
        variables = _variables(figures["pretrain"]["bert_model"])
        assert f"bert/encoder/layer_{layers - 1}/output/dense/kernel" in variables
        assert f"bert/encoder/layer_{layers}/output/dense/kernel" not in variables
        shapes = dict(tf.train.list_variables(os.path.join(figures["pretrain"]["bert_model"], "bert_model.ckpt")))
        assert shapes["bert/pooler/dense/kernel"] == [hidden, hidden]
        assert row["encoder parameters"] == f"{figures['pretrain']['parameters']:,}"
        assert figures["perplexity"] == pytest.approx(math.exp(figures["pretrain"]["nsp/masked_lm_loss"]))
        assert row["held-out MLM ppl"] == f"{figures['perplexity']:.1f}"
        assert 1 < figures["perplexity"] < 1000 * 1.5  # a vocabulary of ~1000 pieces: near uniform at worst
    assert results["1x32x2"]["pretrain"]["parameters"] < results["2x64x4"]["pretrain"]["parameters"]


@pytest.mark.parametrize("args, message", [
    (["--sizes=2x130x4"], "--sizes=2x130x4: 2x130x4: 4 heads do not divide the hidden size 130"),
    (["--sizes=2x128"], "--sizes=2x128: '2x128' is not LxHxA"),
    (["--sizes=2x128x2,2x128x2"], "--sizes=2x128x2,2x128x2: 2x128x2 is given twice"),
    (["--hidden_size=64"], "Unknown command line flag 'hidden_size'"),
])
def test_model_size_refuses_bad_sizes_in_one_line(tmp_path, args, message):
    run = driver("model_size", f"--output_dir={tmp_path / 'out'}", *args)
    assert run.returncode == 1
    assert run.stderr.startswith("bert_tf_experiments.model_size: error: ") and message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "out")


def test_ablations_refuse_an_unknown_row(tmp_path):
    run = driver("ablations", f"--output_dir={tmp_path / 'out'}", "--rows=bert,gpt")
    assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1
    assert "--rows=bert,gpt: expected some of bert, no_nsp, ltr, ltr_bilstm" in run.stderr


def test_missing_word_answers_are_in_their_context_and_run_squad_reads_them_all(tmp_path):
    from bert_tf.tasks import squad
    from bert_tf_experiments.missing_word import missing_word_examples, write_squad
    from bert_tf_quickstart.corpus import stdlib_documents

    documents = list(stdlib_documents(100_000))
    paragraphs = missing_word_examples(documents, 300, seed=7, prefix="dev")
    assert missing_word_examples(documents, 300, seed=7, prefix="dev") == paragraphs
    for paragraph in paragraphs:
        context, (qa,) = paragraph["context"], paragraph["qas"]
        (answer,) = qa["answers"]
        start, word = answer["answer_start"], answer["text"]
        assert context[start:start + len(word)] == word and context.split().count(word) == 1
        # the question is a run of the context's words around the answer, with the answer left out
        words, question = context.split(), qa["question"].split()
        at = len(context[:start].split())
        assert words[at] == word
        assert any(words[at - k:at] + words[at + 1:at + 1 + len(question) - k] == question
                   for k in range(min(at, len(question)) + 1))
    path = str(tmp_path / "dev.json")
    write_squad(path, paragraphs)
    examples, _ = squad.read_examples(path, is_training=True, version_2=False)
    assert len(examples) == 300 and all(e.answer_text == p["qas"][0]["answers"][0]["text"]
                                        for e, p in zip(examples, paragraphs))


def test_missing_word_refuses_a_corpus_without_questions_instead_of_looping():
    from bert_tf_experiments.missing_word import missing_word_examples

    documents = [["the the the the the the .", "a b c d e f"]] * 3  # no word of three letters appearing once
    with pytest.raises(ValueError, match="only 0 of 5 missing_word questions found in 500 tries"):
        missing_word_examples(documents, 5, seed=1, prefix="dev")
    with pytest.raises(ValueError, match="no sentence of 5-14 words to ask about"):
        missing_word_examples([["too short", "also short"]], 5, seed=1, prefix="dev")
