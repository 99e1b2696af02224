"""The fine-tuning loop every task family shares (paper sections 4 and 5.3, appendix A.3).

`grid_search` trains one model per cell of the paper's grid (batch size x learning rate x epochs x restart) with
`fit`, scores each on dev by the task's main metric and keeps the best. `fit` is pretraining's loop
(`bert_tf.training.train`): checkpoints with `tf.train.CheckpointManager` every `save_checkpoints_steps`, so a run
killed at any moment and rerun with the same command resumes each cell where it stopped and ends with the weights
of an uninterrupted run; finished cells are recorded in `grid.json` (and shown in `grid_results.tsv`) and not
trained again. `save` writes a self-contained model directory (`model.keras`, `task.json`, `vocab.txt`,
`bert_config.json`) that evaluation-only runs and export read. The families' own parts (features, heads, metrics,
what their runners write) live in their units in `bert_tf.tasks`.

Output directory of a training run:

  <output_dir>/grid.json              the grid, the settings that shape training, the finished cells (resume state)
  <output_dir>/grid_results.tsv       one row per finished cell: its values, steps, seconds, dev figures, the best
  <output_dir>/grid/<cell>/           the cell's checkpoints (kept for the best cell only once it is scored) and
                                      its TensorBoard scalars: train/ (loss, learning rate, examples/s), eval/ (dev)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import staging
from bert_tf.cpu_precision import warn_if_emulated
from bert_tf.tf_data import over_held_tensors
from bert_tf.training import DTYPES, write_lines
from bert_tf import fileio

MODEL_FILE = "model.keras"
GRID_FILE = "grid.json"
GRID_RESULTS = "grid_results.tsv"
CELLS_DIR = "grid"
# Settings that do not change what a cell trains to, so a rerun may change them without a refusal.
_FREE = frozenset({"do_train", "do_eval", "do_predict", "eval_batch_size", "predict_batch_size",
                   "save_checkpoints_steps", "iterations_per_loop", "n_best_size", "max_answer_length",
                   "null_score_diff_threshold"})


@dataclasses.dataclass(frozen=True)
class FinetuneOptions:
    """What `run_classifier` does; defaults are the original run_classifier.py's and the paper's.

    `train_batch_sizes`, `learning_rates` and `num_train_epochs` are the grid (each a tuple; a single value is
    taken as a grid of one): every combination, times `num_restarts` seeds, is trained and the best on dev kept.
    The paper's: (16, 32) x (5e-5, 4e-5, 3e-5, 2e-5) x (2, 3, 4). Batch sizes are global (all replicas together);
    with `gradient_accumulation_steps` = N each update sums N micro-batches of a batch / N. `dtype`: float32,
    mixed_bfloat16 or mixed_float16 (with dynamic loss scaling); the heads' logits and the losses stay float32.
    """

    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    max_seq_length: int = 128
    do_lower_case: bool = True
    train_batch_sizes: tuple[int, ...] = (32,)
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rates: tuple[float, ...] = (5e-5,)
    num_train_epochs: tuple[float, ...] = (3.0,)
    warmup_proportion: float = 0.1
    num_restarts: int = 1
    dropout_rate: float = 0.1
    random_seed: int = 12345
    init_checkpoint: str | None = None
    optimizer: str = "original_adamw"
    weight_decay: float = 0.01
    dtype: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000

    dev_flag = "do_eval"  # what scores the grid's cells (run_squad: do_predict, on a predict file with answers)

    def __post_init__(self):
        for name in ("train_batch_sizes", "learning_rates", "num_train_epochs"):
            value = getattr(self, name)
            object.__setattr__(self, name, tuple(value) if isinstance(value, (tuple, list)) else (value,))

    @property
    def policy(self) -> str:
        """The Keras dtype policy that `dtype` names."""
        return DTYPES[self.dtype]

    def check(self, replicas: int = 1, output_dir: str | None = None):
        """A ValueError naming the flag for settings that cannot run (`replicas`: the strategy's), or that
        `output_dir` holds a grid of other settings (checked before any work)."""
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("at least one of --do_train, --do_eval and --do_predict must be set")
        self.check_training(replicas, output_dir)

    def check_training(self, replicas: int, output_dir: str | None) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype={self.dtype!r}: expected one of {', '.join(DTYPES)}")
        warn_if_emulated(self.dtype, self.policy, self.jit_compile)
        for flag, values in (("train_batch_size", self.train_batch_sizes), ("learning_rate", self.learning_rates),
                             ("num_train_epochs", self.num_train_epochs)):
            if not values or any(not value > 0 for value in values):
                raise ValueError(f"--{flag}={','.join(map(str, values))}: every value must be above 0")
        for flag in ("num_restarts", "gradient_accumulation_steps", "save_checkpoints_steps", "iterations_per_loop",
                     "eval_batch_size", "predict_batch_size"):
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag}={getattr(self, flag)} must be at least 1")
        if not 0 <= self.dropout_rate < 1:
            raise ValueError(f"--dropout_rate={self.dropout_rate} must be at least 0 and below 1")
        if not 0 <= self.warmup_proportion <= 1:
            raise ValueError(f"--warmup_proportion={self.warmup_proportion} must be between 0 and 1 (the share of "
                             "the training steps spent warming up)")
        if not self.weight_decay >= 0:
            raise ValueError(f"--weight_decay={self.weight_decay} must be 0 or more")
        per_update = replicas * self.gradient_accumulation_steps
        for batch in self.train_batch_sizes:
            if batch % per_update:
                raise ValueError(f"--train_batch_size={batch} must be a multiple of replicas x "
                                 f"--gradient_accumulation_steps = {replicas} x {self.gradient_accumulation_steps}")
        if self.do_train and len(grid(self)) > 1 and not getattr(self, self.dev_flag):
            raise ValueError(f"choosing among several --train_batch_size, --learning_rate or --num_train_epochs "
                             f"values or --num_restarts needs --{self.dev_flag} (the dev set decides)")
        if self.do_train and output_dir is not None:
            _read_state(output_dir, _grid_settings(self))
        if self.do_train and not self.init_checkpoint:
            logging.warning("no --init_checkpoint: fine-tuning starts from random weights")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One training run of the grid."""

    train_batch_size: int
    learning_rate: float
    num_train_epochs: float
    seed: int

    @property
    def name(self) -> str:
        return (f"batch{self.train_batch_size}_lr{self.learning_rate:g}_epochs{self.num_train_epochs:g}_"
                f"seed{self.seed}")


def grid(options: FinetuneOptions) -> list[Cell]:
    """The cells in the order they are trained: batch size, then learning rate, epochs, restart."""
    return [Cell(batch, rate, epochs, options.random_seed + restart) for batch in options.train_batch_sizes
            for rate in options.learning_rates for epochs in options.num_train_epochs
            for restart in range(options.num_restarts)]


@dataclasses.dataclass
class GridResult:
    """What `grid_search` returns: the best cell's model, that cell, its steps, and one row per cell."""

    model: object
    cell: Cell
    step: int
    rows: list

    def figures(self) -> dict:
        """What a runner returns about the grid: its rows and the best cell's name."""
        return {"grid": self.rows, "best": self.cell.name}


# -------------------------------------------------------------------------------------------- the shared loop
def task_losses(labels: dict) -> dict:
    """The loss of each output for its labels: squared error for float labels (regression), else cross-entropy
    of the logits. Each is the mean over what its sample weights count, across the whole batch however it is split
    over replicas (`losses.GlobalMean`): for tagging, the labelled word pieces, not every position of the padded
    batch, which would shrink the loss with the padding; without weights, the mean over the batch, as the original
    run_classifier and run_squad."""
    from bert_tf.losses import GlobalMean

    return {name: GlobalMean("squared_error" if tf.as_dtype(array.dtype).is_floating else "cross_entropy")
            for name, array in labels.items()}


def example_order(count: int, seed: int):
    """The example indexes in training order, without end: each epoch a permutation of `range(count)` drawn from
    (`seed`, the epoch's number). Computed rather than kept, so a checkpoint of the input position holds two
    counters (the epoch, the place in it); a shuffle buffer of the whole set would be saved whole every time."""
    if count < 1:  # every epoch would be empty, and the first batch would never come
        raise ValueError("no training examples")

    def epoch(number):
        return tf.data.Dataset.from_tensor_slices(tf.random.experimental.stateless_shuffle(
            tf.range(count, dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), number]), alg="philox"))

    return tf.data.Dataset.range(tf.int64.max).flat_map(epoch)


