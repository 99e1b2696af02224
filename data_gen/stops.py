"""How SIGTERM and Ctrl-C stop a run of `generate`: as an exception in the main process, so that it cleans up
(workers shut down, temporary shards removed), but never from inside the parts that an exception would leave half
done: TensorFlow's calls (its Python wrappers are not written to be left at an arbitrary point) and the commit
(several renames, then the metadata). A signal that lands there is held until the part ends."""

from __future__ import annotations

import contextlib
import signal

from absl import logging


class Terminated(SystemExit):
    """SIGTERM stopped `generate` after it had cleaned up; exits with the shell's status for SIGTERM."""

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)


def _stop(signum: int) -> BaseException:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


class Stops:
    """While `catching()` runs in the main thread, SIGTERM raises `Terminated` and SIGINT (when Python's own handler
    has it) `KeyboardInterrupt`, where the main process is, except inside `held()`. A second signal of the same kind
    gets the handler that was there before (a second Ctrl-C or SIGTERM is not held)."""

    def __init__(self):
        self.pending: int | None = None
        self._holding = 0
        self._previous: dict = {}

    def _handle(self, signum, frame):
        del frame
        signal.signal(signum, self._previous.pop(signum))
        if self._holding:
            self.pending = signum
        else:
            raise _stop(signum)

    @contextlib.contextmanager
    def catching(self):
        try:
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread: signals are not ours to take
            yield
            return
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._previous.clear()

    @contextlib.contextmanager
    def _holding_signals(self):
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1

    @contextlib.contextmanager
    def held(self):
        """A signal that lands inside waits for the end, where it stops the run."""
        with self._holding_signals():
            yield
        if self.pending is not None and not self._holding:
            signum, self.pending = self.pending, None
            raise _stop(signum)

    @contextlib.contextmanager
    def finishing(self):
        """Inside, a signal waits for the end and is then dropped, with a warning: the work it would have stopped
        is done."""
        with self._holding_signals():
            yield
        if self.pending is not None and not self._holding:
            logging.warning("%s came while the record set was being put in place; the set is complete",
                            signal.Signals(self.pending).name)
            self.pending = None
