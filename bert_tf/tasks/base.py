"""What the registry knows of every fine-tuning task and task family; the families fill in the rest."""

from __future__ import annotations

import dataclasses

from bert_tf import fileio


class DataError(ValueError):
    """Task data that cannot be used: missing or malformed files, unknown labels, empty splits."""


class TextLines:
    """A UTF-8 text file read a line at a time: iterating gives its lines, each ending in "\\n" but perhaps the
    last (as a text file does, for `csv` too); `read()` gives the whole text (for `json.load`).

    Bytes that are not UTF-8 are one `DataError` naming the file, line and byte rather than a decoding error that
    names neither. A byte-order mark that editors on Windows put at the start is dropped: it is not text, and left
    in it would glue itself to the first field (a `-DOCSTART-` line would become a sentence). So is every carriage
    return, as TensorFlow's text reading (`tf.io.gfile.GFile`, which the original's readers use) drops them: CRLF
    line ends become LF, and a stray one inside a line joins its two sides instead of cutting the line (which would
    shorten a field, or shift every later line's index). Read by lines, not whole, so that reading a large task
    file holds a block of it at a time (BENCHMARKS.md, "Reading a task's files"). UTF-8 never puts the byte of "\\n"
    inside a character, so cutting the bytes at it and decoding each line is decoding the file."""

    def __init__(self, path: str):
        self.path = path
        self._file = fileio.open(path, "rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def __iter__(self):
        for number, raw in enumerate(self._byte_lines(), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{self.path}:{number}: byte 0x{raw[e.start]:02x} (column {e.start + 1}) is not "
                                "UTF-8; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
            line = (line.removeprefix("\ufeff") if number == 1 else line).replace("\r", "")
            if line:  # a last line of carriage returns (or a file of a BOM) is no line, as the text before had none
                yield line

    def _byte_lines(self, block: int = 1 << 20):
        """The file's bytes cut after each newline, read in blocks: iterating a `tf.io.gfile.GFile` by lines would
        drop its carriage returns first and shift the columns that errors name."""
        pending = []
        while chunk := self._file.read(block):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                pending.append(chunk[start:end + 1])
                yield b"".join(pending)
                pending, start = [], end + 1
            if start < len(chunk):
                pending.append(chunk[start:])
        if pending:
            yield b"".join(pending)

    def read(self) -> str:
        return "".join(self)


def malformed_test_row(path: str, number: int, found: int, needed: int) -> str:
    """The message refusing a test file's row with too few columns: test predictions are written one line per row
    (the original's test_results.tsv), so skipping it, as training and dev rows are, would shift every later line."""
    return (f"{path}:{number}: {found} column(s) where the test rows need {needed}; fix or remove the row (its "
            f"predictions are one line per row, so skipping it would put every later prediction on the wrong row)")


def open_text(path: str) -> TextLines:
    """A UTF-8 text file's lines (`TextLines`), for `with open_text(path) as f:`."""
    return TextLines(path)


def tfds_rows(dataset, batch_size: int = 4096):
    """The rows of a TFDS split (a `tf.data.Dataset` of dicts) in order, each a dict as `tfds.as_numpy` gives it
    but with a variable-length feature as a list: NumPy values read a batch at a time (a ragged batch where
    lengths vary), since tf.data's iteration from Python costs as much per row as per batch."""
    import tensorflow as tf

    for batch in dataset.ragged_batch(batch_size):
        columns = [t.to_list() if isinstance(t, tf.RaggedTensor) else t.numpy() for t in tf.nest.flatten(batch)]
        for i in range(len(columns[0])):
            yield tf.nest.pack_sequence_as(batch, [column[i] for column in columns])


@dataclasses.dataclass(frozen=True)
class Example:
    """One labelled text (pair): `label` is a label name, a float for regression, or None (unlabelled test data).
    Multiple-choice examples list their candidate second segments in `choices` (each read after `text_a`)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None
    choices: tuple[str, ...] = ()


class Family:
    """A task family: what fine-tuning, evaluation and export need to know about one kind of task, in one unit.

    Each family is a subclass in its own module (`classification`, `multiple_choice`, `span_qa`, `tagging`) with
    its features, head model, metrics and postprocessing, runner and serving module; the registry in
    `bert_tf.tasks` lists the families and is the only place that maps a kind or an export kind to one.

    `kinds`: the kinds it writes in task.json (the first is the default); `export_kind`: its `export_saved_model
    --kind`; `program`: the CLI that trains it; `export_flags`: the export CLI's flags it reads besides the
    model directory and sequence length.
    """

    kinds: tuple[str, ...] = ()
    export_kind: str = ""
    program: str = ""
    export_flags: frozenset[str] = frozenset()

    def kind(self, task: "Task") -> str:
        """The kind task.json records for `task`."""
        return self.kinds[0]

    def num_outputs(self, task: "Task") -> int:
        return len(task.labels)

    def build_model(self, task: "Task", config, dropout_rate: float, dtype=None):
        """A fresh head model for `task` on a `BertEncoder(config)` computing in `dtype` (a Keras dtype policy
        name; default: the global policy), `dropout_rate` on the head's input."""
        raise NotImplementedError

    def serving_module(self, model, info, preprocessor, *, doc_stride: int | None, scratch: str):
        """The SavedModel module that serves `model` (fine-tuned as `info`, a TaskInfo) on raw strings, with
        `preprocessor` (a `bert_tf.serving.Preprocessor`) packing its inputs; `scratch`: a directory for files
        that become assets."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Task:
    """A fine-tuning task as the registry knows it.

    `family` is the Family that trains, evaluates and exports it (set by `bert_tf.tasks.register`); `labels` are
    the class names in output order; `metric_names` the official metrics, `main_metric` the one that chooses
    between hyper-parameters; `regression` marks a task with one real-valued output (STS-B).
    """

    name: str
    labels: tuple[str, ...] = ()
    metric_names: tuple[str, ...] = ("accuracy",)
    main_metric: str = "accuracy"
    splits: tuple[str, ...] = ("train", "dev", "test")
    regression: bool = False
    family: Family | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return self.family.kind(self)

    @property
    def num_outputs(self) -> int:
        return self.family.num_outputs(self)