def as_tensors(arrays: dict) -> dict:
    """`arrays`' values as tensors, moved one at a time: each leaves `arrays` (emptied) as its tensor is made, so
    that a dict no one else holds is never in memory twice. `fit` takes tensors as they are and copies arrays for
    each grid cell, so a family hands it its training data through this."""
    return {key: _tensor(arrays.pop(key)) for key in list(arrays)}


def _tensor(value):
    """`value` as a tensor: a tensor as it is, an array copied into host memory, where the input reads it. A tensor
    converted from a NumPy array holds about twice the array's memory for as long as it lives (TensorFlow 2.21), a
    copy of it made by `tf.identity` once."""
    if tf.is_tensor(value):
        return value
    with tf.device("CPU:0"):
        return tf.identity(tf.convert_to_tensor(value))


def fit(build, inputs, labels, options, cell: Cell, strategy, directory: str, *, loss_weights=None,
        sample_weights=None, progress=None, examples: int | None = None):
    """One cell's training: `build()` a fresh model under the strategy, compile it with the paper's optimizer
    (warmup over `warmup_proportion` of the steps), and train it with `bert_tf.training.train` in `directory`:
    from `options.init_checkpoint`, or resumed from the checkpoint there. Examples are shuffled in full with the
    cell's seed, each epoch in a new order, where the original's `repeat().shuffle(100)` mixes them within a
    100-example window of the file's order. Returns (model, steps trained). The steps are counted from `examples`
    (default: the rows of `labels`), as the original counts them: run_squad's from its questions, not from their
    windows. `progress(model, step, scalars)`, if given, is called after every `iterations_per_loop` steps."""
    import keras

    from bert_tf import training
    from bert_tf.optimization import create_optimizer

    count = len(next(iter(labels.values())))
    steps = steps_for(count if examples is None else examples, cell.train_batch_size, cell.num_train_epochs)
    keras.utils.set_random_seed(cell.seed)
    with strategy.scope():
        model = build()
        model.gradient_accumulation_steps = options.gradient_accumulation_steps
        model.compile(optimizer=create_optimizer(cell.learning_rate, steps, int(steps * options.warmup_proportion),
                                                 optimizer=options.optimizer, weight_decay=options.weight_decay,
                                                 loss_scale=options.policy == "mixed_float16"),
                      loss=task_losses(labels), loss_weights=loss_weights, auto_scale_loss=False)
    parts = tuple(tf.nest.map_structure(_tensor, part) for part in
                  ((inputs, labels) if sample_weights is None else (inputs, labels, sample_weights)))

    def dataset_fn(context):
        order = example_order(count, cell.seed)
        if context.num_input_pipelines > 1:
            order = order.shard(context.num_input_pipelines, context.input_pipeline_id)
        order = order.batch(context.get_per_replica_batch_size(cell.train_batch_size), drop_remainder=True)
        batches = order.map(lambda at: tf.nest.map_structure(lambda part: tf.gather(part, at), parts))
        return over_held_tensors(batches)

    report = None if progress is None else (lambda step, scalars: progress(model, step, scalars))
    logs = training.train(model, strategy, dataset_fn, directory, num_train_steps=steps,
                          global_batch_size=cell.train_batch_size, steps_per_loop=options.iterations_per_loop,
                          save_checkpoints_steps=options.save_checkpoints_steps, max_checkpoints_to_keep=1,
                          init_checkpoint=options.init_checkpoint, jit_compile=options.jit_compile, progress=report)
    return model, logs["step"]


