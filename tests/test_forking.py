"""tests/forking.py's `python()` stands in for `subprocess.run([sys.executable, ...])` in many tests: the same
command run both ways gives the same exit status, stdout and stderr (exceptions, `sys.exit` with a message or a
number, a signal, Ctrl-C, non-daemon threads and atexit handlers, `-m`'s argv and sys.path), and a timeout raises
`TimeoutExpired` and leaves no process of the command's behind. `popen` stands in for `subprocess.Popen` where a
test signals the command."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import forking

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
THREAD_AND_ATEXIT = """
import atexit, threading, time
def late():
    time.sleep(0.5)
    print("thread done", flush=True)
threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
print("main done")
"""


@pytest.mark.parametrize("args", [
    ["-c", "import sys; print('out'); print('err', file=sys.stderr); print(undefined_name)"],
    ["-c", "import sys; sys.stdout.write('no newline'); sys.exit('a message')"],
    ["-c", "import sys; sys.exit(3)"],
    ["-c", "import os, signal; print('before', flush=True); os.kill(os.getpid(), signal.SIGKILL)"],
    ["-c", "print('before', flush=True); raise KeyboardInterrupt"],
    ["-c", THREAD_AND_ATEXIT],
    ["-c", "import sys; print(sys.argv[1:], sys.path[0] == '')", "a", "--b=c"],
    ["-m", "json.tool", "--sort-keys", "--no-ensure-ascii", os.path.join(forking.ROOT, "pyproject.toml")],
], ids=["exception", "exit-message", "exit-3", "sigkill", "ctrl-c", "thread-and-atexit", "argv", "module-error"])
def test_a_forked_command_ends_as_a_fresh_one(args):
    fresh = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=forking.ROOT, env=ENV,
                           timeout=120)
    forked = forking.python(args, cwd=forking.ROOT, env=ENV, timeout=120)
    assert forked.returncode == fresh.returncode
    assert forked.stdout == fresh.stdout
    # a traceback names the frames it passed through: the server's differ from a fresh interpreter's
    assert forked.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:]


WAITS = """
import os, sys, time
print("started", flush=True)
open(sys.argv[1], "w").close()
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["INT", "TERM", "KILL"])
def test_popen_runs_alongside_and_a_signal_ends_it_as_it_ends_a_fresh_one(sig, tmp_path):
    """`popen` returns while the command runs; a signal to it ends it with the status and output that the same
    signal gives a fresh interpreter started as a terminal starts one (Ctrl-C raises KeyboardInterrupt)."""
    ended = {}
    for way in ("fresh", "forked"):
        ready, out, err = (tmp_path / f"{way}.{name}" for name in ("ready", "out", "err"))
        args = ["-c", WAITS, str(ready)]
        if way == "fresh":
            with open(out, "wb") as stdout, open(err, "wb") as stderr:
                proc = subprocess.Popen([sys.executable, *args], stdout=stdout, stderr=stderr, env=ENV,
                                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        else:
            proc = forking.popen(args, stdout=out, stderr=err, env=ENV)
        try:
            deadline = time.time() + 60
            while not ready.exists() and time.time() < deadline:
                time.sleep(0.01)
            assert proc.poll() is None and proc.returncode is None
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(0.05)
            proc.send_signal(sig)
            ended[way] = (proc.wait(30), out.read_text(), err.read_text().splitlines()[-1:])
            assert proc.poll() == proc.returncode == ended[way][0]
        finally:
            proc.kill()
            proc.wait()
    assert ended["forked"] == ended["fresh"] and ended["fresh"][0] == -sig


def test_a_timeout_raises_and_kills_what_the_command_started(tmp_path):
    pid_file = tmp_path / "pid"
    code = (f"import subprocess, sys, time\nchild = subprocess.Popen([sys.executable, '-c', 'import time; "
            f"time.sleep(300)'])\nopen({str(pid_file)!r}, 'w').write(str(child.pid))\nprint('started', "
            "flush=True)\ntime.sleep(300)\n")
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        forking.python(["-c", code], env=ENV, timeout=5)
    assert raised.value.output == "started\n"
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # killed with its process group; a zombie until init reaps it
        try:
            with open(f"/proc/{grandchild}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"process {grandchild}, started by the timed-out command, is still running")


def test_python_refuses_an_option_it_cannot_fork():
    with pytest.raises(ValueError, match="python\\(\\) takes -m, -c or a script, not \\['-X'\\]"):
        forking.python(["-X", "importtime", "-c", "pass"])


@pytest.mark.parametrize("preload, present", [("bert_tf", True), ("tensorflow_text", False)])
def test_a_command_has_what_its_server_preloaded_and_nothing_else_of_ours(preload, present):
    """A SavedModel is served without bert_tf: its loader forks from a server that imported only tensorflow_text."""
    code = "import sys; print(sorted({m.split('.')[0] for m in sys.modules} & {'bert_tf', 'tensorflow_text'}))"
    forked = forking.python(["-c", code], env=ENV, preload=preload)
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == str(["bert_tf"] if present else ["tensorflow_text"])


def test_run_forked_runs_commands_together_each_with_its_own_environment(tmp_path):
    """Two commands that each wait for the other's file (so they must run at the same time), each reading its own
    variable; a command whose import-time variables differ from the server's is refused."""
    wait_for = ("import os, sys, time\nopen(os.environ['MINE'], 'w').close()\n"
                "while not os.path.exists(os.environ['OTHER']): time.sleep(0.01)\nprint(os.environ['MINE'])")
    script = tmp_path / "meet.py"
    script.write_text(wait_for)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    commands = [dict(id=name, path=str(script), args=[], cwd=str(tmp_path), env=dict(ENV, MINE=mine, OTHER=other))
                for name, mine, other in (("a", a, b), ("b", b, a))]
    done = forking.run_forked(commands, str(tmp_path), parallel=2, timeout=60, env=ENV)
    assert {key: (status, out.strip()) for key, (status, out, _) in done.items()} == {"a": (0, a), "b": (0, b)}
    louder = [dict(commands[0], env=dict(ENV, TF_CPP_MIN_LOG_LEVEL="0"))]
    with pytest.raises(ValueError, match="command a: TF_CPP_MIN_LOG_LEVEL not as in the server's environment"):
        forking.run_forked(louder, str(tmp_path), env=ENV)
