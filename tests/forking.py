"""Helpers for tests that run many commands: fork them from one interpreter that has imported TensorFlow once, and
compute a module's expensive results once per test session even when pytest-xdist runs the module on two workers.

`run_forked` starts one runner interpreter (a child of the test process, in a session of its own, killed with its
children if anything goes wrong) that imports bert_tf, hence TensorFlow, then forks one child per command. A child
runs the command the way it runs from a shell: a module as `python -m` does (`runpy.run_module`) or a script file
such as an installed console script (`runpy.run_path`), with its own working directory, argv, stdout and stderr.
A fresh `python -m` per command would pay TensorFlow's import (seconds) once per command. What a fork cannot show
is the import's own output (TensorFlow's C++ start-up lines): tests of that still need a fresh interpreter.

`once_per_session` keeps a fixture's result in the directory that xdist's workers share, behind a file lock: the
first worker to ask computes it, the other waits for it and reads it.
"""

import fcntl
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_RUNNER = r"""
import json, os, runpy, sys, time, traceback
sys.path.insert(0, sys.argv[1])
import bert_tf  # noqa: F401
commands, parallel, timeout = json.load(sys.stdin), int(sys.argv[2]), float(sys.argv[3])

def child(command):
    os.chdir(command["cwd"])
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(command[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    code = 0
    try:
        if command.get("module"):
            sys.argv = [command["module"], *command["args"]]
            runpy.run_module(command["module"], run_name="__main__", alter_sys=True)
        else:
            sys.argv = [command["path"], *command["args"]]
            runpy.run_path(command["path"], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

status, running, waiting = {}, {}, list(commands)
while waiting or running:
    while waiting and len(running) < parallel:
        command = waiting.pop(0)
        pid = os.fork()
        if pid == 0:
            child(command)
        running[pid] = (command["id"], time.monotonic())
    pid, code = os.waitpid(-1, os.WNOHANG)
    if pid:
        status[running.pop(pid)[0]] = os.waitstatus_to_exitcode(code)
        continue
    for pid, (name, started) in running.items():
        if time.monotonic() - started > timeout:
            os.kill(pid, 9)
    time.sleep(0.05)
print(json.dumps(status))
"""


def run_forked(commands, work, parallel=4, timeout=240, env=None):
    """Runs each command of `commands` (dicts with `id`, `args`, `cwd` and either `module` or `path`) in a child
    forked after TensorFlow's import; returns {id: (exit status, stdout, stderr)}, the output read back from files
    under `work` with carriage returns kept. A command still running after `timeout` seconds is killed (-9)."""
    runs = []
    for command in commands:
        runs.append(dict(command, stdout=os.path.join(work, f"{command['id']}.stdout"),
                         stderr=os.path.join(work, f"{command['id']}.stderr")))
    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, ROOT, str(parallel), str(timeout)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                              start_new_session=True)
    try:
        stdout, _ = runner.communicate(json.dumps(runs), timeout=timeout * (len(runs) // parallel + 2))
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
    assert runner.returncode == 0, "the command runner failed"
    status = json.loads(stdout)
    return {run["id"]: (status[run["id"]], _read(run["stdout"]), _read(run["stderr"])) for run in runs}


def _read(path):
    with open(path, newline="") as f:  # carriage returns kept
        return f.read()


def once_per_session(tmp_path_factory, name, compute):
    """`compute(directory)`'s result, computed by one xdist worker (or the only process) per test session in
    `directory`, a folder named `name` in the workers' shared base temporary directory; the other workers wait on a
    file lock and unpickle it. A failed computation is not kept: each waiting worker then tries it itself."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # each worker's base is a folder of the session's shared one
    directory = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = directory / "result.pickle"
            if done.exists():
                with open(done, "rb") as f:
                    return pickle.load(f)
            shutil.rmtree(directory, ignore_errors=True)  # what a failed computation left
            directory.mkdir()
            result = compute(directory)
            with open(f"{done}.tmp", "wb") as f:
                pickle.dump(result, f)
            os.replace(f"{done}.tmp", done)
            return result
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