def grid_search(options, output_dir: str, train, score, main_metric: str, build, data: dict) -> GridResult:
    """Trains every cell of `grid(options)` with `train(cell, directory)` -> (model, steps), scores it with
    `score(model)` (a dict of dev figures, empty without dev data) and keeps the best by `main_metric` (the first
    of equals). Resumes from `output_dir`'s grid.json: finished cells are not trained again, and a grid.json of
    other settings, or of other `data` (`training_data`: the task and its training data), is refused. Only the best
    cell keeps its checkpoint; when it finished in an earlier run its model is rebuilt with `build()` and restored
    from it."""
    cells = grid(options)
    settings = dict(_grid_settings(options), data=data)
    state = _read_state(output_dir, settings)
    rows = {row["cell"]: row for row in state["finished"]}
    best = state.get("best")
    model = None
    _drop_losers(output_dir, rows, best)
    for cell in cells:
        if cell.name in rows:
            logging.info("grid cell %s finished in an earlier run: %s", cell.name, _figures(rows[cell.name]))
            continue
        directory = os.path.join(output_dir, CELLS_DIR, cell.name)
        started = time.time()
        trained, step = train(cell, directory)
        scores = {key: float(value) for key, value in score(trained).items()}
        _write_scalars(os.path.join(directory, "eval"), step, scores)
        rows[cell.name] = dict(cell=cell.name, **dataclasses.asdict(cell), steps=step,
                               seconds=round(time.time() - started, 1), **scores)
        logging.info("grid cell %s: %s", cell.name, _figures(rows[cell.name]))
        if best is None or scores.get(main_metric, 0) > rows[best].get(main_metric, 0):
            best, model = cell.name, trained
        _write_state(output_dir, settings, [rows[c.name] for c in cells if c.name in rows], best, main_metric)
        _drop_losers(output_dir, rows, best)
    winner = next(c for c in cells if c.name == best)
    if model is None:  # the best cell finished in an earlier run
        model = _restore(build, os.path.join(output_dir, CELLS_DIR, best))
    if len(cells) > 1:
        logging.info("best of %d grid cells: %s (%s)", len(cells), best, _figures(rows[best]))
    return GridResult(model, winner, rows[best]["steps"], [rows[c.name] for c in cells])


