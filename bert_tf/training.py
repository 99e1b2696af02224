"""The training loop behind the CLIs: `model.train_step` under any strategy, with exact resume.

`train` runs a compiled Keras model's own `train_step` (the same loss, metrics, gradient accumulation and optimizer
as `model.fit`) `steps_per_loop` steps per call of one `tf.function` (TPU-style host loops), and adds what
long runs need and `fit` does not give exactly:

- checkpoints every `save_checkpoints_steps` with `tf.train.CheckpointManager`, holding the model, the optimizer,
  the step and the input iterator, so a run killed at any moment restarts from the last checkpoint and continues
  with the same batches: run to step N, it ends with the weights of an uninterrupted run;
- steps that count updates: a batch whose update the optimizer skipped because its gradients were not finite
  (`bert_tf.optimization`; with float16, a loss scale found too high) is replaced by the next batch, so
  `num_train_steps` updates are made and the schedule's step is the loop's;
- a stop at the first step whose loss is not finite, or after `MAX_SKIPPED` skipped updates in a row: its update
  was skipped, so the checkpoint written then is the last good state;
- SIGTERM (preemption) saves a checkpoint at the end of the current loop and stops;
- TensorBoard scalars (`<output_dir>/train`): the model's metrics, learning rate, examples/s globally and per
  replica.

A fresh run starts from `init_checkpoint`'s weights (`bert_tf.checkpoints.restore_weights`: any format, optimizer
state and step ignored).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import time

import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf import checkpoints, fileio, staging, tf_log
from bert_tf.errors import Preempted, TrainingError
from bert_tf.optimization import current_learning_rate, optimizer_kind

tf_log.hide_saver_timings()

CHECKPOINT_NAME = "ckpt"
# --dtype: Keras's mixed-precision policy names, and the short names run_pretraining has taken since its first flag.
DTYPES = {"float32": "float32", "mixed_bfloat16": "mixed_bfloat16", "mixed_float16": "mixed_float16",
          "fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
OPTIMIZER_KEY = "optimizer_kind"
CONFIG_KEY = "bert_config"
BATCHES_KEY = "batches_read"
# Skipped updates in a row that stop training: far beyond the halvings that take Keras's initial float16 loss scale
# (2^15) below 1; what persists longer is a model whose gradients overflow in any precision.
MAX_SKIPPED = 100


_SCALAR = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


def write_scalar(name: str, value: float) -> None:
    """A TensorBoard scalar in the default summary writer, without the tensorboard package (which
    `tf.summary.scalar` needs only to fill in this metadata)."""
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR)


def is_chief(strategy) -> bool:
    """Whether this process writes the real checkpoints and summaries (multi-worker: the chief, or worker 0)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return resolver.task_type == "worker" and resolver.task_id == 0 and \
        "chief" not in resolver.cluster_spec().as_dict()


class _SignalCaught:
    """Within the block, `signum` is remembered (`raised`) instead of acted on; main thread only (elsewhere signals
    are not ours to take). `train` keeps SIGTERM this way for its whole loop, to save and stop at the end of a loop
    of steps; and SIGINT while it saves a checkpoint (`deliver_after`: raised again on leaving, under the handler
    that was there before, a KeyboardInterrupt by default), since a Ctrl-C between the checkpoint's files and the
    state file that names them leaves a checkpoint that `latest_checkpoint` does not see."""

    def __init__(self, signum, deliver_after: bool = False):
        self.signum, self.deliver_after = signum, deliver_after
        self.raised = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(self.signum, self._handle)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    def _handle(self, signum, frame):
        del signum, frame
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(self.signum, self._previous)
            if self.deliver_after and self.raised:
                signal.raise_signal(self.signum)


