"""TensorFlow's C++ log, quiet by default: what `import bert_tf` (before TensorFlow) does about it.

TensorFlow's C++ side writes lines to stderr that say nothing about the user's run: while its libraries load, "All log
messages before absl::InitializeLog() is called are written to STDERR", the oneDNN notice, "Could not find cuda
drivers" (the CUDA stub), the CPU-feature notice; later `failed call to cuInit` on machines without a GPU and "oneDNN
supports DT_INT64 only on platforms with AVX-512". `TF_CPP_MIN_LOG_LEVEL` (0 all, 1 no INFO, 2 no WARNING, 3 no
ERROR) hides the later ones, but TensorFlow applies it only after its libraries have loaded, so the start-up lines
come regardless. `quiet_import` therefore sets the variable and imports TensorFlow with its stderr passed through
`filter_stream` in a child process, which drops the start-up lines below the level and passes everything else on as
it comes (a fatal error while TensorFlow loads, such as a CPU without the instructions it needs, still shows).

The level: `TF_CPP_MIN_LOG_LEVEL` when the user set it; else absl's `--verbosity` (`-v`) when the command line gives
it (0 or more, INFO: every line; -1: warnings and errors; -2: errors); else 3.
"""

import contextlib
import io
import logging
import os
import re
import subprocess
import sys

VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET = 3
SEVERITIES = "IWEF"  # TensorFlow's levels 0-3 as its log lines start: I0000 00:00:1795.2 123 port.cc:153] ...
RECORD = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]*\] ")
ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_VERBOSITY = re.compile(r"--?(?:verbosity|v)(?:=(.*))?")


def level_from_verbosity(argv) -> int | None:
    """TensorFlow's log level for absl's `--verbosity`/`-v` in `argv` (absl's own spellings: `--verbosity=N`,
    `--verbosity N`, `-v=N`, `-v N`), None when it is not there or not an integer (absl then reports it)."""
    for i, argument in enumerate(argv[1:], 1):
        if argument == "--":
            break
        match = _VERBOSITY.fullmatch(argument)
        if match:
            value = match.group(1) if match.group(1) is not None else (argv[i + 1] if i + 1 < len(argv) else "")
            try:
                verbosity = int(value)
            except ValueError:
                return None
            return 0 if verbosity >= 0 else min(-verbosity, QUIET)
    return None


def choose_level(environ=None, argv=None) -> int:
    """Sets `TF_CPP_MIN_LOG_LEVEL` in `environ` (default os.environ, so child processes get it too) unless it is set,
    from absl's verbosity in `argv` (default sys.argv) or else to 3; returns the level in force (0 for a value
    TensorFlow would not read as one)."""
    environ = os.environ if environ is None else environ
    if VARIABLE not in environ:
        verbosity = level_from_verbosity(sys.argv if argv is None else argv)
        environ[VARIABLE] = str(QUIET if verbosity is None else verbosity)
    try:
        return min(max(int(environ[VARIABLE]), 0), QUIET)
    except ValueError:
        return 0


def keep_lines(lines, level: int):
    """The `lines` (bytes, each with its newline) to show at `level`: a C++ log record below it is dropped with the
    lines that continue it, and so is absl's notice that logging is not initialized yet; every other line stays."""
    keep = True
    for line in lines:
        text = line.decode("utf-8", "replace")
        if RECORD.match(text):
            keep = SEVERITIES.index(text[0]) >= level
        elif text.rstrip("\r\n") == ABSL_NOTICE:
            keep = True
            continue
        if keep:
            yield line


def filter_stream(level: int) -> None:
    """Copies stdin to stdout line by line through `keep_lines` (the child `quiet_import` starts: it imports nothing
    from bert_tf, so it needs no TensorFlow)."""
    for line in keep_lines(iter(sys.stdin.buffer.readline, b""), level):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


class _Forward(io.TextIOBase):
    """A text stream that writes to `target`, which can change: `sys.stderr` while TensorFlow loads, so that what a
    handler made then keeps writes to the real stderr afterwards."""

    def __init__(self, target):
        super().__init__()
        self.target = target

    def write(self, text):
        return self.target.write(text)

    def flush(self):
        self.target.flush()

    def fileno(self):
        return self.target.fileno()

    def isatty(self):
        return self.target.isatty()

    @property
    def encoding(self):
        return self.target.encoding


@contextlib.contextmanager
def python_logger_at(level: str):
    """Within the block, TensorFlow's Python logger (`tf.get_logger()`) passes only `level` and above: for calls
    whose routine notices would bury the one line that matters (a deprecation while counting records, the TPU
    set-up's progress before it fails)."""
    logger = logging.getLogger("tensorflow")
    saved = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(saved)


@contextlib.contextmanager
def _stderr_through_filter(level: int):
    """Within the block, what C++ writes to file descriptor 2 goes through `filter_stream` in a child process, which
    ends when the block does (or with this process: it reads to the end of its input); Python's `sys.stderr` goes
    to the terminal directly."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    try:
        child = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(level)],
                                 stdin=subprocess.PIPE, stdout=saved, stderr=saved)
    except OSError:
        os.close(saved)
        yield
        return
    python_stderr = sys.stderr
    direct = open(saved, "w", buffering=1, closefd=False, encoding=getattr(python_stderr, "encoding", None),
                  errors="backslashreplace")
    sys.stderr = stand_in = _Forward(direct)
    os.dup2(child.stdin.fileno(), 2)
    try:
        yield
    finally:
        stand_in.flush()
        os.dup2(saved, 2)
        stand_in.target = python_stderr  # log handlers made in the block (absl's, TensorFlow's) hold the stand-in
        sys.stderr = python_stderr
        direct.close()
        os.close(saved)
        child.stdin.close()
        child.wait()


def quiet_import() -> None:
    """Imports TensorFlow with its start-up lines below the level of `choose_level` left out; does nothing when
    TensorFlow is already imported (its lines are written, and it has read the variable)."""
    if "tensorflow" in sys.modules:
        return
    level = choose_level()
    if level == 0:
        return
    with _stderr_through_filter(level):
        import tensorflow  # noqa: F401


class _SaverTimings:
    """A `logging` filter: drops the timing line TensorFlow's checkpoint saver logs at INFO on every save
    ("Sharding callback duration: 82 microseconds"), which says nothing about the run."""

    @staticmethod
    def filter(record) -> bool:
        return not record.getMessage().startswith("Sharding callback duration")


def hide_saver_timings() -> None:
    """Installs `_SaverTimings` on absl's logger (which the saver logs through) unless the level shows every line
    (0)."""
    import logging

    if choose_level() > 0:
        logger = logging.getLogger("absl")
        if not any(isinstance(f, _SaverTimings) for f in logger.filters):
            logger.addFilter(_SaverTimings())


if __name__ == "__main__":
    filter_stream(int(sys.argv[1]))