def _grid_settings(options) -> dict:
    """The options that decide what the cells train to (a rerun must give the same)."""
    return {key: value for key, value in dataclasses.asdict(options).items() if key not in _FREE}


def _read_state(output_dir: str, settings: dict) -> dict:
    path = os.path.join(output_dir, GRID_FILE)
    if not fileio.exists(path):
        return {"finished": []}
    try:
        with fileio.open(path) as f:
            state = json.load(f)
        saved = state["settings"]
        state["finished"], state.get("best")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a grid state written by fine-tuning ({e}); fine-tune into a new "
                         "--output_dir") from None
    current = json.loads(json.dumps(settings))  # tuples as lists, as they were saved
    data = current.pop("data", None)  # None: the settings alone, checked before any data is read
    if data is not None and saved.get("data", data) != data:  # grids saved before it was recorded: not checked
        was = saved["data"]
        what = (f"task {was.get('task')} there, {data['task']} here" if was.get("task") != data["task"] else
                "the same task, but other training examples")
        raise ValueError(f"--output_dir={output_dir} holds a fine-tuning grid trained on other data ({what}): fine-tune"
                         " into a new --output_dir, or rerun on the data it was trained on to resume it")
    saved = {key: value for key, value in saved.items() if key != "data"}
    differ = [f"--{_flag(key)}={_shown(saved.get(key))} there, {_shown(current.get(key))} here"
              for key in sorted(set(saved) | set(current)) if saved.get(key) != current.get(key)]
    if differ:
        raise ValueError(f"--output_dir={output_dir} holds a fine-tuning grid of other settings ({'; '.join(differ)}):"
                         " rerun with the same flags to resume it, or fine-tune into a new --output_dir")
    return state


