"""Every console script as installed: `--help` lists the command's own flags and exits 0, `--helpfull` shows them
before absl's, and no TensorFlow C++ log line reaches stderr unless asked for (`bert_tf.tf_log`)."""

import concurrent.futures
import importlib.util
import os
import re
import subprocess
import sys
import time
import tomllib

import pytest

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
# TensorFlow's C++ log lines (absl's Python log lines, the commands' own, share the format but name a .py file)
CPP_LOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]*\.(?:cc|h):\d+\]|I tensorflow/|oneDNN|"
                     r"absl::InitializeLog|cuInit|cuda", re.M)

# Two flags each command defines itself (or adopts as its own) and that --help must show.
OWN_FLAGS = {
    "convert_checkpoint": ["--input", "--input_format"],
    "build_vocab": ["--input_file", "--vocab_size"],
    "create_pretraining_data": ["--dupe_factor", "--num_workers"],
    "run_pretraining": ["--num_train_steps", "--strategy"],
    "run_classifier": ["--task_name", "--learning_rate"],
    "run_squad": ["--predict_file", "--doc_stride"],
    "run_swag": ["--data_dir", "--num_train_epochs"],
    "run_ner": ["--label_all_subtokens", "--init_checkpoint"],
    "export_saved_model": ["--kind", "--export_dir"],
    "extract_features": ["--layers", "--output_file"],
    "bert_tf_quickstart": ["--corpus_mb", "--num_train_steps"],
}


