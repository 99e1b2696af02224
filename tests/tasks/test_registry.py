"""The task registry and task.json: the one switch between task families, and the one reader and writer of the file
that tells evaluation and export what a fine-tuned model is."""

import ast
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_task_has_a_family_that_knows_its_kind():
    from bert_tf import tasks

    for name in tasks.task_names():
        task = tasks.get_task(name)
        assert task.family in tasks.FAMILIES, name
        assert tasks.family_of_kind(task.kind) is task.family, name
        assert tasks.family_for_export(task.family.export_kind) is task.family, name
    assert tasks.get_task("sts-b").kind == "regression" and tasks.get_task("sts-b").num_outputs == 1
    assert tasks.get_task("mnli").kind == "classification" and tasks.get_task("mnli").num_outputs == 3
    assert {tasks.get_task(n).kind for n in ("squad", "squad2", "conll2003", "swag")} == {
        "span_qa", "tagging", "multiple_choice"}
    kinds = [kind for family in tasks.FAMILIES for kind in family.kinds]
    assert len(kinds) == len(set(kinds))
    assert len(tasks.export_kinds()) == len(set(tasks.export_kinds())) == len(tasks.FAMILIES)


def test_export_kinds_and_their_flags_come_from_the_families():
    from bert_tf import tasks
    from export import export_saved_model, exporting

    assert set(tasks.export_kinds()) <= set(exporting.KINDS)
    for family in tasks.FAMILIES:
        reads = {"model_dir", "seq_length", "dtype", *family.export_flags}
        assert export_saved_model.READS[family.export_kind] == reads


def _compared_kind_strings(path, own=()):
    """Comparisons in `path` of something against a task-kind literal (`x == "regression"`, `x in ("span_qa",)`),
    other than the `own` kinds of the family that `path` defines."""
    literals = {"classification", "regression", "span_qa", "tagging", "multiple_choice"} - set(own)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                values = [side] if isinstance(side, ast.Constant) else getattr(side, "elts", [])
                if any(isinstance(v, ast.Constant) and v.value in literals for v in values):
                    found.append(f"{path}:{node.lineno}")
    return found


def test_no_kind_strings_are_compared_outside_the_registry():
    """Only a family's own module may read its own kinds (classification tells regression from classification);
    nothing compares another family's kind."""
    import sys

    from bert_tf import tasks

    own = {pathlib.Path(sys.modules[type(f).__module__].__file__).resolve(): f.kinds for f in tasks.FAMILIES}
    files = [p for package in ("bert_tf", "export", "data_gen") for p in (ROOT / package).rglob("*.py")]
    assert len(files) > 40
    assert [hit for path in files for hit in _compared_kind_strings(path, own.get(path.resolve(), ()))] == []


def test_the_kind_scan_finds_a_comparison(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('if task.kind == "regression":\n    pass\nok = kind in ("tagging",)\n', encoding="utf-8")
    assert len(_compared_kind_strings(probe)) == 2
    assert len(_compared_kind_strings(probe, own=("regression",))) == 1


def test_task_info_round_trips_and_leaves_out_what_a_family_does_not_use(tmp_path):
    from bert_tf.tasks import task_info

    info = task_info.TaskInfo(task="squad2", kind="span_qa", labels=(), max_seq_length=384, do_lower_case=True,
                              learning_rate=3e-5, seed=1, num_train_epochs=2.0, global_step=120, doc_stride=128,
                              max_query_length=64, max_answer_length=30, version_2_with_negative=True,
                              null_score_diff_threshold=-1.5)
    task_info.write(str(tmp_path), info)
    written = json.loads((tmp_path / "task.json").read_text(encoding="utf-8"))
    assert written["version"] == task_info.VERSION and "pairs" not in written and "label_all_subtokens" not in written
    assert task_info.read(str(tmp_path)) == info
    assert task_info.read(str(tmp_path / "missing")) is None


def test_task_info_reads_a_file_written_before_it_had_a_version(tmp_path):
    from bert_tf.tasks import task_info

    (tmp_path / "task.json").write_text(json.dumps({
        "task": "mrpc", "kind": "classification", "labels": ["0", "1"], "max_seq_length": 128,
        "do_lower_case": True, "learning_rate": 5e-5, "seed": 12345, "num_train_epochs": 3.0, "pairs": True}))
    info = task_info.read(str(tmp_path))
    assert (info.version, info.labels, info.pairs, info.global_step) == (1, ("0", "1"), True, None)


@pytest.mark.parametrize("content, message", [
    ({"task": "mrpc", "kind": "classification", "labels": [], "max_seq_length": 8, "do_lower_case": True,
      "version": 99}, "version 99 is newer"),
    ({"task": "mrpc", "kind": "classification", "labels": [], "max_seq_length": 8, "do_lower_case": True,
      "colour": "red"}, "unknown key(s) colour"),
    ({"task": "mrpc", "labels": [], "max_seq_length": 8, "do_lower_case": True}, "missing kind"),
    ("not json", "not a task.json"),
])
def test_task_info_refuses_what_it_cannot_read(tmp_path, content, message):
    from bert_tf.tasks import DataError, task_info

    (tmp_path / "task.json").write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DataError, match="task.json") as caught:
        task_info.read(str(tmp_path))
    assert message in str(caught.value)