def train(model, strategy, dataset_fn, output_dir: str, *, num_train_steps: int, global_batch_size: int,
          steps_per_loop: int = 1000, save_checkpoints_steps: int = 1000, max_checkpoints_to_keep: int = 5,
          init_checkpoint: str | None = None, jit_compile: bool = False, progress=None) -> dict:
    """Trains `model` (compiled under `strategy.scope()`) to `num_train_steps` on
    `strategy.distribute_datasets_from_function(dataset_fn)`, resuming from `output_dir` when it holds a
    checkpoint (else initialising from `init_checkpoint`). Returns the last loop's metrics and the step.
    `progress(step, scalars)`, if given, is called after every loop of steps (e.g. to move a progress bar)."""
    if min(num_train_steps, steps_per_loop, save_checkpoints_steps) < 1:
        raise ValueError("--num_train_steps, --iterations_per_loop and --save_checkpoints_steps must be at least 1")
    chief = is_chief(strategy)
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    with strategy.scope():
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # batches read, skipped updates included: where a resumed run's input restarts when it cannot be saved
        batches = tf.Variable(0, dtype=tf.int64, trainable=False, name=BATCHES_KEY,
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # Keras makes some training state at the first step (the optimizer's slots, a tracker per loss of a
        # several-output model), and tf.function, having seen variables made while tracing the loop, would trace
        # it all again: it is made here from the input's shapes, as Keras's own `fit` does under a strategy.
        model._symbolic_build(data_batch=_replica_batch_spec(iterator))
    # The optimizers' slots look alike (AdamW's and the original's have the same two moments), so the checkpoint
    # names the optimizer that wrote it, and resuming with another one is refused instead of silently mixing them.
    with tf.device("/cpu:0"):
        kind = tf.Variable(optimizer_kind(model.optimizer), trainable=False, name=OPTIMIZER_KEY)
    # Keras's dropout seed generators are not trackable objects: their states are listed explicitly, so a resumed
    # run draws the same dropout masks as an uninterrupted one.
    state = dict(model=model, optimizer=model.optimizer, global_step=step,
                 model_state=list(model.non_trainable_variables), **{OPTIMIZER_KEY: kind})
    # The config too: a checkpoint of a deeper model restores into a shallower one without a complaint (every
    # weight this model has is there), its extra layers dropped; the config is compared before restoring instead.
    latest = tf.train.latest_checkpoint(output_dir)
    config = _config_json(model)
    # a checkpoint written before configs were saved has none, and must still restore
    if config is not None and (latest is None or saved_config(fileio.load_checkpoint(latest)) is not None):
        with tf.device("/cpu:0"):
            state[CONFIG_KEY] = tf.Variable(config, trainable=False, name=CONFIG_KEY)
    legacy = latest is not None and not _saved_has(latest, BATCHES_KEY)  # written before batches were counted
    try:
        checkpoint = tf.train.Checkpoint(data=iterator, **state, **{BATCHES_KEY: batches})
        restored = tf.train.Checkpoint(data=iterator, **state) if legacy else checkpoint
        iterator_saved = True
    except ValueError:  # a strategy over devices has iterators that cannot be saved: resume by skipping instead
        checkpoint = tf.train.Checkpoint(**state, **{BATCHES_KEY: batches})
        restored = tf.train.Checkpoint(**state) if legacy else checkpoint
        iterator_saved = False
    if latest:
        _check_optimizer(latest, optimizer_kind(model.optimizer))
        _check_config(latest, config, output_dir)
        status = checkpoints.restore_fitting(restored.restore, latest, lambda mismatch: (
            f"--output_dir={output_dir} holds checkpoints of another model ({latest}: {mismatch}); train this "
            "model in a new --output_dir, or resume with the config that wrote them"))
        status.assert_existing_objects_matched()
        logging.info("resuming from %s at step %d", latest, int(step.numpy()))
        if legacy:  # one batch per step, exact unless updates were skipped; counted from here on
            batches.assign(step)
            if not iterator_saved:
                logging.warning("%s was written before checkpoints counted the batches read: the input resumes one "
                                "batch per step, off by the updates skipped before it (float16), if any", latest)
        if int(model.optimizer.iterations.numpy()) != int(step.numpy()):
            logging.warning("%s: step %d but %d optimizer updates (written before skipped updates stopped counting "
                            "as steps): the learning rate will not reach 0 at --num_train_steps", latest,
                            int(step.numpy()), int(model.optimizer.iterations.numpy()))
        if not iterator_saved and int(batches.numpy()):
            done = int(batches.numpy())
            logging.warning("this strategy cannot save the input position; skipping %d batches to restore it", done)
            # each step takes one batch per replica; a pipeline feeds replicas / pipelines of them
            iterator = iter(strategy.distribute_datasets_from_function(lambda context: dataset_fn(context).skip(
                done * max(1, context.num_replicas_in_sync // context.num_input_pipelines))))
    elif init_checkpoint:
        checkpoints.restore_weights(model, init_checkpoint)
    if latest and init_checkpoint:  # as the original's Estimator, which restores its model_dir first
        logging.warning("--init_checkpoint=%s is not read: resuming from %s", init_checkpoint, latest)
    logging.info("training on %d replica(s)", strategy.num_replicas_in_sync)  # after the checks of what it starts from
    # Every worker takes part in saving (it is collective); only the chief's copy is kept.
    directory = output_dir if chief else tempfile.mkdtemp(prefix="bert_tf_worker_")  # local: only the chief's counts
    for stale in staging.remove_stale_checkpoint_temps(directory, CHECKPOINT_NAME):
        logging.info("removed %s, left by a checkpoint save that did not finish", stale)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_checkpoints_to_keep,
                                         checkpoint_name=CHECKPOINT_NAME)
    try:
        return _loop(model, strategy, iterator, step, batches, manager, output_dir, chief, num_train_steps,
                     global_batch_size, steps_per_loop, save_checkpoints_steps, jit_compile, progress)
    finally:
        if not chief:
            shutil.rmtree(directory, ignore_errors=True)


def _replica_batch_spec(iterator):
    """The shapes and dtypes of one replica's batch from a distributed iterator."""
    return tf.nest.map_structure(lambda spec: getattr(spec, "_value_specs", (spec,))[0], iterator.element_spec)


def _config_json(model) -> str | None:
    """The model's BERT config, and its pretraining objective when it is not the paper's BERT (checkpoints written
    before objectives existed are all BERT's)."""
    config = getattr(model, "bert_config", None)
    if config is None:
        return None
    values = config.to_dict()
    if getattr(model, "objective", "mlm_nsp") != "mlm_nsp":
        values["objective"] = model.objective
    return json.dumps(values, sort_keys=True)


def _saved_has(path: str, key: str) -> bool:
    return fileio.load_checkpoint(path).has_tensor(f"{key}/.ATTRIBUTES/VARIABLE_VALUE")


def saved_config(reader) -> dict | None:
    """The config `train` saves with a checkpoint (`BertConfig.to_dict`'s names, and the objective when it is not
    BERT's), from its reader; None in one written before it did."""
    key = f"{CONFIG_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
    return json.loads(reader.get_tensor(key).decode()) if reader.has_tensor(key) else None


def _check_config(path: str, config: str | None, output_dir: str) -> None:
    """Refuses to resume the checkpoint at `path` with a model of another config than the one that wrote it."""
    saved = saved_config(fileio.load_checkpoint(path))
    if saved is None or config is None:
        return
    current = json.loads(config)
    for values in (saved, current):  # keys that checkpoints written before them lack, at their meaning then
        values.setdefault("objective", "mlm_nsp")
        values.setdefault("causal_attention", False)
    differ = [f"{key} {saved.get(key)!r} there, {current.get(key)!r} here" for key in sorted(set(saved) | set(current))
              if saved.get(key) != current.get(key)]
    if differ:
        raise checkpoints.CheckpointError(
            f"--output_dir={output_dir} holds checkpoints of another model ({path}: {'; '.join(differ)}); train this "
            "model in a new --output_dir, or resume with the config that wrote them")


def _check_optimizer(path: str, kind: str) -> None:
    """Refuses to resume the checkpoint at `path` with an optimizer other than the one that wrote it."""
    reader = fileio.load_checkpoint(path)
    key = f"{OPTIMIZER_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
    fresh = f"start a new --output_dir with --init_checkpoint={path} (its weights, without the optimizer state)"
    if not reader.has_tensor(key):
        raise TrainingError(f"{path} does not record which optimizer wrote it (an earlier bert-tf): resume it with "
                            f"that version, or {fresh}")
    saved = reader.get_tensor(key).decode()
    if saved != kind:
        raise TrainingError(f"{path} was trained with --optimizer={saved}, not {kind}: resume with "
                            f"--optimizer={saved}, or {fresh}")


def _loop(model, strategy, iterator, step, batches, manager, output_dir, chief, num_train_steps, global_batch_size,
          steps_per_loop, save_checkpoints_steps, jit_compile, progress):
    """The body of `train` after set-up: loops of `steps_per_loop` steps, logging, checkpoints, stops."""
    step_fn = tf.function(model.train_step, jit_compile=True) if jit_compile else model.train_step

    updates = model.optimizer.iterations

    @tf.function(autograph=False)  # an explicit loop: no dependence on AutoGraph's source transformation
    def run_steps(iterator, count):
        # A step is an update: a batch whose update the optimizer skipped (gradients not finite: a float16 loss
        # scale too high, or a NaN) does not count, and the next batch is taken in its place.
        def body(done, skipped, loss):
            before = tf.convert_to_tensor(updates)
            with tf.control_dependencies([before]):
                logs = strategy.run(step_fn, args=(next(iterator),))
                loss = strategy.reduce(tf.distribute.ReduceOp.SUM, logs["loss"], axis=None)
            with tf.control_dependencies([loss]):
                applied = tf.cast(tf.convert_to_tensor(updates) > before, tf.int64)
            step.assign_add(applied)
            batches.assign_add(1)
            return done + applied, (skipped + 1) * (1 - applied), loss

        def more(done, skipped, loss):
            return tf.logical_and(tf.logical_and(done < count, skipped < MAX_SKIPPED), tf.math.is_finite(loss))

        zero = tf.constant(0, tf.int64)
        return tf.while_loop(more, body, (zero, zero, tf.constant(0.0)))[1:]

    writer = None  # made after the first loop of steps, so a run whose input fails at once leaves no events file
    replicas = strategy.num_replicas_in_sync
    logs: dict = {}
    current = int(step.numpy())

    def save():  # a Ctrl-C waits for the whole checkpoint, state file included (`_SignalCaught`)
        with _SignalCaught(signal.SIGINT, deliver_after=True):
            return manager.save(checkpoint_number=current)

    with _SignalCaught(signal.SIGTERM) as sigterm:
        while current < num_train_steps:
            count = min(steps_per_loop, num_train_steps - current,
                        save_checkpoints_steps - current % save_checkpoints_steps)
            started = time.time()
            read = int(batches.numpy())
            skipped, loss = run_steps(iterator, tf.constant(count, tf.int64))
            done = int(step.numpy()) - current
            extra = int(batches.numpy()) - read - done
            elapsed = time.time() - started
            logs = {name: float(value) for name, value in model.get_metrics_result().items()}
            model.reset_metrics()
            current += done
            if done < count:
                path = save()
                what = (f"the loss became {float(loss)} at step {current + 1}" if not math.isfinite(float(loss)) else
                        f"the gradients were not finite for {int(skipped)} batches in a row at step {current + 1}")
                raise TrainingError(f"{what}; training stopped and the last good state (step {current}) is saved in "
                                    f"{path}. Lower --learning_rate, lengthen the warmup or use --dtype=float32, "
                                    "then restart to resume")
            if extra:
                logging.warning("steps %d-%d: %d update(s) skipped (gradients not finite), another batch read for "
                                "each", current - done + 1, current, extra)
            examples = done * global_batch_size / max(elapsed, 1e-9)
            scalars = dict(logs, learning_rate=float(current_learning_rate(model.optimizer)),
                           examples_per_second=examples, examples_per_second_per_replica=examples / replicas)
            if writer is None:
                writer = tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief else \
                    tf.summary.create_noop_writer()
            with writer.as_default(step=current):
                for name, value in scalars.items():
                    write_scalar(name, value)
            logging.info("step %d/%d: %s", current, num_train_steps,
                         ", ".join(f"{k} {v:.4g}" for k, v in sorted(scalars.items())))
            if progress is not None:
                progress(current, scalars)
            if current % save_checkpoints_steps == 0 or current == num_train_steps or sigterm.raised:
                save()
            if sigterm.raised:
                raise Preempted(f"SIGTERM at step {current}: saved {manager.latest_checkpoint}; restart the same "
                                "command to resume")
    if writer is not None:
        writer.flush()
    return dict(logs, step=current)


def write_results(path: str, results: dict) -> None:
    """`key = value` lines, sorted, like the original's eval_results.txt."""
    write_lines(path, [f"{key} = {results[key]}" for key in sorted(results)])


def write_lines(path: str, lines) -> None:
    """Text lines, each ending in a newline, written atomically (`staging.write_text`)."""
    staging.write_text(path, "".join(f"{line}\n" for line in lines))
