"""The fine-tuning loop every task family shares (paper sections 4 and 5.3).

Every task goes through the same `fit` (fresh head, weights from `init_checkpoint`, the paper's optimizer) and
`grid_search` (each learning rate of a small grid and each restart, the best on dev by the task's main metric), and
`save` writes a self-contained model directory (`model.keras`, `task.json`, `vocab.txt`, `bert_config.json`) that
evaluation-only runs and export read. The families' own parts (features, heads, metrics, what their runners
write) live in their units in `bert_tf.tasks`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import tensorflow as tf
from absl import logging

from bert_tf import staging
from bert_tf.training import write_lines

MODEL_FILE = "model.keras"


@dataclasses.dataclass(frozen=True)
class FinetuneOptions:
    """What `run_classifier` does; defaults are the original run_classifier.py's and the paper's.

    `learning_rates` with several values, or `num_restarts` > 1, trains one model per (rate, restart) and keeps the
    best on dev (the paper's grid over 5e-5, 4e-5, 3e-5, 2e-5 and its restarts for small datasets).
    """

    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    max_seq_length: int = 128
    do_lower_case: bool = True
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rates: tuple[float, ...] = (5e-5,)
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    num_restarts: int = 1
    dropout_rate: float = 0.1
    random_seed: int = 12345
    init_checkpoint: str | None = None
    optimizer: str = "original_adamw"
    weight_decay: float = 0.01

    def check(self):
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("at least one of --do_train, --do_eval and --do_predict must be set")
        if len(self.learning_rates) * self.num_restarts > 1 and not self.do_eval:
            raise ValueError("choosing among several --learning_rate values or --num_restarts needs --do_eval "
                             "(the dev set decides)")
        if self.do_train and not self.init_checkpoint:
            logging.warning("no --init_checkpoint: fine-tuning starts from random weights")


# -------------------------------------------------------------------------------------------- the shared loop
def task_losses(labels: dict) -> dict:
    """The loss of each output for its labels: squared error for float labels (regression), else cross-entropy
    of the logits. Each is the mean over what its sample weights count (`mean_with_sample_weight`): for tagging,
    the labelled word pieces, not every position of the padded batch, which would shrink the loss with the
    padding; without weights, the mean over the batch, as the original run_classifier and run_squad."""
    import keras

    reduction = "mean_with_sample_weight"
    return {name: keras.losses.MeanSquaredError(reduction=reduction) if array.dtype.kind == "f" else
            keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
            for name, array in labels.items()}


def fit(build, inputs, labels, options, learning_rate, seed, strategy, loss_weights=None, sample_weights=None,
        callbacks=None):
    """One fine-tuning run: `build()` a fresh model under the strategy, load `options.init_checkpoint` into it,
    train it with the paper's optimizer (warmup over `warmup_proportion` of the steps); returns the model.
    `callbacks`: Keras callbacks for `model.fit` (e.g. to follow the training)."""
    import keras

    from bert_tf.checkpoints import restore_weights
    from bert_tf.optimization import create_optimizer

    count = len(next(iter(labels.values())))
    steps = steps_for(count, options.train_batch_size, options.num_train_epochs)
    keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = build()
        if options.init_checkpoint:
            restore_weights(model, options.init_checkpoint)
        model.compile(optimizer=create_optimizer(learning_rate, steps, int(steps * options.warmup_proportion),
                                                 optimizer=options.optimizer, weight_decay=options.weight_decay),
                      loss=task_losses(labels), loss_weights=loss_weights)
        # Slots now, not inside the first step: a tf.function that creates variables is traced twice, and a
        # second trace of BERT's train step is seconds of CPU spent for nothing.
        model.optimizer.build(model.trainable_variables)
    parts = (inputs, labels) if sample_weights is None else (inputs, labels, sample_weights)
    dataset = tf.data.Dataset.from_tensor_slices(parts)
    dataset = dataset.shuffle(count, seed=seed).repeat().batch(options.train_batch_size)
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=2 if os.environ.get("CI") else 0,
              callbacks=callbacks, shuffle=False)  # the dataset is shuffled; Keras would warn that it cannot
    return model


def grid_search(options, train, score, main_metric):
    """Trains one model per (learning rate, restart) with `train(learning_rate, seed)`, scores each with
    `score(model)` (a dict, empty without dev data) and returns (best model, the grid's rows, its rate, its seed)."""
    best, grid = None, []
    for learning_rate in options.learning_rates:
        for restart in range(options.num_restarts):
            seed = options.random_seed + restart
            model = train(learning_rate, seed)
            scores = score(model)
            grid.append({"learning_rate": learning_rate, "seed": seed, **scores})
            logging.info("learning rate %g, seed %d: %s", learning_rate, seed, scores)
            if best is None or scores.get(main_metric, 0) > best[1].get(main_metric, 0):
                best = (model, scores, learning_rate, seed)
    return best[0], grid, best[2], best[3]


# ---------------------------------------------------------------------------------------------- whole run
def read_split(task, split: str, data_dir: str | None, tfds_name: str | None):
    """The examples of `split`: from TFDS with `tfds_name`, else from the task's files in `data_dir`."""
    from bert_tf.tasks.base import DataError

    if tfds_name:
        return task.tfds_examples(tfds_name, split, data_dir)
    if not data_dir:
        raise DataError("give --data_dir (the task's files) or --tfds_name")
    return task.examples(data_dir, split)


def predict_logits(model, features, batch_size):
    return model.predict(features, batch_size=batch_size, verbose=0)["logits"]


def save(model, task, config, vocab_file: str, output_dir: str, options, learning_rate, seed, **fields):
    """The fine-tuned model as a directory export and serving read: model, task.json (the task, its labels, the
    settings and `fields`, the family's own TaskInfo fields), vocab, config."""
    from bert_tf.tasks import task_info

    with staging.staged_file(os.path.join(output_dir, MODEL_FILE), suffix=".keras") as tmp:
        model.save(tmp)  # Keras saves only to a name ending in .keras
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    staging.copy_file(vocab_file, os.path.join(output_dir, "vocab.txt"))
    task_info.write(output_dir, task_info.TaskInfo(
        task=task.name, kind=task.kind, labels=tuple(task.labels), max_seq_length=options.max_seq_length,
        do_lower_case=options.do_lower_case, learning_rate=learning_rate, seed=seed,
        num_train_epochs=options.num_train_epochs, global_step=_steps_trained(model), **fields))


def load_finetuned(directory: str):
    """The model saved by `run_classifier` in `directory`."""
    import keras

    import bert_tf.models  # noqa: F401  (registers the classes)

    return keras.saving.load_model(os.path.join(directory, MODEL_FILE))


def steps_for(num_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for `epochs` passes over the data (the original's int(n / batch * epochs), at least 1)."""
    return max(1, math.floor(num_examples / batch_size * epochs))


def _steps_trained(model) -> int:
    """The updates `model` has had here: its optimizer's count, 0 for a model never compiled."""
    optimizer = getattr(model, "optimizer", None)
    return int(optimizer.iterations) if optimizer is not None else 0


def global_step(model, output_dir, trained: bool) -> dict:
    """{"global_step": steps} for eval_results.txt: the steps this run trained; for evaluation alone those of the
    fine-tuned model in `output_dir` (from its task.json: the reloaded model carries no optimizer step), or 0 for a
    fresh head on `init_checkpoint`. Empty when a saved model does not record them (saved by an earlier version)."""
    if trained:
        return {"global_step": _steps_trained(model)}
    if not os.path.exists(os.path.join(output_dir, MODEL_FILE)):
        return {"global_step": 0}
    from bert_tf.tasks import task_info

    info = task_info.read(output_dir)
    step = info.global_step if info is not None else None
    return {} if step is None else {"global_step": step}


def existing_model(output_dir, build, options):
    """For evaluation or prediction alone: the model fine-tuned in `output_dir`, else `build()` initialised from
    `options.init_checkpoint`."""
    from bert_tf.checkpoints import restore_weights

    if os.path.exists(os.path.join(output_dir, MODEL_FILE)):
        return load_finetuned(output_dir)
    model = build()
    if options.init_checkpoint:
        restore_weights(model, options.init_checkpoint)
    return model


def write_json(path, data):
    write_lines(path, [json.dumps(data, indent=2, ensure_ascii=False)])


