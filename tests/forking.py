"""Helpers for tests that run commands: run them forked from an interpreter that has imported TensorFlow once, and
compute a module's expensive results once per test session even when pytest-xdist runs the module on two workers.

`python(args, ...)` is `subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)` for a command
that imports bert_tf anyway (a CLI, a driver, a bench module), without paying TensorFlow's import (seconds of CPU)
per command. Each test process keeps one server interpreter per module it preloads and set of the environment
variables TensorFlow reads at import (`IMPORT_ENV`): started with them, it imports bert_tf, hence TensorFlow (or,
for a command that must run without bert_tf, such as a SavedModel served as TF Serving would, only tensorflow_text),
runs no op, and forks one child per command. A child runs the command as `python` would from a shell: `-m module` as
`runpy` does with the working directory first on sys.path, `-c code`, or a script file such as an installed console
script; with the command's own working directory, environment, argv, stdout and stderr; in a process group of its
own, killed with what it started after `timeout` seconds (`subprocess.TimeoutExpired`, as `subprocess.run` raises).
It ends as an interpreter ends, short of the final teardown: an uncaught exception prints its traceback and exits 1,
`sys.exit` and signals give their usual status, non-daemon threads and atexit handlers run first.

What a fork cannot show, and the tests of it that need a fresh interpreter: what happens during the import itself
(TensorFlow's C++ start-up lines, oneDNN's switch, the order of imports) and a different string hash seed per command
(children of one server share it).

`run_forked` runs a batch of commands, `parallel` at a time, on the same servers. `popen` starts one and returns at
once, for a test that signals it (`Forked`, a `subprocess.Popen` in what the tests use of it).

`once_per_session` keeps a fixture's result in the directory that xdist's workers share, behind a file lock: the
first worker to ask computes it, the other waits for it and reads it.
"""

import atexit
import fcntl
import itertools
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What TensorFlow, oneDNN and Python read once at start-up: a command whose environment differs in one of them gets
# a server started with its values.
IMPORT_ENV = ("PYTHONPATH", "PYTHONHASHSEED", "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE",
              "TF_ENABLE_ONEDNN_OPTS", "CUDA_VISIBLE_DEVICES", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
              "OMP_NUM_THREADS")

_SERVER = r"""
import atexit, gc, importlib, json, os, select, signal, sys, threading, time, traceback
importlib.import_module(sys.argv[1])  # bert_tf or tensorflow_text: TensorFlow, once for every command forked here
del sys.argv[1:]
gc.freeze()  # the import's objects, out of every collection: a child's collections would write to (copy) their pages

def child(command):
    # a process group of its own, so that a timeout kills what the command started as well
    os.setpgid(0, 0)
    # Ctrl-C raises KeyboardInterrupt, as in an interpreter started from a terminal, even if this server inherited
    # SIGINT ignored (a suite run as a background job of a non-interactive shell)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(command[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    os.environ.clear()
    os.environ.update(command["env"])
    os.chdir(command["cwd"])
    try:
        run(*command["argv"])
        code = 0
    except SystemExit as e:
        code = e.code
        if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
            print(code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # an interpreter then ends by SIGINT itself, so that its parent sees a Ctrl-C
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    # An interpreter's exit up to its teardown: wait for non-daemon threads, run atexit handlers, flush. The
    # teardown itself (freeing, and so copying, what the import made) changes nothing a command can see.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code or 0)

def run(kind, *args):
    rest = sys.path[1:]
    if kind == "-m":
        import runpy
        sys.argv, sys.path[:] = [args[0], *args[1:]], [os.getcwd(), *rest]
        runpy.run_module(args[0], run_name="__main__", alter_sys=True)
    elif kind == "-c":
        import types
        main = sys.modules["__main__"] = types.ModuleType("__main__")  # not this server's namespace
        sys.argv, sys.path[:] = ["-c", *args[1:]], ["", *rest]
        exec(compile(args[0], "<string>", "exec"), main.__dict__)
    else:
        import runpy
        sys.argv, sys.path[:] = [kind, *args], [os.path.dirname(os.path.abspath(kind)), *rest]
        runpy.run_path(kind, run_name="__main__")

def kill(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # already gone
        pass

running, timed_out, pending, reading = {}, set(), b"", True
while reading or running:
    if reading and select.select([0], [], [], 0.02)[0]:
        data = os.read(0, 1 << 16)
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            command = json.loads(line)
            pid = os.fork()
            if pid == 0:
                child(command)  # never returns
            try:
                os.setpgid(pid, pid)  # as the child does: whichever runs first
            except OSError:
                pass
            running[pid] = (command["id"], time.monotonic() + command["timeout"])
            if command.get("started"):
                os.write(1, (json.dumps([command["id"], "started", pid]) + "\n").encode())
        if not data:  # the test process went away: so do its commands
            reading = False
            for pid in running:
                kill(pid)
    elif not reading:
        time.sleep(0.02)
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        name, _ = running.pop(pid)
        ended = [os.waitstatus_to_exitcode(status), pid in timed_out]
        os.write(1, (json.dumps([name, "ended", ended]) + "\n").encode())
    for pid, (name, deadline) in running.items():
        if pid not in timed_out and time.monotonic() > deadline:
            timed_out.add(pid)
            kill(pid)
"""


