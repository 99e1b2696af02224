"""The classification family: one label (or, for regression, one score) per sentence or sentence pair, as GLUE and
XNLI (paper section 4.1) and the quickstart's `word_order`.

Features come from `bert_tf.serving.Preprocessor`, the same in-graph tokenize-and-pack module that the exported
`ClassifierModule` runs, so training, prediction and serving pack `[CLS] A [SEP] (B [SEP])` with one piece of
code. `run_classifier` fine-tunes, evaluates and predicts as the original run_classifier.py.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import tensorflow as tf

from bert_tf import fileio, finetuning
from bert_tf.config import check_fits
from bert_tf.serving import Preprocessor, hold, labels_asset, trim
from bert_tf.tasks.base import DataError, Family, Task
from bert_tf.training import write_lines, write_results


# ------------------------------------------------------------------------------------------------ features
def encode(examples, vocab_file: str, do_lower_case: bool, max_seq_length: int, batch: int = 512) -> dict:
    """Examples -> the three model inputs as int32 arrays [n, max_seq_length], tokenized in-graph exactly as the
    original FullTokenizer and packed `[CLS] A [SEP] (B [SEP])` with longest-first truncation."""
    preprocessor = _preprocessor(vocab_file, do_lower_case, max_seq_length)
    pairs = examples[0].text_b is not None
    arrays: dict = {}
    for start in range(0, len(examples), batch):  # each batch written into the arrays, none kept
        chunk = examples[start:start + batch]
        a = tf.constant([e.text_a for e in chunk])
        out = (preprocessor.serve_pairs(a, tf.constant([e.text_b or "" for e in chunk])) if pairs
               else preprocessor.serve_single(a))
        for key, value in out.items():
            if key not in arrays:
                arrays[key] = np.empty((len(examples), *value.shape[1:]), value.dtype.as_numpy_dtype)
            arrays[key][start:start + len(chunk)] = value
    return arrays


@functools.lru_cache(maxsize=4)
def _preprocessor(vocab_file: str, do_lower_case: bool, max_seq_length: int) -> Preprocessor:
    """One Preprocessor per run (train, dev and test splits share its compiled functions)."""
    return Preprocessor(vocab_file, do_lower_case=do_lower_case, seq_length=max_seq_length)


def label_array(task: Task, examples, where: str) -> np.ndarray:
    """Label ids (int32), or the scores (float32) of a regression task; every example must have one."""
    missing = sum(e.label is None for e in examples)
    if missing:
        raise DataError(f"{where}: {missing} example(s) have no label")
    if task.regression:
        return np.array([e.label for e in examples], np.float32)
    return np.array([task.labels.index(e.label) for e in examples], np.int32)


def decisions(task: Task, logits: np.ndarray) -> np.ndarray:
    """Class indexes (argmax) or, for regression, the predicted scores."""
    return logits[:, 0] if task.regression else logits.argmax(-1)


def example_losses(task: Task, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The training loss of each held-out example: squared error for regression, else cross-entropy."""
    if task.regression:
        return (logits[:, 0] - labels) ** 2
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def batch_mean_loss(losses: np.ndarray, batch_size: int) -> float:
    """The original's `loss` in eval_results.txt (its Estimator's): the mean over evaluation batches of each
    batch's mean loss, the last batch as short as the data leaves it (the original keeps it off TPUs)."""
    return float(np.mean([chunk.mean() for chunk in np.split(losses, range(batch_size, len(losses), batch_size))]))


