"""The main job as a user runs it (a subprocess with flags), at a very small size: every stage's outputs on disk,
masked-LM accuracy above chance, the reported word_order accuracy equal to the exported classifier's on the
held-out file, SavedModels answering from a fresh process, plots and report; a rerun with the user's corpus redoes
every stage and asks questions from its held-out part; a rerun with the same inputs skips every stage; each stage's
key holds what it depends on; bad input is one clear line; nothing in the library imports the quickstart."""

import ast
import dataclasses
import glob
import json
import os
import re

import pytest

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("corpus", "vocab", "records", "pretrain", "finetune", "export", "answers")
# --num_workers=1: the records are the same bytes with any number of workers (test_data_gen tests the workers), and
# each spawned worker re-imports the CLI module and with it TensorFlow, seconds of CPU apiece for a few KB of records.
TINY = ["--vocab_size=2000", "--hidden_size=32", "--num_hidden_layers=1",
        "--num_attention_heads=2", "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1",
        "--train_batch_size=32", "--num_train_steps=60", "--finetune_examples=256", "--finetune_epochs=1",
        "--num_workers=1"]


def _user_corpus(path):
    """A user's corpus: the Python documentation's topics (pydoc_data; not part of the built-in corpus), one
    sentence per line, one topic per document: 77 documents, 88 KB."""
    from pydoc_data.topics import topics

    documents = []
    for name in sorted(topics):
        sentences = []
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            lines = [line.strip() for line in paragraph.splitlines()]
            if paragraph.startswith("   ") or any(line.startswith((">>>", "...")) for line in lines):
                continue
            text = " ".join(line for line in lines if line)
            sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if len(s.split()) >= 4]
        if len(sentences) >= 2:
            documents.append(sentences[:12])
    path.write_text("".join("\n".join(document) + "\n\n" for document in documents), encoding="utf-8")
    return path


def quickstart(*args):
    return forking.python(["-m", "bert_tf_quickstart", *args], cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                          timeout=900)


