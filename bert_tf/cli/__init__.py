"""absl entry points. Thin shells: parse flags, call library functions, turn library errors into one-line messages."""

import sys

from bert_tf.checkpoints import CheckpointError
from bert_tf.config import ConfigError

USER_ERRORS = (CheckpointError, ConfigError, FileNotFoundError)


def fail(program: str, error: Exception) -> None:
    """Exit with status 1 and one line on stderr: the program, then what is wrong and what to do."""
    print(f"{program}: error: {error}", file=sys.stderr)
    sys.exit(1)