class _Server:
    """One server interpreter (see the module docstring) and the lock that gives one caller at a time its replies."""

    def __init__(self, env, preload):
        self.work = tempfile.mkdtemp(prefix="bert_tf_forked_")
        self.log = os.path.join(self.work, "server.stderr")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-c", _SERVER, preload], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT,
                                            start_new_session=True)
        self.lock = threading.RLock()
        self.ids = itertools.count()
        self.replies: dict = {}  # (command id, "started" or "ended") -> what the server said, not yet asked for
        self.owner = os.getpid()  # a process forked from the test process must not close the owner's servers

    def send(self, command, out=None, started=False):
        """Sends `command` (argv, cwd, env, timeout); returns its id and its output files, `out` or two in this
        server's folder. With `started`, the server also says the child's pid as soon as it is forked."""
        name = str(next(self.ids))
        out = out or {stream: os.path.join(self.work, f"{name}.{stream}") for stream in ("stdout", "stderr")}
        self.process.stdin.write((json.dumps(dict(
            id=name, argv=command["argv"], cwd=str(command["cwd"]), env=command["env"], timeout=command["timeout"],
            started=started, **out)) + "\n").encode())
        self.process.stdin.flush()
        return name, out

    def reply(self, names, kind):
        """(name, what the server said) for the first of `names` whose `kind` ("started", "ended") line comes;
        lines for other commands are kept for whoever asks for them. The caller holds the lock."""
        while True:
            for name in names:
                if (name, kind) in self.replies:
                    return name, self.replies.pop((name, kind))
            line = self.process.stdout.readline()
            if not line:
                with open(self.log, errors="replace") as f:
                    raise RuntimeError(f"the fork server ended (exit {self.process.wait()}): {f.read()[-3000:]}")
            name, what, value = json.loads(line)
            self.replies[(name, what)] = value

    def run(self, commands, parallel):
        """{key: (exit status, stdout path, stderr path, timed out)} for `commands`, dicts of key, argv, cwd, env
        and timeout, at most `parallel` at a time."""
        waiting, sent, done = list(commands), {}, {}
        with self.lock:
            while waiting or sent:
                while waiting and len(sent) < parallel:
                    command = waiting.pop(0)
                    name, out = self.send(command)
                    sent[name] = (command["key"], out)
                name, (status, timed_out) = self.reply(list(sent), "ended")
                key, out = sent.pop(name)
                done[key] = (status, out["stdout"], out["stderr"], timed_out)
        return done

    def close(self):
        if os.getpid() != self.owner:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.work, ignore_errors=True)


_servers: dict = {}
_servers_lock = threading.Lock()


def _server(env, preload="bert_tf"):
    key = (preload, *(env.get(name) for name in IMPORT_ENV))
    with _servers_lock:
        if key not in _servers or _servers[key].process.poll() is not None:
            _servers[key] = _Server(env, preload)
        return _servers[key]