def tf_log():
    """bert_tf/tf_log.py loaded on its own: it imports no TensorFlow, so these tests need none."""
    spec = importlib.util.spec_from_file_location("tf_log_alone", os.path.join(ROOT, "bert_tf", "tf_log.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def default_env():
    """The environment a user starts with: no TF_CPP_MIN_LOG_LEVEL (conftest sets one for the test process)."""
    return {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def run(command, cwd=ROOT, env=None):
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env or default_env(), timeout=600)


# The console scripts whose --help runs in a fresh interpreter, so that TensorFlow's start-up lines would show on
# its stderr: one entry per package a command's module lives in (data_gen's build_vocab and a bert_tf.cli command
# run fresh below too). The others' --help and --helpfull are forked after the import (tests/forking.py): a
# bert_tf.cli module imports bert_tf, which sets the filter, before anything else.
FRESH_HELP = ("create_pretraining_data", "export_saved_model")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each console script's --help, two --helpfull, one `python -m`, and a real run that touches TensorFlow's
    devices (build_vocab on a small corpus); {key: CompletedProcess}. Computed once per session."""
    return forking.once_per_session(tmp_path_factory, "cli_help", _run_all)


def _run_all(work):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert set(scripts) == set(OWN_FLAGS), "a console script was added or removed: say which flags it must list"
    corpus = work / "corpus"
    corpus.mkdir()
    (corpus / "text.txt").write_text("\n".join(f"Sentence number {i} says that the model reads words and pieces."
                                               for i in range(200)) + "\n", encoding="utf-8")
    commands = {("help", name): [os.path.join(BIN, name), "--help"] for name in FRESH_HELP}
    commands[("module", "run_pretraining")] = [sys.executable, "-m", "bert_tf.cli.run_pretraining", "--help"]
    commands[("run", "build_vocab")] = [os.path.join(BIN, "build_vocab"), f"--input_file={corpus / 'text.txt'}",
                                        f"--output_file={corpus / 'vocab.txt'}", "--vocab_size=200"]
    forked = {("help", name): "--help" for name in scripts if name not in FRESH_HELP}
    forked.update({("helpfull", name): "--helpfull" for name in ("run_swag", "bert_tf_quickstart")})
    runs = [dict(id=f"{kind}-{name}", path=os.path.join(BIN, name), args=[flag], cwd=ROOT)
            for (kind, name), flag in forked.items()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(commands) + 1) as pool:
        futures = {key: pool.submit(run, command) for key, command in commands.items()}
        helps = pool.submit(forking.run_forked, runs, str(work), parallel=4, timeout=240, env=default_env())
        done = {key: future.result() for key, future in futures.items()}
    results = helps.result()
    for (kind, name), flag in forked.items():
        code, stdout, stderr = results[f"{kind}-{name}"]
        done[(kind, name)] = subprocess.CompletedProcess([os.path.join(BIN, name), flag], code, stdout, stderr)
    return done


def test_help_of_every_console_script_lists_its_own_flags_and_exits_0(results):
    problems = []
    for name, own in OWN_FLAGS.items():
        out = results[("help", name)]
        if out.returncode != 0:
            problems.append(f"{name} --help: exit {out.returncode}: {out.stderr[-500:]}")
            continue
        missing = [flag for flag in own if f"  {flag}:" not in out.stdout and f"  --[no]{flag[2:]}:" not in out.stdout]
        if missing:
            problems.append(f"{name} --help: lacks {missing}")
        if "--verbosity" in out.stdout or "absl.logging" in out.stdout:
            problems.append(f"{name} --help: lists absl's flags (they belong in --helpfull)")
        if "Size/setting of the run" in out.stdout:
            problems.append(f"{name} --help: a flag's help does not say what it does")
        if out.stderr.strip():
            problems.append(f"{name} --help: stderr is not empty: {out.stderr[:500]}")
    assert not problems, "\n".join(problems)


def test_help_shows_the_usage_examples_line_by_line(results):
    """A docstring example continued with a backslash must reach --help as written (a non-raw docstring would join
    its lines into one)."""
    for name in ("run_pretraining", "run_classifier", "run_squad", "run_ner", "create_pretraining_data",
                 "export_saved_model", "extract_features"):
        lines = results[("help", name)].stdout.splitlines()
        assert any(line.rstrip().endswith("\\") and name in line for line in lines), name


def test_helpfull_shows_the_command_flags_before_absl_ones(results):
    for name in ("run_swag", "bert_tf_quickstart"):
        out = results[("helpfull", name)]
        assert out.returncode == 0, out.stderr[-500:]
        text = out.stdout
        for flag in OWN_FLAGS[name]:
            assert text.index(f"  {flag}:") < text.index("absl.logging:") < text.index("--verbosity:")
        assert text.count(f"  {OWN_FLAGS[name][0]}:") == 1  # listed once, with the command's flags


def test_python_m_shows_the_same_flags(results):
    out = results[("module", "run_pretraining")]
    assert out.returncode == 0, out.stderr[-500:]
    assert all(f"  {flag}:" in out.stdout for flag in OWN_FLAGS["run_pretraining"])
    assert not out.stderr.strip()


def test_a_real_run_writes_no_tensorflow_log_line(results):
    out = results[("run", "build_vocab")]
    assert out.returncode == 0, out.stderr[-2000:]
    assert "build_vocab: wrote" in out.stdout
    assert not CPP_LOG.search(out.stderr), out.stderr[-2000:]


@pytest.mark.parametrize("argv, level", [
    (["prog"], None), (["prog", "--verbosity=0"], 0), (["prog", "--verbosity", "1"], 0), (["prog", "-v=-1"], 1),
    (["prog", "-v", "-2"], 2), (["prog", "--v=-5"], 3), (["prog", "--verbosity=loud"], None),
    (["prog", "--", "--verbosity=0"], None), (["prog", "--verbosityx=0"], None)])
def test_absl_verbosity_on_the_command_line_sets_the_level(argv, level):
    assert tf_log().level_from_verbosity(argv) == level


def test_the_variable_wins_over_the_flag_and_quiet_is_the_default():
    log = tf_log()
    environ = {}
    assert log.choose_level(environ, ["prog"]) == 3 and environ == {"TF_CPP_MIN_LOG_LEVEL": "3"}
    environ = {}
    assert log.choose_level(environ, ["prog", "-v", "0"]) == 0 and environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    environ = {"TF_CPP_MIN_LOG_LEVEL": "1"}
    assert log.choose_level(environ, ["prog", "--verbosity=0"]) == 1 and environ["TF_CPP_MIN_LOG_LEVEL"] == "1"


START_UP = [b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
            b"a line of someone else's\n",
            b"I0000 00:00:1795454072.738823   26696 port.cc:153] oneDNN custom operations are on.\n",
            b"I1123 17:14:02.357113   27254 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n",
            b"To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n",
            b"W1123 17:14:02.400000   27254 loader.cc:1] a warning\n",
            b"E1123 17:14:02.500000   27254 cuda_platform.cc:52] failed call to cuInit\n"]


@pytest.mark.parametrize("level, kept", [(1, [1, 5, 6]), (2, [1, 6]), (3, [1])])
def test_start_up_lines_below_the_level_are_dropped_with_their_continuations(level, kept):
    assert list(tf_log().keep_lines(START_UP, level)) == [START_UP[i] for i in kept]


WRITES_THEN_ABORTS = r"""
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("tf_log_alone", sys.argv[1])
log = importlib.util.module_from_spec(spec)
spec.loader.exec_module(log)
with log._stderr_through_filter(3):
    os.write(2, b"I0000 00:00:1795454072.738823   26696 port.cc:153] oneDNN custom operations are on.\n")
    print("from Python", file=sys.stderr)
    if sys.argv[2] == "abort":
        os.write(2, b"F0000 00:00:1795454072.900000   26696 cpu_feature_guard.cc:1] compiled to use AVX\n")
        os.abort()
print("after", file=sys.stderr)
"""


@pytest.mark.parametrize("ending", ["normal", "abort"])
def test_the_filter_passes_on_python_and_fatal_lines_even_when_the_process_dies(ending, tmp_path):
    """TensorFlow's C++ side aborts with an F line (a CPU without the instructions it needs) while it loads: the
    filter runs in a child process, so that line still shows, and the child ends with its input."""
    log_file = tmp_path / "stderr.txt"
    with open(log_file, "wb") as stderr:
        process = subprocess.run([sys.executable, "-c", WRITES_THEN_ABORTS, os.path.join(ROOT, "bert_tf", "tf_log.py"),
                                  ending], stderr=stderr, timeout=60)
    assert process.returncode == (0 if ending == "normal" else -6)
    for _ in range(100):  # the child may still be writing after an abort
        text = log_file.read_text()
        if ending == "normal" or "F0000" in text:
            break
        time.sleep(0.1)
    assert "port.cc" not in text and "from Python" in text
    assert ("after" in text) == (ending == "normal")
    assert ("compiled to use AVX" in text) == (ending == "abort")


def test_log_handlers_made_while_tensorflow_loads_write_to_stderr_afterwards():
    """absl's and TensorFlow's Python log handlers are made during the filtered import and keep the sys.stderr of that
    moment: their lines after it must reach stderr, not a closed stand-in ('Logging error ... closed file')."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    code = ("import bert_tf, tensorflow as tf\nfrom absl import logging\n"
            "tf.get_logger().warning('from tensorflow')\nlogging.warning('from absl')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "from tensorflow" in done.stderr and "from absl" in done.stderr
    assert "Logging error" not in done.stderr and "Traceback" not in done.stderr
