"""Windows appended to their shard file in window order by whichever process built them, free of TensorFlow.

Workers write their own windows. Sending a window's records (megabytes at seq 128) back to the main process would
cost more than writing them: pickling, a pipe of 64 kB at a time and unpickling take more CPU than the write itself,
on cores that are already full (BENCHMARKS.md, "Pretraining data generation").
"""

from __future__ import annotations

import gzip as gzip_lib
import multiprocessing
import os
import time

from data_gen.workers import main_alive


class AppendAborted(RuntimeError):
    """The run failed elsewhere (another window, the main process): this window is not written."""


class WindowAppender:
    """Appends window k's TFRecord bytes to shard k mod N once window k-1 is in, from any process.

    The shards' bytes are therefore the same for any number of workers. Whose turn it is lives in one shared
    counter that the process holding the turn advances. Waiting processes poll it every millisecond instead of
    waiting on a lock: windows finish in nearly the order they started, so waits are rare and short, and no lock can
    be left held by a killed process. `fail()` stops every waiting or later append. A worker also stops if the
    process that created the appender has exited (`workers.main_alive`).

    With `gzip`, each non-empty window is compressed in the process that built it, as one gzip member (no file name,
    time stamp 0, TF's default level 6). A file of concatenated members is a valid gzip file; TensorFlow's GZIP
    reader and Python's `gzip` read it whole.

    Create it in the main process and hand it to workers when they start (pool initializer arguments): its shared
    counters can only travel with a new process.
    """

    def __init__(self, paths: list[str], gzip: bool = False):
        context = multiprocessing.get_context("spawn")
        self.paths = list(paths)
        self.gzip = gzip
        self._turn = context.RawValue("q", 0)
        self._failed = context.RawValue("b", 0)
        self._owner = os.getpid()

    def append(self, window_index: int, data: bytes) -> None:
        if self.gzip and data:
            data = gzip_lib.compress(data, compresslevel=6, mtime=0)
        while self._turn.value != window_index:
            self._check()
            time.sleep(0.001)
        self._check()  # a failure after this check still lets this append finish: `generate` removes the files
        # only once the workers have stopped
        if data:
            with open(self.paths[window_index % len(self.paths)], "ab") as f:
                f.write(data)
        self._turn.value = window_index + 1

    def fail(self) -> None:
        self._failed.value = 1

    def _check(self) -> None:
        if self._failed.value:
            raise AppendAborted("the run failed elsewhere; window not written")
        if os.getpid() != self._owner and not main_alive(self._owner):
            raise AppendAborted("the main process has exited; window not written")