def _assert_reported_accuracy_is_the_exported_classifiers(out, accuracy):
    """The word_order accuracy in DONE.json and report.md is what the exported classifier scores on the held-out
    file (its SavedModel loaded here, asked every sentence of finetune/data/dev.tsv as raw text), and that
    SavedModel serves the fine-tuned model saved in finetune/model (the same probabilities for every sentence).
    Labels may differ only on near-ties (probabilities within 1e-4 of each other), where the SavedModel's shorter
    padding may flip the argmax. At this size the model barely learns word order, so its accuracy is near 0.5;
    comparing probabilities is what tells one such model from another (an export of the pretrained or of
    freshly initialised weights, a report of another model)."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the ops the SavedModel uses)

    from bert_tf.finetuning import load_finetuned
    from bert_tf.tasks import get_task
    from bert_tf.tasks.classification import encode

    data_dir = out / "finetune" / "data"
    rows = [line.split("\t") for line in (data_dir / "dev.tsv").read_text().splitlines()[1:]]
    labels, sentences = [label for label, _ in rows], [sentence for _, sentence in rows]
    assert len(rows) == 200 and set(labels) == {"original", "shuffled"}  # max(200, 256 // 8) held-out examples
    classifier = tf.saved_model.load(str(out / "export" / "classifier" / "1")).signatures["serving_default"]
    served = classifier(text=tf.constant(sentences))
    predicted = [label.decode() for label in served["label"].numpy()]
    probabilities = served["probabilities"].numpy()
    correct = sum(p == t for p, t in zip(predicted, labels))
    near_ties = int((abs(probabilities[:, 0] - probabilities[:, 1]) < 1e-4).sum())
    assert abs(correct - accuracy * len(rows)) <= near_ties + 1e-6, (correct, accuracy, near_ties)
    assert f"| word_order fine-tuned held-out accuracy | {accuracy:.3f} | 0.5 |" in (out / "report.md").read_text()

    examples = get_task("word_order").examples(str(data_dir), "dev")
    assert [example.text_a for example in examples] == sentences
    logits = load_finetuned(str(out / "finetune" / "model")).predict(
        encode(examples, str(out / "vocab" / "vocab.txt"), True, 32), verbose=0)["logits"]
    np.testing.assert_allclose(probabilities, tf.nn.softmax(logits).numpy(), atol=1e-5)


def test_quickstart_runs_every_stage_then_redoes_them_for_a_new_corpus_then_skips_them(tmp_path):
    """The issue's first run: the built-in corpus, then `--input_file` in the same output directory (every stage
    redone, saying why; questions from the user's held-out part; figures from too little held-out data flagged),
    then the same command again (every stage reused)."""
    out = tmp_path / "qs"
    first = quickstart(f"--output_dir={out}", "--corpus_mb=0.25", *TINY)
    assert first.returncode == 0, first.stderr[-3000:]
    done = {stage: json.loads((out / stage / "DONE.json").read_text()) for stage in STAGES}
    assert done["corpus"]["documents"] >= 40 and (out / "corpus" / "heldout.txt").stat().st_size > 0
    vocab = (out / "vocab" / "vocab.txt").read_text().split("\n")
    assert vocab[:5] == ["[PAD]", *vocab[1:5]] and "[MASK]" in vocab and len(vocab) > 500
    assert json.loads((out / "records" / "train" / "metadata.json").read_text())["flags"]["max_seq_length"] == 32
    pretrain = done["pretrain"]
    assert pretrain["heldout_masked_lm_accuracy"] > 10 * pretrain["masked_lm_chance"]
    assert (out / "pretrain" / "bert_model" / "bert_model.ckpt.index").exists()
    heldout_eval = (out / "pretrain" / "heldout_eval" / "eval_results.txt").read_text().splitlines()
    assert "global_step = 60" in heldout_eval  # the step of the checkpoint evaluated
    # the next-sentence chance is the held-out records' larger label share (above 1/2 on short documents)
    share = json.loads((out / "records" / "heldout" / "metadata.json").read_text())["random_next_fraction"]
    assert pretrain["next_sentence_chance"] == pytest.approx(max(share, 1 - share)) and share > 0.5
    assert f"| {pretrain['next_sentence_chance']:.3f} (the larger label's share) |" in (out / "report.md").read_text()
    _assert_reported_accuracy_is_the_exported_classifiers(out, done["finetune"]["heldout_accuracy"])
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
    assert "Run now: corpus" in report and "Reused" not in report
    assert list((out / "pretrain" / "train").glob("events.out.tfevents.*"))

    corpus = _user_corpus(tmp_path / "topics.txt")
    second = quickstart(f"--output_dir={out}", f"--input_file={corpus}", *TINY)
    assert second.returncode == 0, second.stderr[-3000:]
    assert re.search(r"^\[corpus\] redoing it: .*input_sha256 None -> [0-9a-f]{12}", second.stdout, re.M)
    for before, after in zip(STAGES[:-2], STAGES[1:-1]):  # same flags: each is redone because the one before was
        assert f"[{after}] redoing it: {before} changed\n" in second.stdout
    assert "[answers] redoing it: questions built-in -> held-out\n" in second.stdout  # its own input changed
    done = {stage: json.loads((out / stage / "DONE.json").read_text()) for stage in STAGES}
    assert done["corpus"]["source"] == str(corpus) and done["pretrain"] != pretrain
    heldout = [line for line in (out / "corpus" / "heldout.txt").read_text().splitlines() if line]
    answers = done["answers"]
    assert len(answers["masked"]) == 3 and len(answers["fill_ins"]) == 3
    for text, word in zip(answers["masked"], answers["masked_answers"]):  # a held-out sentence, one word masked
        assert text.count("[MASK]") == 1 and text.replace("[MASK]", word) in heldout
    assert answers["sentence_labels"] == ["original", "shuffled"] * 2 and len(answers["decisions"]) == 4
    originals, shuffled = answers["sentences"][::2], answers["sentences"][1::2]
    assert all(s in heldout for s in originals)
    assert [sorted(s.split()) for s in shuffled] == [sorted(s.split()) for s in originals] != originals
    # 4 of 77 documents held out: 30-odd instances and sentences, too few for the figures to mean anything
    assert done["records"]["heldout_instances"] < 100 and done["finetune"]["heldout_sentences"] < 100
    note = "too few for the figure to mean anything (fewer than 100)"
    assert re.search(rf"^\[pretrain\] .*NSP accuracy .*only \d+ held-out instances, {re.escape(note)}", second.stdout,
                     re.M)
    assert re.search(rf"^\[finetune\] .*only \d+ held-out sentences, {re.escape(note)}", second.stdout, re.M)
    report = (out / "report.md").read_text()
    assert "Too little held-out data:" in report and "- next-sentence accuracy: only " in report
    assert f"- word_order accuracy: only {done['finetune']['heldout_sentences']} held-out sentences" in report

    third = quickstart(f"--output_dir={out}", f"--input_file={corpus}", *TINY)
    assert third.returncode == 0, third.stderr[-3000:]
    assert all(f"[{stage}] complete, skipped" in third.stdout for stage in STAGES) and "redoing" not in third.stdout
    assert {stage: json.loads((out / stage / "DONE.json").read_text()) for stage in STAGES} == done
    report = (out / "report.md").read_text()
    assert "Nothing was redone: every stage was reused" in report and "Run now" not in report
    assert "Reused from an earlier run, with the times they took then: corpus" in report


def test_a_stage_reruns_with_the_stages_after_it_when_what_it_depends_on_changes(tmp_path, capsys):
    from bert_tf_quickstart.stages import Stages

    calls = []

    def pipeline(a=1, b=1, force=False):
        stages = Stages(str(tmp_path), force)
        for name, inputs in (("first", {"a": a}), ("second", {"b": b}), ("third", {})):
            stages.run(name, inputs, lambda d, name=name: calls.append(name) or {"n": len(calls)},
                       lambda f: f"n={f['n']}")
        return stages, capsys.readouterr().out

    stages, _ = pipeline()
    assert stages.ran == calls == ["first", "second", "third"] and stages.reused == []
    calls.clear()
    stages, out = pipeline()  # same inputs: every stage reused
    assert calls == [] and stages.reused == ["first", "second", "third"] and out.count("complete, skipped") == 3
    stages, out = pipeline(b=2)  # the second stage's input changed: it and the third rerun, each saying why
    assert calls == ["second", "third"] and stages.reused == ["first"]
    assert "[second] redoing it: b 1 -> 2\n" in out and "[third] redoing it: second changed\n" in out
    calls.clear()
    os.remove(tmp_path / "third" / "DONE.json")  # interrupted before its mark: resumed, keeping what is there
    (tmp_path / "third" / "checkpoint").write_text("x")
    stages, out = pipeline(b=2)
    assert calls == ["third"] and (tmp_path / "third" / "checkpoint").exists() and "redoing" not in out
    calls.clear()
    stages, out = pipeline(a=2, b=2)  # the first stage's input changed: every stage reruns, from empty folders
    assert calls == ["first", "second", "third"] and not (tmp_path / "third" / "checkpoint").exists()
    assert "[first] redoing it: a 1 -> 2\n" in out and "[second] redoing it: first changed\n" in out
    calls.clear()
    (tmp_path / "second" / "partial").write_text("x")
    stages, out = pipeline(a=2, b=2, force=True)
    assert calls == ["first", "second", "third"] and not (tmp_path / "second" / "partial").exists()
    assert out.count("redoing it: --force") == 3
    calls.clear()
    os.remove(tmp_path / "first" / "STAGE.json")  # made by a version that recorded no inputs: redone; the same
    stages, out = pipeline(a=2, b=2)                 # inputs give the same key, so the stages after it stand
    assert calls == ["first"] and "[first] redoing it: nothing records what it was made from" in out
    calls.clear()
    stages = Stages(str(tmp_path), False)  # a version of the pipeline without the second stage
    for name, inputs in (("first", {"a": 2}), ("third", {})):
        stages.run(name, inputs, lambda d, name=name: calls.append(name) or {"n": len(calls)}, lambda f: "")
    assert calls == ["third"] and "[third] redoing it: it now follows first, not second\n" in capsys.readouterr().out


def test_each_option_keys_exactly_the_stages_whose_output_it_changes(tmp_path):
    """Written independently of `stage_inputs`: for every option, the stages that must rerun first when it
    changes (the stages after those follow through the chained keys)."""
    from bert_tf_quickstart.options import QuickstartOptions
    from bert_tf_quickstart.stages import stage_inputs

    expected = {"corpus_mb": ["corpus"], "vocab_size": ["vocab"], "max_seq_length": ["records"],
                "max_predictions_per_seq": ["records"], "dupe_factor": ["records"],
                "random_seed": ["records", "pretrain", "finetune", "answers"], "hidden_size": ["pretrain"],
                "num_hidden_layers": ["pretrain"], "num_attention_heads": ["pretrain"],
                "train_batch_size": ["pretrain"], "num_train_steps": ["pretrain"], "learning_rate": ["pretrain"],
                "finetune_examples": ["finetune"], "finetune_epochs": ["finetune"],
                "finetune_learning_rate": ["finetune"], "num_workers": []}  # the records are the same bytes
    options = QuickstartOptions()
    base = stage_inputs(options, None)
    for field in dataclasses.fields(QuickstartOptions):
        changed = stage_inputs(dataclasses.replace(options, **{field.name: field.default * 2 + 1}), None)
        assert [stage for stage in base if base[stage] != changed[stage]] == expected[field.name], field.name
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence.\n")
    first = stage_inputs(options, str(corpus))
    corpus.write_text("Another sentence.\n")  # same path, other content
    second = stage_inputs(options, str(corpus))
    assert [stage for stage in first if first[stage] != second[stage]] == ["corpus"]
    assert first["corpus"] != base["corpus"]  # the user's corpus is not the built-in one
    assert stage_inputs(dataclasses.replace(options, corpus_mb=9), str(corpus)) == second  # no built-in corpus


def test_quickstart_refuses_a_corpus_it_cannot_use(tmp_path):
    from bert_tf_quickstart.corpus import build_corpus
    from bert_tf_quickstart.word_order import word_order_examples

    corpus = tmp_path / "small.txt"
    corpus.write_text("One sentence here.\nAnother one.\n\nA second document.\nWith two lines.\n")
    with pytest.raises(ValueError, match=r"small.txt: 2 documents .* at least 40"):
        build_corpus(str(tmp_path), str(corpus), 10**6)
    result = quickstart(f"--output_dir={tmp_path / 'qs'}", f"--input_file={tmp_path / 'missing.txt'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr and not (tmp_path / "qs").exists()
    assert "bert_tf_quickstart: error:" in result.stderr and "missing.txt" in result.stderr
    result = quickstart(f"--output_dir={tmp_path / 'qs2'}", f"--input_file={corpus}", "--corpus_mb=1")
    assert result.returncode == 1 and not (tmp_path / "qs2").exists()
    assert f"bert_tf_quickstart: error: --corpus_mb sizes the built-in corpus; with --input_file={corpus} the whole " \
           "file is used: drop --corpus_mb" in result.stderr
    documents = [[f"doc {d} has sentence number {s}" for s in range(3)] for d in range(10)] + [["too short", "x"]]
    examples = word_order_examples(documents, 100, 0)
    written = {s for d in documents for s in d}
    assert sum(label == "original" for label, _ in examples) == 50
    for label, sentence in examples:
        assert (sentence in written) == (label == "original")
        assert sorted(sentence.split()) in [sorted(s.split()) for s in written if len(s.split()) > 2]


def _imports(path):
    """(line, module) for every import in a Python file, those inside functions too, and every
    `importlib.import_module` / `__import__` of a literal name."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:  # relative imports stay in their package
            found.append((node.lineno, node.module))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((node.lineno, node.args[0].value))
    return found