def training_data(task: str, *parts) -> dict:
    """What a grid trains on, for its grid.json: the task's name and a SHA-256 of the training tensors (`parts`:
    dicts of them, after packing, so another vocabulary, sequence length or file shows too)."""
    digest = hashlib.sha256()
    for part in parts:
        for key in sorted(part):
            value = np.asarray(part[key])
            digest.update(f"{key}:{value.dtype}:{value.shape};".encode())
            digest.update(np.ascontiguousarray(value).data)
    return {"task": task, "sha256": digest.hexdigest()}


def _flag(key: str) -> str:
    return {"train_batch_sizes": "train_batch_size", "learning_rates": "learning_rate"}.get(key, key)


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _write_state(output_dir: str, settings: dict, rows: list, best: str, main_metric: str) -> None:
    staging.write_json(os.path.join(output_dir, GRID_FILE), {"settings": settings, "finished": rows, "best": best,
                                                             "main_metric": main_metric})
    columns = ["cell", *(field.name for field in dataclasses.fields(Cell)), "steps", "seconds"]
    metrics = sorted({key for row in rows for key in row} - set(columns))
    lines = ["\t".join(columns + [f"dev_{name}" for name in metrics] + ["best"])]
    for row in rows:
        values = [row[name] for name in columns] + [row.get(name, "") for name in metrics]
        lines.append("\t".join(map(str, values + ["*" if row["cell"] == best else ""])))
    write_lines(os.path.join(output_dir, GRID_RESULTS), lines)


def _drop_losers(output_dir: str, rows: dict, best: str | None) -> None:
    """Deletes the checkpoints of finished cells other than the best (their TensorBoard files stay)."""
    for name in rows:
        if name == best:
            continue
        directory = os.path.join(output_dir, CELLS_DIR, name)
        if fileio.isdir(directory):
            for entry in fileio.listdir(directory):
                if entry == "checkpoint" or entry.startswith("ckpt-"):
                    fileio.remove(os.path.join(directory, entry))


def _restore(build, directory: str):
    """A fresh model from `build()` with the weights of the checkpoint in `directory`."""
    latest = tf.train.latest_checkpoint(directory)
    if latest is None:
        raise ValueError(f"{directory}: the best grid cell's checkpoint is missing; fine-tune into a new "
                         "--output_dir")
    model = build()
    tf.train.Checkpoint(model=model).restore(latest).expect_partial().assert_existing_objects_matched()
    return model


def _write_scalars(directory: str, step: int, scores: dict) -> None:
    from bert_tf.training import write_scalar

    if not scores:
        return
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=step):
        for name, value in scores.items():
            write_scalar(f"dev_{name}", value)
    writer.close()


def _figures(row: dict) -> str:
    return ", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                     for key, value in row.items() if key != "cell")


# ---------------------------------------------------------------------------------------------- whole run
def read_split(task, split: str, data_dir: str | None, tfds_name: str | None):
    """The examples of `split`: from TFDS with `tfds_name`, else from the task's files in `data_dir`."""
    from bert_tf.tasks.base import DataError

    if tfds_name:
        if not hasattr(task, "tfds_examples"):
            raise DataError(f"--tfds_name={tfds_name}: {task.name} is read from its own files only; give "
                            "--data_dir with them instead")
        return task.tfds_examples(tfds_name, split, data_dir)
    if not data_dir:
        raise DataError("give --data_dir (the task's files) or --tfds_name")
    return task.examples(data_dir, split)


