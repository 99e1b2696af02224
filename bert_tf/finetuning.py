"""Fine-tuning a pretrained BERT on a registered task (paper sections 4 and 5.3): sentence (pair)
classification and regression (GLUE, XNLI), multiple choice (SWAG), extractive QA (SQuAD v1.1/v2.0) and tagging
(CoNLL NER).

Every task goes through the same `fit` (fresh head, weights from `init_checkpoint`, the paper's optimizer) and
`grid_search` (each learning rate of a small grid and each restart, the best on dev by the task's main metric),
writes what the original scripts write (`eval_results.txt`, `test_results.tsv`, SQuAD's `predictions.json`, ...)
and saves a self-contained model directory (`model.keras`, `task.json`, `vocab.txt`, `bert_config.json`) that
evaluation-only runs and export read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.tasks import DataError, Example, Task
from bert_tf.training import write_lines, write_results

TASK_FILE = "task.json"
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


# ------------------------------------------------------------------------------------------------ features
def encode(examples, vocab_file: str, do_lower_case: bool, max_seq_length: int, batch: int = 512) -> dict:
    """Examples -> the three model inputs as int32 arrays [n, max_seq_length], tokenized in-graph exactly as the
    original FullTokenizer and packed `[CLS] A [SEP] (B [SEP])` with longest-first truncation."""
    if examples[0].choices:  # multiple choice: every (text_a, choice) pair, then [n, choices, seq]
        count = len(examples[0].choices)
        flat = [Example(e.guid, e.text_a, choice) for e in examples for choice in e.choices]
        packed = encode(flat, vocab_file, do_lower_case, max_seq_length, batch)
        return {key: value.reshape(len(examples), count, max_seq_length) for key, value in packed.items()}
    pack = _packer(vocab_file, do_lower_case, max_seq_length, examples[0].text_b is not None)
    parts = []
    for start in range(0, len(examples), batch):
        chunk = examples[start:start + batch]
        parts.append(pack(tf.constant([e.text_a for e in chunk]), tf.constant([e.text_b or "" for e in chunk])))
    return {key: np.concatenate([p[key].numpy() for p in parts]) for key in parts[0]}


@functools.lru_cache(maxsize=4)
def _packer(vocab_file: str, do_lower_case: bool, max_seq_length: int, pairs: bool):
    """The compiled tokenize-and-pack function, built once per run (train, dev and test splits share it)."""
    from bert_tf.tokenization import BertTokenizerLayer, pack_inputs_graph

    layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
    cls, sep = layer.vocab.index("[CLS]"), layer.vocab.index("[SEP]")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def pack(a, b):
        segments = [layer(a), layer(b)] if pairs else [layer(a)]
        return pack_inputs_graph(segments, max_seq_length, cls, sep)

    return pack


def label_array(task: Task, examples, where: str) -> np.ndarray:
    missing = sum(e.label is None for e in examples)
    if missing:
        raise DataError(f"{where}: {missing} example(s) have no label")
    if task.kind == "regression":
        return np.array([e.label for e in examples], np.float32)
    return np.array([task.labels.index(e.label) for e in examples], np.int32)


# --------------------------------------------------------------------------------------------------- model
def build_model(task: Task, config, options: FinetuneOptions):
    """A fresh `BertClassifier` with the task's number of outputs (one score for regression), or for multiple
    choice a `BertMultipleChoice`."""
    from bert_tf.models import BertClassifier, BertEncoder, BertMultipleChoice

    if task.kind == "multiple_choice":
        return BertMultipleChoice(BertEncoder(config), dropout_rate=options.dropout_rate)
    return BertClassifier(BertEncoder(config), task.num_outputs, dropout_rate=options.dropout_rate)


def _predict(model, features, batch_size):
    return model.predict(features, batch_size=batch_size, verbose=0)["logits"]


def decisions(task: Task, logits: np.ndarray) -> np.ndarray:
    """Class indexes (argmax) or, for regression, the predicted scores."""
    return logits[:, 0] if task.kind == "regression" else logits.argmax(-1)


def _eval_loss(task, logits, labels) -> float:
    if task.kind == "regression":
        return float(np.mean((logits[:, 0] - labels) ** 2))
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())


SPAN_LOSS_WEIGHTS = {"start_logits": 0.5, "end_logits": 0.5}  # run_squad.py: (start_loss + end_loss) / 2


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

    from bert_tf.optimization import create_optimizer
    from bert_tf.training import restore_weights

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
        # Slots now, not inside the first step: a tf.function that creates variables is traced twice, and for
        # BERT the second trace cost ~11 s (all-MiniLM-L6-v2; first step 22.6 -> 11.3 s).
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
def read_split(task: Task, split: str, data_dir: str | None, tfds_name: str | None):
    if tfds_name:
        return task.tfds_examples(tfds_name, split, data_dir)
    if not data_dir:
        raise DataError("give --data_dir (the task's files) or --tfds_name")
    return task.examples(data_dir, split)


def run_classifier(task: Task, config, vocab_file: str, output_dir: str, options: FinetuneOptions,
                   data_dir: str | None = None, tfds_name: str | None = None, strategy=None, callbacks=None) -> dict:
    """Fine-tunes, evaluates and predicts as the original run_classifier.py; returns the figures. `callbacks`
    go to every training run's `model.fit`."""
    import keras

    options.check()
    strategy = strategy or tf.distribute.get_strategy()
    dev_splits = [s for s in task.splits if s.startswith("dev")]
    test_splits = [s for s in task.splits if s.startswith("test")]
    # read and check every split needed before any training
    train = read_split(task, "train", data_dir, tfds_name) if options.do_train else None
    devs = {s: read_split(task, s, data_dir, tfds_name) for s in dev_splits} if options.do_eval else {}
    tests = {s: read_split(task, s, data_dir, tfds_name) for s in test_splits} if options.do_predict else {}
    encode_ = lambda examples: encode(examples, vocab_file, options.do_lower_case, options.max_seq_length)  # noqa
    dev_data = {s: (encode_(ex), label_array(task, ex, f"{task.name} {s}")) for s, ex in devs.items()}
    os.makedirs(output_dir, exist_ok=True)
    results: dict = {}

    def evaluate(model, split="dev"):
        features, labels = dev_data[split]
        logits = _predict(model, features, options.eval_batch_size)
        scores = task.metrics(decisions(task, logits), labels)
        return dict(scores, loss=_eval_loss(task, logits, labels))

    if options.do_train:
        train_features, train_labels = encode_(train), label_array(task, train, f"{task.name} train")
        model, results["grid"], learning_rate, seed = grid_search(
            options, lambda rate, seed: fit(lambda: build_model(task, config, options), train_features,
                                            {"logits": train_labels}, options, rate, seed, strategy,
                                            callbacks=callbacks),
            lambda m: evaluate(m) if options.do_eval else {}, task.main_metric)
        _save(model, task, config, vocab_file, output_dir, options, learning_rate, seed,
              extra={"pairs": train[0].text_b is not None})
    else:
        model = _existing_model(output_dir, lambda: build_model(task, config, options), options)

    if options.do_eval:
        for split in dev_splits:
            scores = evaluate(model, split)
            prefix = "eval" if split == "dev" else f"eval_{split.split('_', 1)[1]}"
            results[split] = scores
            name = "eval_results.txt" if split == "dev" else f"eval_results_{split.split('_', 1)[1]}.txt"
            write_results(os.path.join(output_dir, name),
                          {**{f"{prefix}_{k}": v for k, v in scores.items()},
                           **_global_step(model, output_dir, options.do_train)})
    if options.do_predict:
        for split, examples in tests.items():
            logits = _predict(model, encode_(examples), options.predict_batch_size)
            values = logits[:, :1] if task.kind == "regression" else keras.ops.softmax(logits).numpy()
            suffix = "" if split == "test" else f"_{split.split('_', 1)[1]}"
            write_lines(os.path.join(output_dir, f"test_results{suffix}.tsv"),
                         ["\t".join(f"{v:.6f}" for v in row) for row in values])
            if hasattr(task, "write_submission"):
                results[split] = task.write_submission(os.path.join(output_dir, "glue_submission"), split,
                                                       [e.guid for e in examples], decisions(task, logits))
            else:
                results[split] = os.path.join(output_dir, f"test_results{suffix}.tsv")
    return results


