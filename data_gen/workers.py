"""How data_gen's worker processes start, and how they tell that the main process is gone. Standard library only:
the commands import this before TensorFlow.

Workers are forked from multiprocessing's fork server where the platform has one, else spawned. Both start from a
process without TensorFlow, which is not fork-safe; the fork server has imported the workers' modules once
(`prestart`), so a worker starts in a fork instead of an interpreter start and numpy's import. A command starts the
fork server before it imports TensorFlow, whose import leaves the other cores idle; a library caller's first pool
starts it.

A worker is a child of the fork server, not of the main process, so "has my parent exited" is asked of the process
that created the pool through multiprocessing's parent sentinel (`main_alive`), which works for both start methods.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import time

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
PRELOAD = ["data_gen.window"]  # what a worker runs, with numpy and the rest of what it imports


def start_method() -> str:
    """"forkserver" where the platform has it (Linux, macOS), else "spawn"."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def context():
    """The multiprocessing context the worker pools use (`start_method`)."""
    return multiprocessing.get_context(start_method())


class _OneBlasThread:
    """Within the block, processes started get `OPENBLAS_NUM_THREADS=1` unless the user set it: a worker's numpy does
    element-wise work, one process per core, and the thread per core that OpenBLAS starts at numpy's import would
    only add to every worker's start-up. The fork server passes its own environment on, so it matters where that
    server starts."""

    def __enter__(self):
        self.added = BLAS_THREADS not in os.environ
        if self.added:
            os.environ[BLAS_THREADS] = "1"

    def __exit__(self, *exc):
        if self.added:
            os.environ.pop(BLAS_THREADS, None)


def prestart() -> None:
    """Starts the fork server with the workers' modules imported, in the background, for a command that owns its
    process (the preload list is process-wide): call it before importing TensorFlow. No-op where workers are
    spawned."""
    if start_method() != "forkserver":
        return
    multiprocessing.set_forkserver_preload(PRELOAD)
    with _OneBlasThread():
        multiprocessing.forkserver.ensure_running()


def start_workers(pool, num_workers: int, task) -> list:
    """Starts the pool's `num_workers` processes now, so that they are ready when the first window is, and returns
    the futures of `task`, submitted once per worker. A pool that does not fork the main process starts one process
    per `submit` while it has fewer than it may; a fork server not started yet starts in the first."""
    with _OneBlasThread():
        return [pool.submit(task) for _ in range(num_workers)]


def main_alive(main_pid: int) -> bool:
    """In a worker: whether `main_pid`, the process that started it, is still running. Asked of multiprocessing's
    parent sentinel where `main_pid` started this process through multiprocessing (a fork server's child included),
    else of the parent pid."""
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid == main_pid:
        return parent.is_alive()
    return os.getppid() == main_pid


def wait_for_main(main_pid: int, poll_seconds: float = 0.2) -> None:
    """In a worker: returns once `main_pid` has exited (`main_alive`), blocking on the parent sentinel where there is
    one."""
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid == main_pid:
        parent.join()
        return
    while os.getppid() == main_pid:
        time.sleep(poll_seconds)