def predict(model, features, batch_size: int):
    """`model.predict(features)` (a dict of arrays) in batches of `batch_size` (a tf.data input without autotuning
    or static rewrites, `bert_tf.tf_data`, where Keras's own input from arrays is autotuned), the last one padded
    to full size with copies of the final example, whose outputs are dropped. Keras traces its predict function for
    each batch shape it meets, so a short last batch would trace the whole model a second time, for every model of
    a grid; an input smaller than one batch is one batch of its own size."""
    count = len(keras.tree.flatten(features)[0])
    batch_size = max(1, min(batch_size, count))
    short = -count % batch_size
    if short:
        features = keras.tree.map_structure(
            lambda x: np.concatenate([x, np.repeat(np.asarray(x)[-1:], short, axis=0)]), features)
    batches = over_held_tensors(tf.data.Dataset.from_tensor_slices(features).batch(batch_size))
    outputs = model.predict(batches, verbose=0)
    return keras.tree.map_structure(lambda x: x[:count], outputs)


def save(result: GridResult, task, config, vocab_file: str, output_dir: str, options, **fields):
    """The grid's best model as a directory export and serving read: model, task.json (the task, its labels, the
    cell's settings and `fields`, the family's own TaskInfo fields), vocab, config."""
    from bert_tf.tasks import task_info

    with staging.staged_file(os.path.join(output_dir, MODEL_FILE), suffix=".keras") as tmp:
        result.model.save(tmp)  # Keras saves only to a name ending in .keras
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    staging.copy_file(vocab_file, os.path.join(output_dir, "vocab.txt"))
    cell = result.cell
    task_info.write(output_dir, task_info.TaskInfo(
        task=task.name, kind=task.kind, labels=tuple(task.labels), max_seq_length=options.max_seq_length,
        do_lower_case=options.do_lower_case, learning_rate=cell.learning_rate, seed=cell.seed,
        num_train_epochs=cell.num_train_epochs, train_batch_size=cell.train_batch_size, global_step=result.step,
        **fields))


def load_finetuned(directory: str):
    """The model saved by `run_classifier` in `directory`."""
    import bert_tf.models  # noqa: F401  (registers the classes)

    return keras.saving.load_model(os.path.join(directory, MODEL_FILE))