# ---------------------------------------------------------------------------------------------- the family
class Classification(Family):
    kinds = ("classification", "regression")
    export_kind = "classifier"
    program = "run_classifier"

    def kind(self, task):
        return "regression" if task.regression else "classification"

    def num_outputs(self, task):
        return 1 if task.regression else len(task.labels)

    def build_model(self, task: Task, config, dropout_rate: float, dtype=None):
        """A fresh `BertClassifier` with the task's number of outputs (one score for regression)."""
        from bert_tf.models import BertClassifier, BertEncoder

        return BertClassifier(BertEncoder(config, dtype=dtype), num_classes=self.num_outputs(task),
                              dropout_rate=dropout_rate)

    def features(self, examples, vocab_file: str, do_lower_case: bool, max_seq_length: int) -> dict:
        return encode(examples, vocab_file, do_lower_case, max_seq_length)

    def probabilities(self, task: Task, logits: np.ndarray) -> np.ndarray:
        """What test_results.tsv holds per example: class probabilities, or the score of a regression task."""
        import keras

        return logits[:, :1] if task.regression else keras.ops.softmax(logits).numpy()

    def serving_module(self, model, info, preprocessor, *, doc_stride, scratch):
        module = ClassifierModule(model, preprocessor=preprocessor, labels=info.labels, pairs=bool(info.pairs),
                                  regression=info.kind == "regression")
        labels_asset(module, info.labels, scratch)
        return module

    def run(self, task: Task, config, vocab_file: str, output_dir: str, options: finetuning.FinetuneOptions,
            data_dir: str | None = None, tfds_name: str | None = None, strategy=None, progress=None) -> dict:
        """Fine-tunes (the grid of `options`, the best on dev kept), evaluates and predicts as the original
        run_classifier.py; returns the figures. `progress` as in `bert_tf.finetuning.fit`."""
        strategy = strategy or tf.distribute.get_strategy()
        options.check(strategy.num_replicas_in_sync, output_dir)
        check_fits(config, vocab_file, options.max_seq_length, do_lower_case=options.do_lower_case)
        dev_splits = [s for s in task.splits if s.startswith("dev")]
        test_splits = [s for s in task.splits if s.startswith("test")]
        # read and check every split needed before any training
        read = lambda split: finetuning.read_split(task, split, data_dir, tfds_name)  # noqa: E731
        train = read("train") if options.do_train else None
        devs = {s: read(s) for s in dev_splits} if options.do_eval else {}
        tests = {s: read(s) for s in test_splits} if options.do_predict else {}
        features = lambda examples: self.features(examples, vocab_file, options.do_lower_case,  # noqa: E731
                                                  options.max_seq_length)
        dev_data = {s: (features(ex), label_array(task, ex, f"{task.name} {s}")) for s, ex in devs.items()}
        fileio.makedirs(output_dir)
        results: dict = {}

        def evaluate(model, split="dev"):
            """The split's figures and each example's loss."""
            inputs, labels = dev_data[split]
            logits = finetuning.predict(model, inputs, options.eval_batch_size)["logits"]
            losses = example_losses(task, logits, labels)
            return dict(task.metrics(decisions(task, logits), labels), loss=float(losses.mean())), losses

        build = lambda: self.build_model(task, config, options.dropout_rate, options.policy)  # noqa: E731
        grid = None
        if options.do_train:
            pairs = train[0].text_b is not None
            arrays, labels = features(train), {"logits": label_array(task, train, f"{task.name} train")}
            del train  # training reads the packed data alone, moved into tensors here
            train_features, train_labels = finetuning.as_tensors(arrays), finetuning.as_tensors(labels)
            grid = finetuning.grid_search(
                options, output_dir,
                lambda cell, directory: finetuning.fit(build, train_features, train_labels, options, cell, strategy,
                                                       directory, progress=progress),
                lambda m: evaluate(m)[0] if options.do_eval else {}, task.main_metric, build,
                finetuning.training_data(task.name, train_features, train_labels))
            results.update(grid.figures())
            model = grid.model
            finetuning.save(grid, task, config, vocab_file, output_dir, options, pairs=pairs)
        else:
            model = finetuning.existing_model(output_dir, build, options, config, vocab_file)

        if options.do_eval:
            for split in dev_splits:
                scores, losses = evaluate(model, split)
                suffix = "" if split == "dev" else f"_{split.split('_', 1)[1]}"
                results[split] = scores
                write_results(os.path.join(output_dir, f"eval_results{suffix}.txt"),
                              {**{f"eval{suffix}_{k}": v for k, v in scores.items()},
                               "loss": batch_mean_loss(losses, options.eval_batch_size),
                               **finetuning.global_step(grid, output_dir)})
        if options.do_predict:
            for split, examples in tests.items():
                logits = finetuning.predict(model, features(examples), options.predict_batch_size)["logits"]
                suffix = "" if split == "test" else f"_{split.split('_', 1)[1]}"
                write_lines(os.path.join(output_dir, f"test_results{suffix}.tsv"),
                            ["\t".join(str(v) for v in row)  # float32 as the original's str() writes it
                             for row in self.probabilities(task, logits).astype(np.float32)])
                if hasattr(task, "write_submission"):
                    results[split] = task.write_submission(os.path.join(output_dir, "glue_submission"), split,
                                                           [e.guid for e in examples], decisions(task, logits))
                else:
                    results[split] = os.path.join(output_dir, f"test_results{suffix}.tsv")
        return results


FAMILY = Classification()


def run_classifier(task: Task, config, vocab_file: str, output_dir: str, options: finetuning.FinetuneOptions,
                   data_dir: str | None = None, tfds_name: str | None = None, strategy=None, progress=None) -> dict:
    """`run_classifier` for any task trained on sentence (pair) inputs: its family (classification or multiple
    choice) runs it. A task of another family is a DataError naming the command that trains it."""
    if not isinstance(task.family, Classification):
        raise DataError(f"--task_name={task.name} is not a sentence (pair) task; train it with "
                        f"{task.family.program}")
    return task.family.run(task, config, vocab_file, output_dir, options, data_dir=data_dir, tfds_name=tfds_name,
                           strategy=strategy, progress=progress)


# ------------------------------------------------------------------------------------------------- serving
class ClassifierModule(tf.Module):
    """Raw text -> `probabilities` [batch, classes] and `label` (name of the most probable class); for a
    regression task `score` [batch]. Pair tasks take `text_a` and `text_b`, single-sentence tasks `text`. Inputs
    are truncated to `seq_length` as in training; the batch runs at the length of its longest row."""

    def __init__(self, model, preprocessor: Preprocessor, labels, pairs: bool, regression: bool, name="classifier"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.pairs, self.regression = pairs, regression
        self.label_names = tf.constant(list(labels) or [""])
        if pairs:
            self.serve = tf.function(self._pair, autograph=False,
                                     input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                                      tf.TensorSpec([None], tf.string, name="text_b")])
        else:
            self.serve = tf.function(self._single, autograph=False,
                                     input_signature=[tf.TensorSpec([None], tf.string, name="text")])

    def _outputs(self, inputs):
        logits = self.model(trim(inputs))["logits"]
        if self.regression:
            return {"score": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "label": tf.gather(self.label_names, tf.argmax(probabilities, axis=-1))}

    def _pair(self, text_a, text_b):
        return self._outputs(self.preprocessor.serve_pairs(text_a, text_b))

    def _single(self, text):
        return self._outputs(self.preprocessor.serve_single(text))

    def signatures(self) -> dict:
        return {"serving_default": self.serve}
