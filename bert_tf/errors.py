"""The failures a command reports as one line (`bert_tf.cli.USER_ERRORS`), defined apart from the code that raises
them so that a command can catch them without importing that code: checkpoint loading and training import Keras,
which data_gen's main process never loads (`data_gen.keras_free`)."""


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model: missing variables, wrong shapes, unreadable files."""


class TrainingError(RuntimeError):
    """Training cannot go on (a non-finite loss); the message says where the last good state was saved."""


class Preempted(RuntimeError):
    """SIGTERM arrived; a checkpoint was saved and a restart resumes from it."""
