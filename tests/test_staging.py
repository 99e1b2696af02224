"""bert_tf.staging: a directory replaced so that readers always find a whole version (a failure at the swap keeps
the old one), and the clean-up of staging directories that killed writers left, on real SavedModels and a real
training directory."""

import errno
import os
import subprocess
import sys

import numpy as np
import pytest


def _saved_model(path, value):
    """A real, tiny SavedModel whose `f()` returns `value`."""
    import tensorflow as tf

    module = tf.Module()
    module.v = tf.Variable(float(value))
    module.f = tf.function(lambda: module.v + 0.0, input_signature=[])
    tf.saved_model.save(module, str(path))


def _served(path):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    return float(loaded.f())


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("exchange", ["renameat2", "two_renames"])
def test_a_failed_swap_keeps_the_old_version_and_a_good_one_leaves_no_staging(tmp_path, monkeypatch, exchange):
    from bert_tf import staging

    target, new = tmp_path / "model" / "1", tmp_path / "model" / f"1.tmp-{os.getpid()}"
    _saved_model(target, 1)
    _saved_model(new, 2)
    if exchange == "two_renames":  # a filesystem without RENAME_EXCHANGE
        monkeypatch.setattr(staging, "_exchange", lambda a, b: (_ for _ in ()).throw(OSError(errno.EINVAL, "no")))
        real_replace, calls = os.replace, []

        def replace(src, dst):  # the second rename (new -> target) fails, after the old one was moved aside
            calls.append((src, dst))
            if len(calls) == 2:
                raise OSError(errno.EIO, "injected failure at the swap")
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
    else:
        monkeypatch.setattr(staging, "_exchange", lambda a, b: (_ for _ in ()).throw(OSError(errno.EIO, "injected")))
    with pytest.raises(OSError):
        staging.replace_dir(str(new), str(target))
    assert _served(target) == 1.0  # the old version still loads, whole
    assert sorted(os.listdir(tmp_path / "model")) == ["1", new.name]  # no `.old-` directory left behind
    monkeypatch.undo()
    staging.replace_dir(str(new), str(target))
    assert _served(target) == 2.0 and os.listdir(tmp_path / "model") == ["1"]


def test_replace_dir_exchanges_while_a_reader_keeps_finding_a_whole_export(tmp_path):
    """A reader polling the path during 20 swaps always finds saved_model.pb (the issue saw it missing)."""
    from bert_tf import staging

    target = tmp_path / "1"
    _saved_model(target, 0)
    reader = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "missing = 0\n"
        "end = time.time() + 60\n"
        "while not os.path.exists(sys.argv[2]) and time.time() < end:\n"
        "    missing += not os.path.exists(sys.argv[1])\n"
        "print(missing)\n"), str(target / "saved_model.pb"), str(tmp_path / "stop")],
        stdout=subprocess.PIPE, text=True)
    for value in range(1, 21):
        _saved_model(tmp_path / f"1.tmp-{os.getpid()}", value)
        staging.replace_dir(str(tmp_path / f"1.tmp-{os.getpid()}"), str(target))
    (tmp_path / "stop").touch()
    assert reader.communicate(timeout=60)[0].strip() == "0"
    assert _served(target) == 20.0 and sorted(os.listdir(tmp_path)) == ["1", "stop"]