def steps_for(num_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for `epochs` passes over the data (the original's int(n / batch * epochs), at least 1)."""
    return max(1, math.floor(num_examples / batch_size * epochs))


def global_step(result: GridResult | None, output_dir: str) -> dict:
    """{"global_step": steps} for eval_results.txt: those the best cell trained (`result` of this run's grid);
    for evaluation alone those of the fine-tuned model in `output_dir` (from its task.json), or 0 for a fresh head
    on `init_checkpoint`. Empty when a saved model does not record them (saved by an earlier version)."""
    if result is not None:
        return {"global_step": result.step}
    if not fileio.exists(os.path.join(output_dir, MODEL_FILE)):
        return {"global_step": 0}
    from bert_tf.tasks import task_info

    info = task_info.read(output_dir)
    step = info.global_step if info is not None else None
    return {} if step is None else {"global_step": step}


def existing_model(output_dir, build, options, config=None, vocab_file=None):
    """For evaluation or prediction alone: the model fine-tuned in `output_dir`, else `build()` initialised from
    `options.init_checkpoint`; with neither, or with a grid there that has not finished, a ValueError (the figures
    of untrained weights, or of a fresh head, would be written as if they were the fine-tuned model's, as after a
    typo in --output_dir; the original's Estimator only logs that it evaluates an initialisation, and writes its
    figures).

    A fine-tuned model is evaluated as it was trained, so what the flags give must fit it (`check_fits_model`:
    `config` is --bert_config_file's, `vocab_file` --vocab_file)."""
    from bert_tf.checkpoints import restore_weights

    if fileio.exists(os.path.join(output_dir, MODEL_FILE)):
        model = load_finetuned(output_dir)
        check_fits_model(output_dir, model, options, config, vocab_file)
        return model
    if fileio.exists(os.path.join(output_dir, GRID_FILE)):
        raise ValueError(f"--output_dir={output_dir} holds a fine-tuning grid that has not finished ({GRID_FILE}, no "
                         f"{MODEL_FILE} yet): rerun the training command to finish it (finished cells are not "
                         "trained again), then evaluate; --init_checkpoint would score a fresh head instead")
    if not options.init_checkpoint:
        raise ValueError(f"--output_dir={output_dir} holds no fine-tuned model ({MODEL_FILE}) to evaluate or predict "
                         "with, and no --init_checkpoint is given; add --do_train, or give the --output_dir of a "
                         "fine-tuning run")
    model = build()
    restore_weights(model, options.init_checkpoint)
    return model


def check_fits_model(output_dir, model, options, config=None, vocab_file=None) -> None:
    """A ValueError where a flag of evaluation or prediction alone contradicts the fine-tuned model in `output_dir`,
    which would otherwise be read as saved while the flag seemed to apply: another `--bert_config_file` (but for
    dropout and initializer range), a `--vocab_file` other than the model's vocab.txt, another `--do_lower_case`
    than task.json's, a `--dtype` other than the saved model's (the families check their own settings). A given
    `--init_checkpoint` is not read (as the original's Estimator, which restores the output directory's
    checkpoint): a warning says so."""
    from bert_tf.records import file_sha256
    from bert_tf.tasks import task_info

    if config is not None:
        given, ours = config.to_dict(), getattr(model, "encoder", model).bert_config.to_dict()
        free = {"hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"}
        differ = sorted(key for key, value in given.items() if key not in free and ours.get(key) != value)
        if differ:
            theirs = ", ".join(str(ours.get(k)) for k in differ)
            raise ValueError(f"--bert_config_file: {', '.join(f'{k}={given[k]}' for k in differ)}, but the model "
                             f"fine-tuned in --output_dir={output_dir} has {theirs}; give its bert_config.json")
    saved_vocab = os.path.join(output_dir, "vocab.txt")
    if vocab_file is not None and fileio.exists(saved_vocab) and file_sha256(vocab_file) != file_sha256(saved_vocab):
        raise ValueError(f"--vocab_file={vocab_file} is not the vocabulary the model in --output_dir={output_dir} was "
                         f"fine-tuned with; give {saved_vocab}")
    policy = getattr(model, "encoder", model).dtype_policy.name  # the policy the encoder was saved with
    if options.dtype != FinetuneOptions.dtype and DTYPES[options.dtype] != policy:
        raise ValueError(f"--dtype={options.dtype}: the model in --output_dir={output_dir} runs as it was saved "
                         f"({policy}); leave the flag out")
    info = task_info.read(output_dir)
    if info is not None and info.do_lower_case != options.do_lower_case:
        raise ValueError(f"--do_lower_case={options.do_lower_case}: the model in --output_dir={output_dir} was "
                         f"fine-tuned with {info.do_lower_case} (task.json); give that")
    if options.init_checkpoint:
        logging.warning("--init_checkpoint=%s is not read: --output_dir=%s holds a fine-tuned model, which is the one "
                        "evaluated", options.init_checkpoint, output_dir)


def refuse_other_than_saved(output_dir: str, flag: str, given, saved) -> None:
    """A ValueError where `--flag=given`, set for evaluation or prediction alone, is not what the model in
    `output_dir` was fine-tuned with (`saved`, from its task.json; None: not recorded, not checked)."""
    if saved is not None and given != saved:
        raise ValueError(f"--{flag}={given}: the model in --output_dir={output_dir} was fine-tuned with {saved} "
                         "(task.json), which evaluation and prediction alone use; leave the flag out")


def write_json(path, data):
    write_lines(path, [json.dumps(data, indent=2, ensure_ascii=False)])