def _imports_of(package, tops):
    """'path:line imports module' for each import in `package` (a folder of the repository) of one of `tops`."""
    paths = glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True)
    assert paths, package
    return [f"{os.path.relpath(path, ROOT)}:{line} imports {module}" for path in sorted(paths)
            for line, module in _imports(path) if module.split(".")[0] in tops]


def test_the_library_imports_neither_the_quickstart_nor_the_packages_above_it():
    """The house's one direction: data_gen/ and export/ import bert_tf/, the quickstart imports all three, the
    experiments import the quickstart too, and nothing imports back up: bert_tf/ imports neither data_gen nor
    export, none of the three imports the quickstart, and none of the four imports the experiments. Read from the
    source with `ast`, so an import inside a function counts too."""
    problems = _imports_of("bert_tf", {"data_gen", "export", "bert_tf_quickstart", "bert_tf_experiments"})
    for package in ("data_gen", "export"):
        problems += _imports_of(package, {"bert_tf_quickstart", "bert_tf_experiments"})
    problems += _imports_of("bert_tf_quickstart", {"bert_tf_experiments"})
    assert not problems, "\n".join(problems)
    # the scan sees the imports that exist, those inside functions included: the quickstart's of the packages
    # below it (its stages import data_gen and export inside the stage functions)
    below = _imports_of("bert_tf_quickstart", {"data_gen", "export"})
    assert {line.rsplit(" ", 1)[1].split(".")[0] for line in below} == {"data_gen", "export"}
