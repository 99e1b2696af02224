"""How data_gen's worker processes start, and how they tell that the main process is gone. Standard library only:
the commands import this before TensorFlow.

A command starts multiprocessing's fork server before it imports TensorFlow, whose import leaves the other cores
idle, with numpy imported in it once (`prestart`), and its workers are forked from that server: a worker starts in
a fork instead of an interpreter start and numpy's import. Elsewhere (a library caller, whose process this module
does not own, or a platform without a fork server) workers are spawned. Both start from a process without
TensorFlow, which is not fork-safe. The fork server imports only third-party modules ahead: data_gen's own modules
are imported by each worker after multiprocessing has given it the main process's `sys.path` and working
directory, so that a worker runs the main process's copy of data_gen whatever directory the command was started
in (a fork server that imported them itself would find them from its own current directory first).

A worker is a child of the fork server, not of the main process, so "has the main process exited" is asked of
multiprocessing's parent sentinel (`main_alive`), which works for both start methods.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import time

from data_gen.cpus import available_cpus

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
PRELOAD = ["numpy", "google_crc32c"]  # the third-party modules a worker imports


_prestarted: list[bool] = []  # whether `prestart` started the fork server in this process


def start_method() -> str:
    """"forkserver" once `prestart` has started the fork server in this process, else "spawn"."""
    return "forkserver" if _prestarted else "spawn"


def fork_server_available() -> bool:
    """Whether `prestart` starts a fork server here: the platform has one, and this process may use more than one
    CPU (`cpus.available_cpus`)."""
    return "forkserver" in multiprocessing.get_all_start_methods() and available_cpus() > 1


def context():
    """The multiprocessing context the worker pools use (`start_method`)."""
    return multiprocessing.get_context(start_method())


@contextlib.contextmanager
def _environment(**values):
    """Within the block, os.environ has `values` where the user has not set the variable. For a process that has
    not started other threads yet: setenv is not safe while another thread reads the environment."""
    added = [name for name in values if name not in os.environ]
    os.environ.update({name: values[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def prestart() -> None:
    """Starts the fork server in the background with `PRELOAD` imported, for a command that owns its process (the
    preload list is process-wide) and has not imported TensorFlow yet; a no-op unless `fork_server_available` (on
    one CPU the command runs no worker unless told to, and spawns those), and where the server cannot start (no
    socket, say: the workers are spawned then). The server gets `OPENBLAS_NUM_THREADS=1` unless the user set it (a
    worker's numpy does element-wise work, one process per core, and the thread per core OpenBLAS would start is
    start-up cost), and `PYTHONSAFEPATH=1`, so that its imports do not come from the current directory, which the
    main process's `sys.path` may not have."""
    if _prestarted or not fork_server_available():  # once: a second call may come after TensorFlow's import
        return
    multiprocessing.set_forkserver_preload(PRELOAD)
    try:
        with _environment(**{BLAS_THREADS: "1", "PYTHONSAFEPATH": "1"}):
            multiprocessing.forkserver.ensure_running()
    except OSError:
        return
    _prestarted[:] = [True]


def start_workers(pool, num_workers: int, task) -> list:
    """Starts the pool's `num_workers` processes now, so that they are ready when the first window is, and returns
    the futures of `task`, submitted once per worker: a pool that does not fork the main process starts one process
    per `submit` while it has fewer than it may."""
    return [pool.submit(task) for _ in range(num_workers)]


def _main_sentinel(main_pid: int):
    """multiprocessing's record of the process that started this one, where that is `main_pid` (a fork server's
    child included), else None."""
    parent = multiprocessing.parent_process()
    return parent if parent is not None and parent.pid == main_pid else None


def main_alive(main_pid: int) -> bool:
    """In a worker: whether `main_pid`, the process that started it, is still running. Asked of multiprocessing's
    parent sentinel where `main_pid` started this process through multiprocessing, else of the parent pid."""
    parent = _main_sentinel(main_pid)
    return parent.is_alive() if parent is not None else os.getppid() == main_pid


def wait_for_main(main_pid: int, poll_seconds: float = 0.2) -> None:
    """In a worker: returns once `main_pid` has exited (`main_alive`), blocking on the parent sentinel where there is
    one."""
    parent = _main_sentinel(main_pid)
    if parent is not None:
        parent.join()
        return
    while os.getppid() == main_pid:
        time.sleep(poll_seconds)
