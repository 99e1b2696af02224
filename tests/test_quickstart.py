"""The main job as a user runs it (a subprocess with flags), at a very small size: every stage's outputs on disk,
masked-LM accuracy above chance, SavedModels answering from a fresh process, plots and report; a second run
skips every stage; bad input is one clear line."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("corpus", "vocab", "records", "pretrain", "finetune", "export", "answers")
TINY = ["--corpus_mb=0.25", "--vocab_size=2000", "--hidden_size=32", "--num_hidden_layers=1",
        "--num_attention_heads=2", "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1",
        "--train_batch_size=32", "--num_train_steps=60", "--finetune_examples=256", "--finetune_epochs=1"]


def quickstart(*args):
    return subprocess.run([sys.executable, "-m", "bert_tf.cli.quickstart", *args], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=900)


def test_quickstart_runs_every_stage_and_skips_them_when_rerun(tmp_path):
    out = tmp_path / "qs"
    first = quickstart(f"--output_dir={out}", *TINY)
    assert first.returncode == 0, first.stderr[-3000:]
    done = {stage: json.loads((out / stage / "DONE.json").read_text()) for stage in STAGES}
    assert done["corpus"]["documents"] >= 40 and (out / "corpus" / "heldout.txt").stat().st_size > 0
    vocab = (out / "vocab" / "vocab.txt").read_text().split("\n")
    assert vocab[:5] == ["[PAD]", *vocab[1:5]] and "[MASK]" in vocab and len(vocab) > 500
    assert json.loads((out / "records" / "train" / "metadata.json").read_text())["flags"]["max_seq_length"] == 32
    pretrain = done["pretrain"]
    assert pretrain["heldout_masked_lm_accuracy"] > 10 * pretrain["masked_lm_chance"]
    assert (out / "pretrain" / "bert_model" / "bert_model.ckpt.index").exists()
    assert 0 <= done["finetune"]["heldout_accuracy"] <= 1
    answers = done["answers"]
    assert answers["modules"] == []  # the fresh process imported none of bert_tf, export, data_gen
    assert [len(fills) for fills in answers["fill_ins"]] == [1, 1, 1]
    for fills in answers["fill_ins"]:
        tokens = [token for token, _ in fills[0]]
        probabilities = [p for _, p in fills[0]]
        assert set(tokens) <= set(vocab) and probabilities == sorted(probabilities, reverse=True)
    assert len(answers["decisions"]) == 4 and {label for label, _ in answers["decisions"]} <= {"original", "shuffled"}
    assert "[MASK] =" in first.stdout and "word order?" in first.stdout
    for name in ("pretraining_mlm.png", "pretraining_nsp.png", "learning_rate.png", "finetuning.png"):
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert f"{pretrain['heldout_masked_lm_accuracy']:.3f}" in report and "plots/finetuning.png" in report
    assert list((out / "pretrain" / "train").glob("events.out.tfevents.*"))

    second = quickstart(f"--output_dir={out}", *TINY)
    assert second.returncode == 0, second.stderr[-3000:]
    assert all(f"[{stage}] complete, skipped" in second.stdout for stage in STAGES)
    assert json.loads((out / "pretrain" / "DONE.json").read_text()) == pretrain


def test_stages_rerun_with_force_and_resume_when_incomplete(tmp_path):
    from bert_tf.quickstart import _run_stage

    calls = []

    def work(directory):
        calls.append(directory)
        return {"n": len(calls)}

    summary = lambda f: str(f["n"])  # noqa: E731
    assert _run_stage(str(tmp_path), "s", False, work, summary)["n"] == 1
    assert _run_stage(str(tmp_path), "s", False, work, summary)["n"] == 1 and len(calls) == 1  # complete: skipped
    (tmp_path / "s" / "partial").write_text("x")
    assert _run_stage(str(tmp_path), "s", True, work, summary)["n"] == 2  # force: redone from an empty folder
    assert not (tmp_path / "s" / "partial").exists()
    os.remove(tmp_path / "s" / "DONE.json")  # interrupted before the mark: runs again, keeping what is there
    (tmp_path / "s" / "checkpoint").write_text("x")
    assert _run_stage(str(tmp_path), "s", False, work, summary)["n"] == 3
    assert (tmp_path / "s" / "checkpoint").exists()


def test_quickstart_refuses_a_corpus_it_cannot_use(tmp_path):
    from bert_tf.quickstart import build_corpus, word_order_examples

    corpus = tmp_path / "small.txt"
    corpus.write_text("One sentence here.\nAnother one.\n\nA second document.\nWith two lines.\n")
    with pytest.raises(ValueError, match=r"small.txt: 2 documents .* at least 40"):
        build_corpus(str(tmp_path), str(corpus), 10**6)
    result = quickstart(f"--output_dir={tmp_path / 'qs'}", f"--input_file={tmp_path / 'missing.txt'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "bert_tf_quickstart: error:" in result.stderr and "missing.txt" in result.stderr
    documents = [[f"doc {d} has sentence number {s}" for s in range(3)] for d in range(10)] + [["too short", "x"]]
    examples = word_order_examples(documents, 100, 0)
    written = {s for d in documents for s in d}
    assert sum(label == "original" for label, _ in examples) == 50
    for label, sentence in examples:
        assert (sentence in written) == (label == "original")
        assert sorted(sentence.split()) in [sorted(s.split()) for s in written if len(s.split()) > 2]