@atexit.register
def _close_servers():
    for server in _servers.values():
        server.close()


def _read(path, newline):
    with open(path, newline=newline) as f:
        return f.read()


def _command_args(args, function):
    args = [str(arg) for arg in args]
    if not args or (args[0].startswith("-") and args[0] not in ("-m", "-c")):
        raise ValueError(f"{function}() takes -m, -c or a script, not {args[:1]}")
    return args


def python(args, *, cwd=ROOT, env=None, timeout=600, preload="bert_tf"):
    """`subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)`
    for `args` that start with `-m`, `-c` or a script path, forked after the import of `preload` (bert_tf, or
    "tensorflow_text" for a command that must not have bert_tf in it; the module docstring)."""
    env = dict(os.environ if env is None else env)
    args = _command_args(args, "python")
    (status, out, err, timed_out), = _server(env, preload).run(
        [dict(key=0, argv=args, cwd=cwd, env=env, timeout=timeout)], 1).values()
    command = [sys.executable, *args]
    stdout, stderr = _read(out, None), _read(err, None)  # universal newlines, as subprocess's text mode
    os.remove(out)
    os.remove(err)
    if timed_out:
        raise subprocess.TimeoutExpired(command, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(command, status, stdout, stderr)


class Forked:
    """A command forked as `python` forks one, running while the test goes on: what the tests use of
    `subprocess.Popen` (pid, poll, wait, send_signal, kill, returncode). The process is a child of the server, not of
    the test: a signal goes to it alone, as to a Popen's, and its exit status comes back through the server."""

    def __init__(self, server, name, pid, args):
        self.server, self.name, self.pid, self.args = server, name, pid, args
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:  # ended and reaped by the server, which has said so or is about to
                self.wait()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None and timeout is not None:
            deadline = time.monotonic() + timeout
            while self.poll() is None:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                time.sleep(0.01)
        if self.returncode is None:
            with self.server.lock:
                _, (self.returncode, _) = self.server.reply([self.name], "ended")
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)


def popen(args, *, stdout=os.devnull, stderr=os.devnull, cwd=ROOT, env=None, timeout=600, preload="bert_tf"):
    """`subprocess.Popen([sys.executable, *args], ...)` forked as `python` forks it, its output written to the
    files `stdout` and `stderr`; killed after `timeout` seconds."""
    env = dict(os.environ if env is None else env)
    args = _command_args(args, "popen")
    server = _server(env, preload)
    with server.lock:
        name, _ = server.send(dict(argv=args, cwd=cwd, env=env, timeout=timeout),
                              out={"stdout": str(stdout), "stderr": str(stderr)}, started=True)
        _, pid = server.reply([name], "started")
    return Forked(server, name, pid, [sys.executable, *args])


def run_forked(commands, work, parallel=4, timeout=240, env=None):
    """Runs each command of `commands` (dicts with `id`, `args`, `cwd`, either `module` or `path`, and optionally
    its own `env`) forked after bert_tf's import, `parallel` at a time; returns {id: (exit status, stdout,
    stderr)}, the output with carriage returns kept (a progress bar's redraws). A command still running after
    `timeout` seconds is killed (-9). A command's own environment may differ from `env` only in variables that are
    not read at import (`IMPORT_ENV`), since all of them run on `env`'s server."""
    env = dict(env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    for command in commands:
        differ = [name for name in IMPORT_ENV if command.get("env", env).get(name) != env.get(name)]
        if differ:
            raise ValueError(f"command {command['id']}: {', '.join(differ)} not as in the server's environment")
    runs = [dict(key=command["id"], cwd=command["cwd"], env=command.get("env", env), timeout=timeout,
                 argv=["-m", command["module"], *command["args"]] if command.get("module") else
                 [command["path"], *command["args"]]) for command in commands]
    done = _server(env).run(runs, parallel)
    results = {}
    for key, (status, out, err, _) in done.items():
        results[key] = (status, _read(out, ""), _read(err, ""))
        shutil.move(out, os.path.join(work, f"{key}.stdout"))
        shutil.move(err, os.path.join(work, f"{key}.stderr"))
    return results


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