def _save(model, task, config, vocab_file, output_dir, options, learning_rate, seed, extra=None):
    """The fine-tuned model as a directory export and serving read: model, task, labels, vocab, config."""
    tmp = os.path.join(output_dir, MODEL_FILE + ".tmp.keras")
    model.save(tmp)
    os.replace(tmp, os.path.join(output_dir, MODEL_FILE))
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    shutil.copyfile(vocab_file, os.path.join(output_dir, "vocab.txt.tmp"))
    os.replace(os.path.join(output_dir, "vocab.txt.tmp"), os.path.join(output_dir, "vocab.txt"))
    info = {"task": task.name, "kind": task.kind, "labels": list(task.labels), "max_seq_length":
            options.max_seq_length, "do_lower_case": options.do_lower_case, "learning_rate": learning_rate,
            "seed": seed, "num_train_epochs": options.num_train_epochs,
            "global_step": _steps_trained(model), **(extra or {})}
    write_lines(os.path.join(output_dir, TASK_FILE), [json.dumps(info, indent=2, sort_keys=True)])


def saved_task_info(directory: str) -> dict | None:
    """The task.json that `_save` wrote in `directory`, or None where there is none."""
    path = os.path.join(directory, TASK_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_finetuned(directory: str):
    """The model saved by `run_classifier` in `directory`."""
    import keras

    import bert_tf.models  # noqa: F401  (registers the classes)

    return keras.saving.load_model(os.path.join(directory, MODEL_FILE))


def steps_for(num_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for `epochs` passes over the data (the original's int(n / batch * epochs), at least 1)."""
    return max(1, math.floor(num_examples / batch_size * epochs))


# ------------------------------------------------------------------------------------------------- SQuAD
@dataclasses.dataclass(frozen=True)
class SquadOptions(FinetuneOptions):
    """`run_squad`'s settings: the original run_squad.py's defaults. `null_score_diff_threshold` None means: search
    τ on the predict file when it has answers (SQuAD 2.0), save it with the model, and use it."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float | None = None
    train_batch_size: int = 32
    learning_rates: tuple[float, ...] = (5e-5,)
    num_train_epochs: float = 3.0
    dropout_rate: float = 0.0  # on the token features; the original's span head has none

    def check(self):
        if not (self.do_train or self.do_predict):
            raise ValueError("at least one of --do_train and --do_predict must be set")
        if len(self.learning_rates) * self.num_restarts > 1 and not self.do_predict:
            raise ValueError("choosing among several --learning_rate values or --num_restarts needs --do_predict "
                             "on a --predict_file with answers")


def run_squad(config, vocab_file: str, output_dir: str, options: SquadOptions, train_file: str | None = None,
              predict_file: str | None = None, strategy=None, tfds_name: str | None = None,
              tfds_data_dir: str | None = None) -> dict:
    """Fine-tunes on SQuAD and/or predicts, as the original run_squad.py: writes `predictions.json`,
    `nbest_predictions.json`, `null_odds.json` (2.0), and with answers in the predict file the official figures in
    `eval_results.txt`. With `tfds_name` (e.g. "squad/v1.1", prepared) its train and validation splits replace the
    files. Returns the figures."""
    from bert_tf.models import BertEncoder, BertSpanQA
    from bert_tf.tasks import squad, squad_eval
    from bert_tf.tokenization import FullTokenizer

    options.check()
    strategy = strategy or tf.distribute.get_strategy()
    tokenizer = FullTokenizer(vocab_file, do_lower_case=options.do_lower_case)
    version_2 = options.version_2_with_negative
    convert = dict(max_seq_length=options.max_seq_length, doc_stride=options.doc_stride,
                   max_query_length=options.max_query_length)
    def source(path, split, is_training):
        if tfds_name:
            data = squad.tfds_data(tfds_name, split, tfds_data_dir)
            return squad.parse_examples(data, is_training, version_2, f"{tfds_name}:{split}"), data
        if not path:
            flag = "train" if is_training else "predict"
            raise DataError(f"--do_{flag} needs --{flag}_file (or --tfds_name)")
        return squad.read_examples(path, is_training, version_2)

    train_examples = source(train_file, "train", True)[0] if options.do_train else None
    if options.do_predict:
        predict_examples, predict_data = source(predict_file, "validation", False)
        predict_features = squad.convert_examples(predict_examples, tokenizer, **convert)
        has_answers = any(qa.get("answers") for a in predict_data for p in a["paragraphs"] for qa in p["qas"])
    os.makedirs(output_dir, exist_ok=True)
    results: dict = {}

    def predict(model, threshold):
        outputs = model.predict(squad.feature_arrays(predict_features), batch_size=options.predict_batch_size,
                                verbose=0)
        return squad.postprocess(predict_examples, predict_features, outputs["start_logits"],
                                 outputs["end_logits"], tokenizer, n_best_size=options.n_best_size,
                                 max_answer_length=options.max_answer_length, version_2=version_2,
                                 null_threshold=threshold, do_lower_case=options.do_lower_case)

    def figures(model):
        threshold = options.null_score_diff_threshold
        predictions, best_non_null, nbest, null_odds = predict(model, 0.0 if threshold is None else threshold)
        scores = {}
        if has_answers:
            if version_2 and threshold is None:  # the τ search on this data
                scores["best_f1"], threshold = squad_eval.best_threshold(predict_data, best_non_null, null_odds)
                scores["best_f1_thresh"] = threshold
                predictions = {q: "" if null_odds[q] > threshold else best_non_null[q] for q in best_non_null}
            scores.update(squad_eval.evaluate(predict_data, predictions))
        return scores, (predictions, nbest, null_odds), threshold

    build = lambda: BertSpanQA(BertEncoder(config), dropout_rate=options.dropout_rate)  # noqa: E731
    if options.do_train:
        features = squad.convert_examples(train_examples, tokenizer, is_training=True, **convert)
        inputs = squad.feature_arrays(features)
        labels = {"start_logits": np.array([f.start_position for f in features], np.int32),
                  "end_logits": np.array([f.end_position for f in features], np.int32)}
        model, results["grid"], learning_rate, seed = grid_search(
            options, lambda rate, seed: fit(build, inputs, labels, options, rate, seed, strategy,
                                            SPAN_LOSS_WEIGHTS),
            lambda m: figures(m)[0] if options.do_predict and has_answers else {}, "f1")
    else:
        model = _existing_model(output_dir, build, options)
        learning_rate = seed = None

    threshold = options.null_score_diff_threshold
    if options.do_predict:
        if threshold is None and not has_answers and not options.do_train:
            threshold = _saved_threshold(output_dir)
            options = dataclasses.replace(options, null_score_diff_threshold=threshold)
        scores, (predictions, nbest, null_odds), threshold = figures(model)
        _write_json(os.path.join(output_dir, "predictions.json"), predictions)
        _write_json(os.path.join(output_dir, "nbest_predictions.json"), nbest)
        if version_2:
            _write_json(os.path.join(output_dir, "null_odds.json"), null_odds)
        if scores:
            write_results(os.path.join(output_dir, "eval_results.txt"),
                          {**scores, **_global_step(model, output_dir, options.do_train)})
        results["predict"] = scores
    if options.do_train:
        _save(model, squad_task(version_2), config, vocab_file, output_dir, options, learning_rate, seed,
              extra={"doc_stride": options.doc_stride, "max_query_length": options.max_query_length,
                     "max_answer_length": options.max_answer_length, "version_2_with_negative": version_2,
                     "null_score_diff_threshold": threshold if version_2 else None})
    return results


def _steps_trained(model) -> int:
    """The updates `model` has had here: its optimizer's count, 0 for a model never compiled."""
    optimizer = getattr(model, "optimizer", None)
    return int(optimizer.iterations) if optimizer is not None else 0


def _global_step(model, output_dir, trained: bool) -> dict:
    """{"global_step": steps} for eval_results.txt: the steps this run trained; for evaluation alone those of the
    fine-tuned model in `output_dir` (from its task.json: the reloaded model carries no optimizer step), or 0 for a
    fresh head on `init_checkpoint`. Empty when a saved model does not record them (saved by an earlier version)."""
    if trained:
        return {"global_step": _steps_trained(model)}
    if not os.path.exists(os.path.join(output_dir, MODEL_FILE)):
        return {"global_step": 0}
    step = (saved_task_info(output_dir) or {}).get("global_step")
    return {} if step is None else {"global_step": step}


def _existing_model(output_dir, build, options):
    """For evaluation or prediction alone: the model fine-tuned in `output_dir`, else `build()` initialised from
    `options.init_checkpoint`."""
    from bert_tf.training import restore_weights

    if os.path.exists(os.path.join(output_dir, MODEL_FILE)):
        return load_finetuned(output_dir)
    model = build()
    if options.init_checkpoint:
        restore_weights(model, options.init_checkpoint)
    return model


def squad_task(version_2: bool):
    from bert_tf.tasks import get_task

    return get_task("squad2" if version_2 else "squad")


def _saved_threshold(directory):
    value = (saved_task_info(directory) or {}).get("null_score_diff_threshold")
    return 0.0 if value is None else float(value)


def _write_json(path, data):
    write_lines(path, [json.dumps(data, indent=2, ensure_ascii=False)])


# --------------------------------------------------------------------------------------------------- NER
@dataclasses.dataclass(frozen=True)
class NerOptions(FinetuneOptions):
    """`run_ner`'s settings: `label_all_subtokens` trains every word piece on its word's tag (default: the first
    piece only, the others ignored, as the paper)."""

    label_all_subtokens: bool = False


def run_ner(config, vocab_file: str, output_dir: str, options: NerOptions, data_dir: str | None, strategy=None,
            tfds_name: str | None = None) -> dict:
    """Fine-tunes a token tagger on CoNLL-2003-style files; writes `eval_results.txt` (entity-level precision,
    recall, F1 on valid.txt) and `test_predictions.txt` (`word gold predicted` per line). Returns the figures."""
    from bert_tf.models import BertEncoder, BertTokenClassifier
    from bert_tf.tasks import get_task, ner
    from bert_tf.tokenization import FullTokenizer

    options.check()
    strategy = strategy or tf.distribute.get_strategy()
    task = get_task("conll2003")
    tokenizer = FullTokenizer(vocab_file, do_lower_case=options.do_lower_case)
    train = task.sentences(data_dir, "train", tfds_name) if options.do_train else None
    if train is not None:
        tags = ner.tag_set(train)
    elif saved_task_info(output_dir) is not None:
        tags = saved_task_info(output_dir)["labels"]
    else:
        raise DataError(f"{output_dir}: no fine-tuned tagger here (task.json); train one with --do_train")
    splits = {"dev": options.do_eval, "test": options.do_predict}
    data = {}
    for split, wanted in splits.items():
        if wanted:
            sentences = task.sentences(data_dir, split, tfds_name)
            where = f"{tfds_name}:{split}" if tfds_name else os.path.join(data_dir, ner.FILES[split])
            ner.check_tags([s for s in sentences if s.tags], tags, where)
            data[split] = (sentences, ner.encode(sentences, tokenizer, tags, options.max_seq_length))
    os.makedirs(output_dir, exist_ok=True)
    results: dict = {}

    def predict(model, split):
        sentences, (inputs, _, _, spans) = data[split]
        batch_size = options.eval_batch_size if split == "dev" else options.predict_batch_size
        logits = model.predict(inputs, batch_size=batch_size, verbose=0)["logits"]
        return ner.word_tags(logits, spans, sentences, tags)

    def evaluate(model):
        return task.metrics(predict(model, "dev"), [s.tags for s in data["dev"][0]])

    tagged = dataclasses.replace(task, labels=tuple(tags))
    build = lambda: BertTokenClassifier(BertEncoder(config), len(tags), dropout_rate=options.dropout_rate)  # noqa
    if options.do_train:
        inputs, labels, weights, _ = ner.encode(train, tokenizer, tags, options.max_seq_length,
                                                options.label_all_subtokens)
        model, results["grid"], learning_rate, seed = grid_search(
            options, lambda rate, seed: fit(build, inputs, {"logits": labels}, options, rate, seed, strategy,
                                            sample_weights={"logits": weights}),
            lambda m: evaluate(m) if options.do_eval else {}, "f1")
        _save(model, tagged, config, vocab_file, output_dir, options, learning_rate, seed,
              extra={"label_all_subtokens": options.label_all_subtokens})
    else:
        model = _existing_model(output_dir, build, options)
    if options.do_eval:
        results["dev"] = evaluate(model)
        write_results(os.path.join(output_dir, "eval_results.txt"),
                      {**{f"eval_{k}": v for k, v in results["dev"].items()},
                       **_global_step(model, output_dir, options.do_train)})
    if options.do_predict:
        sentences = data["test"][0]
        predicted = predict(model, "test")
        lines = []
        for sentence, tags_out in zip(sentences, predicted):
            lines += [f"{w} {g} {p}" for w, g, p in zip(sentence.words, sentence.tags or ["O"] * len(tags_out),
                                                          tags_out)] + [""]
        write_lines(os.path.join(output_dir, "test_predictions.txt"), lines)
        if all(s.tags for s in sentences):
            results["test"] = task.metrics(predicted, [s.tags for s in sentences])
    return results