def test_stale_staging_of_dead_writers_is_removed_and_a_live_writers_is_kept(tmp_path):
    from bert_tf import staging

    dead, live = _dead_pid(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _saved_model(tmp_path / f"1.tmp-{dead}", 1)          # a killed export
        _saved_model(tmp_path / f"1.tmp-{live.pid}", 2)      # an export still running
        _saved_model(tmp_path / f"2.old-{dead}", 3)          # killed between the two renames: 2 is missing
        _saved_model(tmp_path / "10", 4)                     # other versions are not touched
        _saved_model(tmp_path / f"10.tmp-{dead}", 5)
        assert staging.remove_stale(str(tmp_path / "1")) == [str(tmp_path / f"1.tmp-{dead}")]
        assert staging.remove_stale(str(tmp_path / "2")) == [str(tmp_path / f"2.old-{dead}")]
        assert sorted(os.listdir(tmp_path)) == ["1.tmp-%d" % live.pid, "10", f"10.tmp-{dead}", "2"]
        assert _served(tmp_path / "2") == 3.0  # the last complete version is back in place
    finally:
        live.kill()
        live.wait()


def test_an_unfinished_checkpoint_save_is_removed_by_the_next_run(tiny_config, tmp_path):
    """A save killed before TensorFlow merged its shards leaves `ckpt-N_temp/`; the next run in the directory
    removes it before its own first save, and trains and checkpoints normally."""
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer

    options = PretrainingOptions(max_seq_length=8, max_predictions_per_seq=2, num_train_steps=2,
                                 num_warmup_steps=0, learning_rate=1e-3)
    model = build_pretrainer(tiny_config, options)
    # what a killed save leaves: its shard written under the staging prefix, the merge into ckpt-5 never done
    temp = tmp_path / "ckpt-5_temp"
    tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(str(temp / "part-00000-of-00001"))
    assert any(name.startswith("part-00000-of-00001") for name in os.listdir(temp))
    rng = np.random.default_rng(0)
    inputs = {"input_word_ids": rng.integers(5, 99, (4, 8)).astype("int32"), "input_mask": np.ones((4, 8), "int32"),
              "input_type_ids": np.zeros((4, 8), "int32"), "masked_lm_positions": np.array([[1, 2]] * 4, "int32")}
    labels = {"masked_lm_ids": rng.integers(5, 99, (4, 2)).astype("int32"),
              "masked_lm_weights": np.ones((4, 2), "float32"), "next_sentence_labels": np.array([0, 1, 0, 1])}
    dataset_fn = lambda context: tf.data.Dataset.from_tensor_slices((inputs, labels)).repeat().batch(2)  # noqa
    training.train(model, tf.distribute.get_strategy(), dataset_fn, str(tmp_path), num_train_steps=2,
                   global_batch_size=2, steps_per_loop=2, save_checkpoints_steps=2)
    assert not temp.exists() and tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")


def test_a_killed_hf_conversion_is_removed_by_the_next_one_into_that_directory(tiny_config, tmp_path):
    """checkpoints.save_hf stages in `<dir>.tmp-<pid>` like an export, so a killed convert_checkpoint's leftovers
    are removed by the next write of the same directory."""
    from bert_tf import BertEncoder, checkpoints

    dead = _dead_pid()
    (tmp_path / f"hf.tmp-{dead}").mkdir()
    (tmp_path / f"hf.tmp-{dead}" / "model.safetensors").write_bytes(b"half")
    checkpoints.save_hf(BertEncoder(tiny_config), str(tmp_path / "hf"))
    assert sorted(os.listdir(tmp_path)) == ["hf"]
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors"]


def test_output_problem_names_what_stands_in_the_way(tmp_path):
    from bert_tf.staging import output_problem

    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    assert output_problem(str(tmp_path / "new" / "deeper")) is None
    assert output_problem(str(tmp_path / "adir"), directory=True) is None
    assert output_problem(str(tmp_path / "afile"), directory=False) is None
    assert output_problem(str(tmp_path / "afile" / "x" / "y")) == \
        f"{tmp_path / 'afile'} is a file, not a directory, so {tmp_path / 'afile' / 'x' / 'y'} cannot be created"
    assert output_problem(str(tmp_path / "afile"), directory=True) == f"{tmp_path / 'afile'} is a file, not a directory"
    assert output_problem(str(tmp_path / "adir"), directory=False) == f"{tmp_path / 'adir'} is a directory, not a file"
    assert output_problem("ram://bucket/afile/x") is None  # a URL is only checked to be reachable


def test_remove_if_empty_undoes_created_directories_and_never_a_file(tmp_path):
    from bert_tf.staging import first_missing, remove_if_empty

    target = tmp_path / "run" / "a" / "b"
    assert first_missing(str(target)) == str(tmp_path / "run")
    assert first_missing(str(tmp_path)) is None
    (target / "c").mkdir(parents=True)
    (tmp_path / "run" / "a" / "kept.txt").write_text("written")
    assert not remove_if_empty(str(tmp_path / "run"))  # a file anywhere inside: nothing removed
    assert (target / "c").is_dir() and (tmp_path / "run" / "a" / "kept.txt").read_text() == "written"
    (tmp_path / "run" / "a" / "kept.txt").unlink()
    assert remove_if_empty(str(tmp_path / "run")) and not (tmp_path / "run").exists()
    assert not remove_if_empty(str(tmp_path / "missing"))


def test_an_atomic_write_that_fails_midway_leaves_no_file_and_no_temporary(tmp_path):
    """A writer that raises after writing part of its file: a new path does not appear, an existing one keeps its
    bytes, and no `.tmp-<pid>` file is left beside either."""
    from bert_tf import staging

    class Interrupted(Exception):
        pass

    new, old = tmp_path / "new.txt", tmp_path / "old.txt"
    old.write_text("complete earlier version\n")
    for path in (new, old):
        with pytest.raises(Interrupted):
            with staging.atomic_write(str(path)) as f:
                f.write("half of the ")
                f.flush()  # on disk under the temporary name
                assert os.path.exists(staging.staging_name(str(path)))
                raise Interrupted()
    assert sorted(os.listdir(tmp_path)) == ["old.txt"]
    assert old.read_text() == "complete earlier version\n"
    with pytest.raises(Interrupted):  # a writer that takes a file name (Keras's model.save, a copy), the same
        with staging.staged_file(str(old), suffix=".keras") as tmp:
            open(tmp, "w").write("partial")
            raise Interrupted()
    assert sorted(os.listdir(tmp_path)) == ["old.txt"] and old.read_text() == "complete earlier version\n"


def test_an_existing_file_is_kept_until_the_new_one_is_complete(tmp_path):
    """While the new version is being written a reader of the path gets the old one, whole; when the block ends the
    path holds exactly the new bytes. Also: an empty file is written (TensorFlow's GFile creates a file only at
    its first write), JSON comes out in the one format, and a copy goes in the same way."""
    from bert_tf import staging

    path = tmp_path / "eval_results.txt"
    path.write_bytes(b"loss = 1.0\n")
    with staging.atomic_write(str(path)) as f:
        f.write("loss = 0.5\n")
        f.flush()
        assert path.read_bytes() == b"loss = 1.0\n"
        f.write("step = 7 \u00e9\n")
        assert path.read_bytes() == b"loss = 1.0\n"
    assert path.read_bytes() == "loss = 0.5\nstep = 7 \u00e9\n".encode("utf-8")
    with staging.atomic_write(str(path), "wb") as f:
        f.write(b"\x00\xff")
    assert path.read_bytes() == b"\x00\xff"
    staging.write_text(str(path), "")
    assert path.exists() and path.read_bytes() == b""
    staging.write_json(str(tmp_path / "config.json"), {"b": [1, 2], "a": "x"})
    assert (tmp_path / "config.json").read_text() == '{\n  "a": "x",\n  "b": [\n    1,\n    2\n  ]\n}\n'
    staging.copy_file(str(tmp_path / "config.json"), str(path))
    assert path.read_bytes() == (tmp_path / "config.json").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["config.json", "eval_results.txt"]


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write_and_a_live_ones_kept(tmp_path):
    from bert_tf import staging

    dead, live = _dead_pid(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for name in (f"vocab.txt.tmp-{dead}", f"model.keras.tmp-{dead}.keras", f"vocab.txt.tmp-{live.pid}"):
            (tmp_path / name).write_text("partial")
        staging.write_text(str(tmp_path / "vocab.txt"), "[PAD]\n")
        with staging.staged_file(str(tmp_path / "model.keras"), suffix=".keras") as tmp:
            assert tmp == staging.staging_name(str(tmp_path / "model.keras")) + ".keras"
            open(tmp, "w").write("model")
        assert sorted(os.listdir(tmp_path)) == ["model.keras", "vocab.txt", f"vocab.txt.tmp-{live.pid}"]
        assert staging.is_staging_name(f"vocab.txt.tmp-{live.pid}") and not staging.is_staging_name("vocab.txt")
        assert not staging.is_staging_name("wiki.old-2020.tfrecord")  # a user's file, not a temporary
    finally:
        live.kill()
        live.wait()
