"""Pretraining: schedule, optimizer, loss, replica and accumulation equivalence, the CLI end to end (kill -9 and
resume, eval results, refusal of mismatched records), NaN handling and multi-worker training, on real text."""

import collections
import dataclasses
import json
import os
import shutil
import socket
import sys
import time
import warnings

import numpy as np
import pytest

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ, PREDS = 32, 5
CONFIG = {"vocab_size": None, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 256, "max_position_embeddings": 64, "type_vocab_size": 2, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """Records from real English text (docstrings of installed packages) with a small vocabulary: every
    character, its ## continuation and the 400 commonest words, so a tiny model learns in a few hundred steps."""
    from bench.common import docstring_lines
    from data_gen.generate import Options, generate, output_paths

    root = tmp_path_factory.mktemp("pretraining")
    lines = docstring_lines()[:4000]
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(line + ("\n" if i % 7 == 6 else "") for i, line in enumerate(lines)),
                      encoding="utf-8")
    words = collections.Counter(w for line in lines for w in line.lower().split() if w.isalpha() and len(w) > 1)
    chars = sorted({c for line in lines for c in line.lower() if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars] + [
        w for w, _ in words.most_common(400)]
    vocab = list(dict.fromkeys(vocab))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    generate(str(corpus), output_paths(str(root / "records") + "/", 4), str(root / "vocab.txt"),
             Options(max_seq_length=SEQ, max_predictions_per_seq=PREDS, dupe_factor=2, window_size=200),
             progress=False)
    (root / "bert_config.json").write_text(json.dumps(dict(CONFIG, vocab_size=len(vocab))))
    return root


def _config(data):
    from bert_tf import BertConfig

    return BertConfig.from_json_file(str(data / "bert_config.json"))


# ----------------------------------------------------------------------------------------------- optimizer
def test_schedule_is_the_originals_warmup_then_linear_decay():
    from bert_tf.optimization import create_optimizer, warmup_linear_decay

    steps = np.arange(0, 120, 7)
    got = np.array([float(warmup_linear_decay(1e-4, 100, 10)(s)) for s in steps])
    # google-research/bert optimization.py: polynomial_decay(power 1, end 0) over num_train_steps, replaced by
    # init_lr * step / warmup while step < warmup
    want = np.where(steps < 10, 1e-4 * steps / 10, 1e-4 * (1 - np.minimum(steps, 100) / 100))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    opt = create_optimizer(1e-4, num_train_steps=100, num_warmup_steps=10)
    assert (opt.weight_decay, opt.beta_1, opt.beta_2, opt.epsilon, opt.global_clipnorm) == (0.01, 0.9, 0.999, 1e-6,
                                                                                          1.0)
    with pytest.raises(ValueError, match="--optimizer='sgd'"):
        create_optimizer(1e-4, 100, optimizer="sgd")


def test_fused_adamw_update_is_adamw_in_numpy():
    """Our AdamW runs Adam through TF's fused kernel; the arithmetic must stay Keras's AdamW, written out here."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import AdamW

    rng = np.random.default_rng(0)
    start = {"dense/kernel": rng.normal(size=(5, 7)), "dense/bias": rng.normal(size=7)}
    grads = [{k: rng.normal(size=v.shape) for k, v in start.items()} for _ in range(6)]
    lr, wd, b1, b2, eps = 1e-2, 0.1, 0.9, 0.999, 1e-6
    variables = [keras.Variable(v.astype("float32"), name=k.split("/")[1]) for k, v in start.items()]
    opt = AdamW(learning_rate=lr, weight_decay=wd, beta_1=b1, beta_2=b2, epsilon=eps)
    opt.exclude_from_weight_decay(var_names=["bias"])
    for g in grads:
        opt.apply([tf.constant(g[k], tf.float32) for k in start], variables)

    want = {}
    for name, w in start.items():
        m = v = 0.0
        for t, g in enumerate(grads, 1):
            if not name.endswith("bias"):
                w = w - w * wd * lr  # decoupled decay first, then the bias-corrected Adam step
            m, v = m + (g[name] - m) * (1 - b1), v + (g[name] ** 2 - v) * (1 - b2)
            w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
        want[name] = w
    for variable, name in zip(variables, start):
        np.testing.assert_allclose(variable.numpy(), want[name], rtol=1e-5, atol=1e-6)
    assert not np.allclose(variables[0].numpy(), start["dense/kernel"], atol=1e-2)  # it moved


@pytest.mark.parametrize("kind", [None, "original_adamw", "adamw", "lamb"])
def test_a_step_with_any_inf_or_nan_gradient_is_skipped_and_a_finite_one_applied(kind):
    """Without clipping (None: AdamW alone) and with the recipe's global-norm clipping, where finite gradients
    whose squares overflow count as not finite too: clipped by an infinite norm, they would make every weight NaN."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import AdamW, create_optimizer

    inf, nan = float("inf"), float("nan")
    cases = {"finite": ([1.0, -2.0], [3.0]), "inf": ([1.0, inf], [3.0]), "nan": ([1.0, 2.0], [nan]),
             "+inf and -inf in two tensors": ([inf, 0.0], [-inf])}
    if kind:
        cases.update({"large, finite norm": ([1e18, -1e18], [1e18]), "squares overflow": ([1e20, -1e20], [0.0])})
    for case, grads in cases.items():
        variables = [keras.Variable([0.5, 0.5]), keras.Variable([0.5])]
        optimizer = AdamW(learning_rate=0.1) if kind is None else create_optimizer(0.1, 10, optimizer=kind)
        optimizer.apply([tf.constant(g) for g in grads], variables)
        values = np.concatenate([v.numpy() for v in variables])
        assert np.isfinite(values).all(), case
        assert (not np.allclose(values, 0.5)) == (case in ("finite", "large, finite norm")), case


@pytest.mark.filterwarnings("error::UserWarning")
def test_a_variable_without_a_gradient_is_left_alone_without_a_warning():
    """The pooler has no gradient under a span or tagging head: skipped silently, as the original's optimizer
    does (Keras warns that the loss may be missing); the other variables are updated."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import AdamW

    variables = [keras.Variable([0.5, 0.5]), keras.Variable([0.5])]
    optimizer = AdamW(learning_rate=0.1)
    optimizer.apply([tf.constant([1.0, -2.0]), None], variables)
    assert not np.allclose(variables[0].numpy(), 0.5) and variables[1].numpy().tolist() == [0.5]


def test_weight_decay_spares_layer_norm_and_biases(tiny_config):
    """One update with zero gradients moves a weight only by its decay, lr * 0.01 * w: kernels and embeddings
    shrink, LayerNorm and biases stay (the update runs on the TF variables, whose names end in ':0'). Under LAMB the
    decay is the whole direction, which the trust ratio scales to the weight's norm: lr * w."""
    import tensorflow as tf

    from bert_tf import BertPretrainer
    from bert_tf.optimization import create_optimizer

    for kind in ("original_adamw", "adamw", "lamb"):
        model = BertPretrainer(tiny_config)
        model(_batch(tiny_config)[0])
        opt = create_optimizer(0.1, 10, optimizer=kind)
        before = {v.path: v.numpy() for v in model.trainable_variables}
        opt.apply([tf.zeros_like(v) for v in model.trainable_variables], model.trainable_variables)
        decayed = {v.path for v in model.trainable_variables if not np.array_equal(v.numpy(), before[v.path])}
        spared = set(before) - decayed
        assert spared and all(p.endswith(("bias", "gamma", "beta")) for p in spared), kind
        assert all(p.endswith(("kernel", "embeddings")) for p in decayed), kind
        assert "embeddings/word_embeddings" in decayed and "predictions/output_bias" in spared, kind
        for v in model.trainable_variables:
            if v.path in decayed:
                shrink = 0.1 if kind == "lamb" else 0.1 * 0.01
                np.testing.assert_allclose(v.numpy(), before[v.path] * (1 - shrink), rtol=1e-6, atol=1e-9)


# -------------------------------------------------------------------------------------------------- loss
def _batch(config, batch=8, seq=16, preds=4, seed=0):
    rng = np.random.default_rng(seed)
    x = {"input_word_ids": rng.integers(5, config.vocab_size, (batch, seq)).astype("int32"),
         "input_mask": np.ones((batch, seq), "int32"),
         "input_type_ids": rng.integers(0, 2, (batch, seq)).astype("int32"),
         "masked_lm_positions": np.sort(rng.integers(1, seq, (batch, preds)), 1).astype("int32")}
    weights = (rng.random((batch, preds)) < 0.6).astype("float32")
    weights[:, 0] = 1
    y = {"masked_lm_ids": rng.integers(5, config.vocab_size, (batch, preds)).astype("int32"),
         "masked_lm_weights": weights, "next_sentence_labels": rng.integers(0, 2, batch).astype("int32")}
    return x, y


def test_loss_is_the_originals_masked_lm_mean_plus_nsp(tiny_config):
    """google-research/bert run_pretraining.py: sum(weights * loss) / (sum(weights) + 1e-5) over the masked
    positions, plus the mean next-sentence loss. The 1e-5 shows in a batch whose weights sum to 2e-5."""
    from bert_tf import BertPretrainer

    model = BertPretrainer(tiny_config)
    model.compile(optimizer="sgd")
    x, y = _batch(tiny_config)
    out = model(x)

    def ce(logits, labels):  # numpy reference
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]

    nsp = ce(out["nsp_logits"].numpy(), y["next_sentence_labels"]).mean()
    tiny = np.zeros_like(y["masked_lm_weights"])
    tiny[0, 0] = 2e-5
    for weights in (y["masked_lm_weights"], tiny):
        model.lm_loss.reset_state()
        loss = float(model.compute_loss(x, dict(y, masked_lm_weights=weights), out))
        per_position = ce(out["mlm_logits"].numpy(), y["masked_lm_ids"])
        mlm = (per_position * weights).sum() / (weights.sum() + 1e-5)
        assert loss == pytest.approx(mlm + nsp, rel=1e-5)
        # the reported masked_lm_loss is the original's eval metric: the plain weighted mean
        assert float(model.lm_loss.result()) == pytest.approx(
            (per_position * weights).sum() / weights.sum(), rel=1e-5)


def test_gradient_accumulation_equals_the_whole_batch(tiny_config):
    """One SGD step on B examples equals one step accumulated over 2 and 4 micro-batches of B/N (the masked-LM
    denominator comes from the whole batch, so uneven masked counts per micro-batch do not matter)."""
    import keras

    from bert_tf import BertPretrainer

    x, y = _batch(tiny_config)
    results = []
    for steps in (1, 2, 4):
        keras.utils.set_random_seed(3)
        config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = BertPretrainer(config)
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        model.gradient_accumulation_steps = steps
        logs = model.train_step((x, y))
        results.append(([w.numpy() for w in model.trainable_weights], float(logs["loss"])))
    for weights, loss in results[1:]:
        assert loss == pytest.approx(results[0][1], rel=1e-6)
        for a, b in zip(results[0][0], weights):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_accumulation_leaves_what_the_loss_does_not_reach_as_the_whole_batch_does(tiny_config):
    """Fine-tuning heads under Keras-compiled losses: one accumulated step over 2 micro-batches equals the whole
    batch's step. A span-QA head reads the sequence output, never the pooler: with weight decay, the accumulated
    step changes exactly the weights the whole-batch step changes, and the pooler not at all. A tagger's loss is
    the mean over labelled pieces (sample weights), counted over the whole batch, not per micro-batch."""
    import keras

    from bert_tf.finetuning import task_losses
    from bert_tf.models import BertSpanQA, BertTokenClassifier

    x, _ = _batch(tiny_config)
    x = {key: x[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}
    batch, seq = x["input_word_ids"].shape
    rng = np.random.default_rng(0)
    spans = {name: rng.integers(0, seq, batch).astype(np.int32) for name in ("start_logits", "end_logits")}
    tags = {"logits": rng.integers(0, 3, (batch, seq)).astype(np.int32)}
    weights = np.zeros((batch, seq), np.float32)
    weights[:batch // 2, :3] = 1  # the micro-batches hold 6 and 2 labelled pieces: a per-micro mean would differ
    weights[batch // 2:, 0] = 1
    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    for build, y, sample_weight in ((lambda: BertSpanQA(config), spans, None),
                                    (lambda: BertTokenClassifier(config, num_classes=3, dropout_rate=0.0), tags,
                                     {"logits": weights})):
        results = []
        for steps in (1, 2):
            keras.utils.set_random_seed(3)
            model = build()
            before = {w.path: w.numpy() for w in model.trainable_weights}
            model.compile(optimizer=keras.optimizers.SGD(0.5, weight_decay=0.1), loss=task_losses(y))
            model.gradient_accumulation_steps = steps
            model.train_step((x, y) if sample_weight is None else (x, y, sample_weight))
            results.append({w.path: w.numpy() for w in model.trainable_weights})
        assert [path for path in before if "pooler" in path]
        for path, value in before.items():
            assert np.array_equal(results[1][path], value) == np.array_equal(results[0][path], value) == \
                ("pooler" in path), path
            np.testing.assert_allclose(results[1][path], results[0][path], rtol=1e-5, atol=1e-6, err_msg=path)


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "mean_with_sample_weight", "sum"])
def test_accumulation_with_keras_losses_and_sample_weights_equals_the_whole_batch(tiny_config, reduction):
    """A classifier compiled with Keras's own loss and uneven sample weights: each micro-batch's loss stands for
    what the loss divides by. Keras's default divides by the number of terms whatever the weights, so a micro-batch
    stands for 1/steps of the batch (weighing it by its weights' part instead moved the weights by 0.07 in a
    0.08 update); `mean_with_sample_weight` by the weights' sum; `sum` by nothing."""
    import keras

    from bert_tf.models import BertClassifier

    x, _ = _batch(tiny_config)
    x = {key: np.concatenate([x[key]] * 4)[:8] for key in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    weights = np.array([1, 1, 1, 1, 0, 0, 0, 1], np.float32)
    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    results = []
    for steps in (1, 2, 4):
        keras.utils.set_random_seed(3)
        model = BertClassifier(config, num_classes=3, dropout_rate=0.0)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss={"logits": loss})
        model.gradient_accumulation_steps = steps
        model.train_step((x, {"logits": labels}, {"logits": weights}))
        results.append([w.numpy() for w in model.trainable_weights])
    for weights_after in results[1:]:
        for a, b in zip(results[0], weights_after):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_one_device_and_mirrored_and_accumulation_give_the_same_training(tmp_path):
    """Two logical CPUs under MirroredStrategy (and gradient accumulation, and both) train exactly as one device
    on the same global batch, with gradient clipping active: the pretrainer, and a tagger under the fine-tuning
    losses whose labelled pieces fall unevenly over the replicas. A separate process: the CPU split must be configured
    before TensorFlow starts."""
    script = tmp_path / "replicas.py"
    script.write_text(REPLICAS_SCRIPT)
    out = forking.python([str(script)], cwd=ROOT, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    base = runs["one_device"]
    for name in ("mirrored", "accumulate_2", "mirrored_accumulate_2"):
        np.testing.assert_allclose(runs[name]["losses"], base["losses"], rtol=2e-5, err_msg=name)
        assert runs[name]["max_weight_diff"] < 1e-4, name
        tagger = runs["tagger_" + name]  # the mean over the global batch's labelled pieces, however it is split
        np.testing.assert_allclose(tagger["losses"], tagger["base"], rtol=2e-5, err_msg=name)
        assert tagger["max_weight_diff"] < 1e-4, name
    assert base["clipped"]  # the clip norm was below the gradient norm, so clipping order mattered


REPLICAS_SCRIPT = r'''
import json
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from bert_tf import BertConfig, BertEncoder, BertPretrainer, BertTokenClassifier
from bert_tf.finetuning import task_losses
from bert_tf.optimization import create_optimizer

config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
rng = np.random.default_rng(0)
B, S, P, STEPS = 8, 16, 4, 6
x = {"input_word_ids": rng.integers(5, 99, (STEPS * B, S)).astype("int32"),
     "input_mask": (np.arange(S) < rng.integers(8, S + 1, (STEPS * B, 1))).astype("int32"),
     "input_type_ids": rng.integers(0, 2, (STEPS * B, S)).astype("int32"),
     "masked_lm_positions": np.sort(rng.integers(1, 8, (STEPS * B, P)), 1).astype("int32")}
y = {"masked_lm_ids": rng.integers(5, 99, (STEPS * B, P)).astype("int32"),
     "masked_lm_weights": (rng.random((STEPS * B, P)) < 0.6).astype("float32"),
     "next_sentence_labels": rng.integers(0, 2, STEPS * B).astype("int32")}
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(B)
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

class Losses(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.losses = []
    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))

# a tagger whose labelled pieces crowd into the first half of each batch (the first replica's, the first
# micro-batch's): a per-replica mean of them would weigh the other half's few pieces up
tag_weights = np.zeros((STEPS * B, S), "float32")
tag_weights[np.arange(STEPS * B) % B < B // 2, :10] = 1
tag_weights[np.arange(STEPS * B) % B >= B // 2, 0] = 1
tags = {"logits": rng.integers(0, 3, (STEPS * B, S)).astype("int32")}
encoder_inputs = {key: x[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}
tag_dataset = tf.data.Dataset.from_tensor_slices((encoder_inputs, tags, {"logits": tag_weights})).batch(B)

def run(strategy, accumulate, kind="pretrainer"):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        if kind == "pretrainer":
            model = BertPretrainer(BertEncoder(config))
        else:
            model = BertTokenClassifier(BertEncoder(config), num_classes=3, dropout_rate=0.0)
        model.gradient_accumulation_steps = accumulate
        model.compile(optimizer=create_optimizer(1e-2, 10, 2, clipnorm=0.1),
                      loss=None if kind == "pretrainer" else task_losses(tags))
    losses = Losses()
    # loss logs are running means of the epoch
    model.fit(dataset if kind == "pretrainer" else tag_dataset, epochs=1, verbose=0, callbacks=[losses])
    return losses.losses, [w.numpy() for w in model.trainable_weights]

base_losses, base_weights = run(tf.distribute.get_strategy(), 1)
# is clipping active? the first step's gradient norm, one device
keras.utils.set_random_seed(1)
probe = BertPretrainer(BertEncoder(config)); probe.compile(optimizer="sgd")
xb, yb = next(iter(dataset))
with tf.GradientTape() as tape:
    loss = probe.compute_loss(xb, yb, probe(xb, training=True))
norm = float(tf.linalg.global_norm(tape.gradient(loss, probe.trainable_weights)))
runs = {"one_device": {"losses": base_losses, "clipped": norm > 0.1}}
for name, strategy, accumulate in [("mirrored", mirrored, 1), ("accumulate_2", tf.distribute.get_strategy(), 2),
                                   ("mirrored_accumulate_2", mirrored, 2)]:
    losses, weights = run(strategy, accumulate)
    runs[name] = {"losses": losses,
                  "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(base_weights, weights))}
tag_losses, tag_weights_one = run(tf.distribute.get_strategy(), 1, "tagger")
for name, strategy, accumulate in [("mirrored", mirrored, 1), ("accumulate_2", tf.distribute.get_strategy(), 2),
                                   ("mirrored_accumulate_2", mirrored, 2)]:
    losses, weights = run(strategy, accumulate, "tagger")
    runs["tagger_" + name] = {"losses": losses, "base": tag_losses, "max_weight_diff": max(
        float(np.abs(a - b).max()) for a, b in zip(tag_weights_one, weights))}
print(json.dumps(runs))
'''


def test_the_training_loop_traces_its_step_once(tiny_config, tmp_path):
    """`training.train` traces the model's step once: Keras's first-step state (a span model's tracker per loss,
    the optimizer's slots) is made before the trace, which tf.function would otherwise redo. The pretrainer, whose
    loss is its own, and a two-loss span model, each trained 3 steps from one trace."""
    import tensorflow as tf

    from bert_tf import BertPretrainer, BertSpanQA, training
    from bert_tf.finetuning import task_losses
    from bert_tf.optimization import create_optimizer

    x, y = _batch(tiny_config)
    spans = {name: np.arange(8, dtype=np.int32) for name in ("start_logits", "end_logits")}
    for cls, labels, loss in ((BertPretrainer, y, None), (BertSpanQA, spans, task_losses(spans))):
        traces = []

        class Counting(cls):
            def train_step(self, data):
                traces.append(data)
                return super().train_step(data)

        model = Counting(tiny_config)
        model.compile(optimizer=create_optimizer(1e-3, 3), loss=loss)
        data = tf.data.Dataset.from_tensor_slices((x if cls is BertPretrainer else _encoder_inputs(x), labels))
        logs = training.train(model, tf.distribute.get_strategy(), lambda context: data.repeat().batch(4),
                              str(tmp_path / cls.__name__), num_train_steps=3, global_batch_size=4,
                              steps_per_loop=3, save_checkpoints_steps=3)
        assert (len(traces), logs["step"]) == (1, 3), cls.__name__
        assert np.isfinite(logs["loss"]) and int(model.optimizer.iterations.numpy()) == 3


def _encoder_inputs(x):
    return {key: x[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}


def test_model_fit_on_the_pipeline_as_the_readme_shows(data, tmp_path):
    import keras
    import tensorflow as tf

    from bert_tf import BertEncoder, BertPretrainer, distribute, optimization, pretraining

    strategy = distribute.get_strategy("one_device")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = BertPretrainer(BertEncoder(_config(data)))
        model.compile(optimizer=optimization.create_optimizer(1e-3, num_train_steps=60, num_warmup_steps=6))
    dataset = pretraining.pretraining_dataset(str(data / "records" / "*.tfrecord"), SEQ, PREDS, batch_size=16)
    history = model.fit(dataset, steps_per_epoch=20, epochs=3, verbose=0,
                        callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))])
    logs = history.history
    assert set(logs) == {"loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                         "next_sentence_loss"}
    assert logs["loss"][-1] < logs["loss"][0] - 0.3
    assert int(model.optimizer.iterations) == 60
    assert isinstance(model.optimizer, optimization.AdamW) and tf.distribute.has_strategy() is False


# ----------------------------------------------------------------------------------------------------- CLI
def _cli(data, output_dir, *extra, steps=200):
    return [sys.executable, "-m", "bert_tf.cli.run_pretraining", f"--bert_config_file={data / 'bert_config.json'}",
            f"--input_file={data / 'records'}/*.tfrecord", f"--output_dir={output_dir}", "--do_train",
            f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}", "--train_batch_size=16",
            f"--num_train_steps={steps}", "--num_warmup_steps=20", "--learning_rate=1e-3",
            "--save_checkpoints_steps=20", "--iterations_per_loop=10", f"--vocab_file={data / 'vocab.txt'}", *extra]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _weights(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_ctrl_c_while_training_is_one_line_and_leaves_the_last_checkpoint(data, tmp_path):
    """Ctrl-C (SIGINT) arrives while TensorFlow runs the loop: the command says so in one line instead of the
    interrupted frames, dies of the signal (so a shell sees a Ctrl-C), and its last checkpoint is whole."""
    import signal

    import tensorflow as tf

    out = tmp_path / "run"
    proc = forking.popen(_cli(data, out)[1:], env=_env(), stderr=tmp_path / "stderr")
    try:
        deadline = time.time() + 300
        while not (out / "ckpt-20.index").exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        proc.kill()
        proc.wait()
    stderr = (tmp_path / "stderr").read_text()
    assert proc.returncode == -signal.SIGINT, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "run_pretraining: stopped by SIGINT (Ctrl-C)"
    assert "Traceback" not in stderr and not (out / "bert_model").exists()
    assert len(tf.train.list_variables(tf.train.latest_checkpoint(str(out)))) > 30  # ckpt-20 or later, whole


def test_kill_9_then_resume_reaches_the_uninterrupted_weights(data, tmp_path):
    """Train 200 steps uninterrupted (with --do_eval); separately start the same run, kill -9 it once its second
    checkpoint exists, restart it: it resumes there and ends with bit-identical weights. Dropout is on, so the
    dropout seeds and the input position are restored too. The uninterrupted run also shows learning."""
    full = forking.python(_cli(data, tmp_path / "full", "--do_eval", "--max_eval_steps=20")[1:], env=_env(),
                          timeout=600)
    assert full.returncode == 0, full.stderr[-3000:]
    killed_dir = tmp_path / "killed"
    proc = forking.popen(_cli(data, killed_dir)[1:], env=_env())
    deadline = time.time() + 300
    while not (killed_dir / "ckpt-40.index").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    assert not (killed_dir / "bert_model").exists(), "the run finished before it could be killed"
    resumed = forking.python(_cli(data, killed_dir)[1:], env=_env(), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    a, b = _weights(tmp_path / "full" / "bert_model" / "bert_model.ckpt"), \
        _weights(killed_dir / "bert_model" / "bert_model.ckpt")
    assert a.keys() == b.keys() and len(a) > 30
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)

    # learning: first vs last logged loop of the uninterrupted run, and the eval file like the original's
    logged = [line for line in full.stderr.splitlines() if "masked_lm_accuracy" in line and "step " in line]
    first, last = (dict(kv.rsplit(" ", 1) for kv in line.split(": ", 1)[1].split(", ")) for line in
                   (logged[0], logged[-1]))
    assert float(last["loss"]) < float(first["loss"]) - 0.5
    vocab_size = json.loads((data / "bert_config.json").read_text())["vocab_size"]
    assert float(last["masked_lm_accuracy"]) > 10 / vocab_size
    results = dict(line.split(" = ") for line in (tmp_path / "full" / "eval_results.txt").read_text().splitlines())
    assert set(results) >= {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                            "next_sentence_accuracy", "next_sentence_loss"}
    assert results["global_step"] == "200" and float(results["masked_lm_accuracy"]) > 10 / vocab_size
    # TensorBoard scalars, written without the tensorboard package
    import tensorflow as tf

    events = list((tmp_path / "full" / "train").glob("events.out.tfevents.*"))
    tags = {value.tag for event in tf.compat.v1.train.summary_iterator(str(events[0]))
            for value in event.summary.value}
    assert tags >= {"loss", "masked_lm_accuracy", "next_sentence_loss", "learning_rate", "examples_per_second",
                    "examples_per_second_per_replica"}
    # the export is a released-model directory that the original-format loader reads
    from bert_tf import checkpoints

    export = tmp_path / "full" / "bert_model"
    assert {"bert_config.json", "vocab.txt"} <= set(os.listdir(export))
    model = checkpoints.load_original(str(export / "bert_model.ckpt"), str(export / "bert_config.json"),
                                      model="pretrainer")
    np.testing.assert_array_equal(model.encoder.embeddings.word_embeddings.numpy(),
                                  a["bert/embeddings/word_embeddings"])


def test_records_that_do_not_fit_the_flags_are_refused_before_training(data, tmp_path, caplog):
    import gzip

    from bert_tf.pretraining import DataError, PretrainingOptions, check_records, run_pretraining

    config = _config(data)
    records = str(data / "records" / "*.tfrecord")
    with pytest.raises(DataError, match=r"generated with --max_seq_length=32, but training was given "
                                        r"--max_seq_length=64"):
        run_pretraining(config, records, str(tmp_path / "a"), PretrainingOptions(max_seq_length=64,
                                                                                 max_predictions_per_seq=PREDS))
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text("\n".join((data / "vocab.txt").read_text().splitlines()[:-1] + ["extra"]) + "\n")
    with pytest.raises(DataError, match="another vocabulary"):
        run_pretraining(config, records, str(tmp_path / "b"), PretrainingOptions(
            max_seq_length=SEQ, max_predictions_per_seq=PREDS, vocab_file=str(other_vocab)))
    # records without metadata (as the original generator writes them): the first record's lengths are checked
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(sorted((data / "records").glob("*.tfrecord"))[0], bare / "part.tfrecord")
    with pytest.raises(DataError, match="records hold max_predictions_per_seq=5"):
        run_pretraining(config, str(bare / "*"), str(tmp_path / "c"), PretrainingOptions(
            max_seq_length=SEQ, max_predictions_per_seq=20))
    # every directory's records are checked, not only the first's: a second set made with another vocabulary, or
    # without random next sentences, is refused by its own metadata
    second = tmp_path / "second"
    shutil.copytree(data / "records", second)
    metadata = json.loads((second / "metadata.json").read_text())
    both = f"{records},{second}/*.tfrecord"
    for change, objective, refusal in ((dict(vocab_sha256="0" * 64), "mlm", "another vocabulary"),
                                       (dict(flags={**metadata["flags"], "random_next_sentence": False}), "mlm_nsp",
                                        "--random_next_sentence=false")):
        (second / "metadata.json").write_text(json.dumps({**metadata, **change}))
        with pytest.raises(DataError, match=f"^{second / 'metadata.json'}: .*{refusal}"):
            run_pretraining(config, both, str(tmp_path / "e"), PretrainingOptions(
                max_seq_length=SEQ, max_predictions_per_seq=PREDS, vocab_file=str(data / "vocab.txt"),
                objective=objective, num_train_steps=1, num_warmup_steps=0, train_batch_size=8))
    # and one without metadata by its first record's lengths; gzip-compressed records with plain ones are refused
    from data_gen.generate import Options, generate, output_paths

    generate(str(data / "corpus.txt"), output_paths(str(tmp_path / "longer") + "/", 1), str(data / "vocab.txt"),
             Options(max_seq_length=2 * SEQ, max_predictions_per_seq=2 * PREDS, dupe_factor=1), progress=False)
    with pytest.raises(DataError, match=f"^{bare / 'part.tfrecord'}: records hold max_seq_length={SEQ}, but "):
        check_records([*map(str, (tmp_path / "longer").glob("*.tfrecord")), str(bare / "part.tfrecord")],
                      2 * SEQ, 2 * PREDS)
    (bare / "part.tfrecord.gz").write_bytes(gzip.compress((bare / "part.tfrecord").read_bytes()))
    with pytest.raises(DataError, match=f"mixes gzip-compressed records \\({bare / 'part.tfrecord.gz'}\\) with "
                                        f"plain ones \\({bare / 'part.tfrecord'}\\)"):
        check_records([str(bare / "part.tfrecord"), str(bare / "part.tfrecord.gz")], SEQ, PREDS)
    # an empty shard (data_gen writes some for a small corpus, 0 bytes, with --gzip too) is passed over for the next
    # one's first record, and takes no part in the compression's vote; the input reads the others as they are
    from bert_tf.pretraining import pretraining_dataset

    (bare / "empty.tfrecord").write_bytes(b"")
    check_records([str(bare / "empty.tfrecord"), str(bare / "part.tfrecord")], SEQ, PREDS)
    # a vocabulary given for records without metadata cannot be checked: a warning says so
    with caplog.at_level("WARNING"):
        check_records([str(bare / "part.tfrecord")], SEQ, PREDS, vocab_file=str(data / "vocab.txt"))
    assert f"{bare}: records without metadata.json naming their vocabulary" in caplog.text
    zipped = [str(bare / "empty.tfrecord"), str(bare / "part.tfrecord.gz")]
    check_records(zipped, SEQ, PREDS)
    read = sum(len(y["next_sentence_labels"]) for _, y in pretraining_dataset(zipped, SEQ, PREDS, 8, is_training=False))
    assert read == sum(len(y["next_sentence_labels"]) for _, y in pretraining_dataset(
        [str(bare / "part.tfrecord")], SEQ, PREDS, 8, is_training=False)) > 0
    with pytest.raises(DataError, match=f"^{bare / 'empty.tfrecord'}: contains no records$"):
        check_records([str(bare / "empty.tfrecord")], SEQ, PREDS)
    assert not any((tmp_path / name).exists() for name in "ace")
    # the CLI turns it into one line
    out = forking.python(_cli(data, tmp_path / "d", "--max_seq_length=64")[1:], env=_env(), timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("run_pretraining: error: ")
    assert "--max_seq_length=32" in out.stderr and "Traceback" not in out.stderr


def test_files_beside_the_metadata_that_it_does_not_list_are_refused_by_name(data, tmp_path):
    """A shard left beside the record set by an earlier run (here a 5-shard run's) matches the glob, but the
    metadata.json beside it lists the 4 shards of the run that wrote the directory: training refuses it, naming it,
    before any step; the listed shards alone are read."""
    from bert_tf.pretraining import DataError, PretrainingOptions, expand_files, run_pretraining

    records = tmp_path / "records"
    shutil.copytree(data / "records", records)
    stray = records / "pretraining-00004-of-00005.tfrecord"
    shutil.copy(records / "pretraining-00000-of-00004.tfrecord", stray)
    with pytest.raises(DataError, match=r"--input_file matches 1 file\(s\) in .*records that its metadata.json does "
                                        r"not list among the 4 shard\(s\) of the run that wrote it: "
                                        r"pretraining-00004-of-00005.tfrecord; delete them"):
        run_pretraining(_config(data), str(records / "*.tfrecord"), str(tmp_path / "out"),
                        PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=8,
                                           num_train_steps=1, num_warmup_steps=0, save_checkpoints_steps=1,
                                           iterations_per_loop=1))
    assert not (tmp_path / "out").exists()
    assert len(expand_files(str(records / "*-of-00004.tfrecord"))) == 4
    stray.unlink()
    assert [os.path.basename(f) for f in expand_files(str(records / "*"))] == [
        f"pretraining-0000{i}-of-00004.tfrecord" for i in range(4)]
    # in the order given, a glob's matches sorted, a repeat kept: the original's list of files
    shard = str(records / "pretraining-0000{}-of-00004.tfrecord").format
    assert expand_files(f"{shard(3)},{records}/*-0000[01]-*,{shard(3)}") == [shard(3), shard(0), shard(1), shard(3)]


def test_a_nan_loss_stops_training_and_keeps_the_last_good_state(data, tmp_path):
    import keras
    import tensorflow as tf

    from bert_tf import checkpoints, training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    config = dataclasses.replace(_config(data), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=10,
                                 num_warmup_steps=0, learning_rate=1e-3)
    batches = list(pretraining_dataset(str(data / "records" / "*"), SEQ, PREDS, 8, is_training=False).take(5))
    poisoned = [(x, dict(y)) for x, y in batches]
    poisoned[3][1]["masked_lm_weights"] = y_nan = tf.fill(tf.shape(poisoned[3][1]["masked_lm_weights"]), np.nan)
    assert not np.isfinite(y_nan.numpy()).any()

    def dataset_of(items):
        xs, ys = zip(*items)
        stack = lambda parts: {k: tf.stack([p[k] for p in parts]) for k in parts[0]}  # noqa: E731
        return lambda context: tf.data.Dataset.from_tensor_slices((stack(xs), stack(ys)))

    strategy = tf.distribute.get_strategy()
    keras.utils.set_random_seed(5)
    model = build_pretrainer(config, options)
    with pytest.raises(training.TrainingError, match=r"at step 4; .*last good state \(step 3\)"):
        training.train(model, strategy, dataset_of(poisoned), str(tmp_path / "nan"), num_train_steps=5,
                       global_batch_size=8, steps_per_loop=5, save_checkpoints_steps=5)
    keras.utils.set_random_seed(5)
    reference = build_pretrainer(config, options)
    training.train(reference, strategy, dataset_of(batches[:3]), str(tmp_path / "ref"), num_train_steps=3,
                   global_batch_size=8, steps_per_loop=5, save_checkpoints_steps=5)
    restored = build_pretrainer(config, options)
    checkpoints.restore_weights(restored, str(tmp_path / "nan"))
    for a, b in zip(reference.trainable_weights, restored.trainable_weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_step_is_an_update_and_skipped_updates_take_another_batch(data, tmp_path):
    """float16 with a loss scale far too high: the first updates overflow and are skipped (the scale halves each
    time). Steps count updates, as the original's global step counts its optimizer's: the run makes
    `num_train_steps` updates and its schedule ends at 0. A scale that cannot come down far enough in
    `MAX_SKIPPED` tries stops training with one line."""
    import keras
    import tensorflow as tf

    from bert_tf import optimization, training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=4,
                                 num_warmup_steps=0, learning_rate=1e-3, dtype="fp16")
    records = str(data / "records" / "*")

    def trained(scale, name):
        model = build_pretrainer(_config(data), options)
        inner = optimization.create_optimizer(1e-3, 4)
        model.compile(optimizer=optimization.LossScaleOptimizer(inner, initial_scale=scale), auto_scale_loss=False)
        training.train(model, tf.distribute.get_strategy(), lambda context: pretraining_dataset(
            records, SEQ, PREDS, 8, is_training=True), str(tmp_path / name), num_train_steps=4, global_batch_size=8,
                       steps_per_loop=4, save_checkpoints_steps=4)
        return model

    keras.utils.set_random_seed(1)
    model = trained(2.0 ** 40, "high")
    assert float(model.optimizer.dynamic_scale.numpy()) < 2.0 ** 30  # at least ten updates were skipped
    saved = tf.train.load_checkpoint(str(tmp_path / "high" / "ckpt-4"))
    assert saved.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    assert int(model.optimizer.iterations.numpy()) == 4
    assert float(optimization.current_learning_rate(model.optimizer)) == 0.0
    with pytest.raises(training.TrainingError, match=rf"gradients were not finite for {training.MAX_SKIPPED} "
                                                     r"batches in a row at step 1; .*last good state \(step 0\)"):
        trained(2.0 ** 127, "too_high")


def test_a_resume_by_skipping_batches_skips_those_of_skipped_updates_too(data, tmp_path):
    """Under MirroredStrategy the input position cannot be saved, so a resumed run skips the batches already read.
    With float16 updates skipped (a loss scale far too high), more batches than steps were read: the checkpoint
    counts them, and a run stopped at step 3 and resumed to 6 ends with the weights of one run straight to 6. A
    separate process: the CPU split must be configured before TensorFlow starts."""
    script = tmp_path / "resume.py"
    script.write_text(MIRRORED_RESUME_SCRIPT)
    out = forking.python([str(script), str(data), str(tmp_path)], cwd=ROOT, timeout=300,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["skipped"] > 0 and result["steps"] == result["updates"] == 6
    assert result["max_weight_diff"] == 0.0
    assert "update(s) skipped (gradients not finite), another batch read for each" in out.stderr


def test_a_checkpoint_written_before_batches_were_counted_resumes_and_counts_them_from_there(data, tmp_path,
                                                                                             monkeypatch):
    """A checkpoint without `batches_read` (as the loop wrote them before it counted them; here saved under another
    name) resumes, its batches taken as its steps, and the checkpoints written after it count them."""
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=4,
                                 num_warmup_steps=0)

    def train(steps):
        training.train(build_pretrainer(_config(data), options), tf.distribute.get_strategy(),
                       lambda context: pretraining_dataset(str(data / "records" / "*"), SEQ, PREDS, 8,
                                                           is_training=True), str(tmp_path), num_train_steps=steps,
                       global_batch_size=8, steps_per_loop=2, save_checkpoints_steps=2)

    with monkeypatch.context() as patch:
        patch.setattr(training, "BATCHES_KEY", "not_counted_then")
        train(2)
    assert not training._saved_has(str(tmp_path / "ckpt-2"), training.BATCHES_KEY)
    train(4)
    saved = tf.train.load_checkpoint(str(tmp_path / "ckpt-4"))
    assert saved.get_tensor(f"{training.BATCHES_KEY}/.ATTRIBUTES/VARIABLE_VALUE") == 4


MIRRORED_RESUME_SCRIPT = r'''
import json, sys
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from bert_tf import BertConfig, optimization, training
from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

data, out = sys.argv[1:]
config = BertConfig.from_json_file(f"{data}/bert_config.json")
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
options = PretrainingOptions(max_seq_length=32, max_predictions_per_seq=5, num_train_steps=6, num_warmup_steps=0,
                             learning_rate=1e-3, dtype="fp16")

def run(name, steps):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = build_pretrainer(config, options)
        inner = optimization.create_optimizer(1e-3, 6)
        model.compile(optimizer=optimization.LossScaleOptimizer(inner, initial_scale=2.0 ** 24),
                      auto_scale_loss=False)
    training.train(model, strategy, lambda context: pretraining_dataset(
        f"{data}/records/*", 32, 5, context.get_per_replica_batch_size(8), input_context=context, seed=3),
                   f"{out}/{name}", num_train_steps=steps, global_batch_size=8, steps_per_loop=3,
                   save_checkpoints_steps=3)
    return model

straight = run("straight", 6)
run("split", 3)
resumed = run("split", 6)
print(json.dumps({"skipped": int(np.log2(2.0 ** 24 / float(resumed.optimizer.dynamic_scale.numpy()))),
                  "steps": int(tf.train.load_checkpoint(f"{out}/split/ckpt-6").get_tensor(
                      "global_step/.ATTRIBUTES/VARIABLE_VALUE")),
                  "updates": int(resumed.optimizer.iterations.numpy()),
                  "max_weight_diff": max(float(np.abs(a.numpy() - b.numpy()).max())
                                         for a, b in zip(straight.trainable_weights, resumed.trainable_weights))}))
'''


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_multi_worker_mirrored_two_local_workers_train_together_and_resume(data, tmp_path):
    """Two worker processes on 127.0.0.1 (TF_CONFIG) train as one 2-replica job to step 10, then both restart and
    resume to step 20 (multi-worker iterators cannot be saved, so the input position is restored by skipping)."""
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}

    def run_workers(steps):
        args = _cli(data, tmp_path / "mw", "--strategy=multi_worker", "--num_warmup_steps=5", steps=steps)[3:]
        workers = [dict(id=f"worker_{index}_{steps}", module="bert_tf.cli.run_pretraining", args=args, cwd=ROOT,
                        env=dict(_env(), TF_CONFIG=json.dumps({"cluster": cluster,
                                                               "task": {"type": "worker", "index": index}})))
                   for index in range(2)]
        done = forking.run_forked(workers, str(tmp_path), parallel=2, timeout=400, env=_env())
        outs = [done[worker["id"]][2] for worker in workers]
        for worker, err in zip(workers, outs):
            assert done[worker["id"]][0] == 0, err[-3000:]
        return outs

    first = run_workers(10)
    assert all("step 10/10" in err and "training on 2 replica(s)" in err for err in first)
    second = run_workers(20)
    assert all("step 20/20" in err and "skipping 10 batches" in err for err in second)
    assert (tmp_path / "mw" / "ckpt-20.index").exists() and (tmp_path / "mw" / "bert_model").exists()
    assert {name for name in os.listdir(tmp_path / "mw") if "worker" in name} == set()  # none left by the worker


def test_mixed_precision_and_lamb_train(data, tmp_path):
    import keras
    import tensorflow as tf

    from bert_tf import optimization, training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    def dataset_fn(context):
        return pretraining_dataset(str(data / "records" / "*"), SEQ, PREDS, 8, seed=1)

    for dtype, optimizer in (("bf16", "adamw"), ("fp16", "lamb")):
        options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=4,
                                     num_warmup_steps=0, learning_rate=1e-3, dtype=dtype, optimizer=optimizer)
        keras.utils.set_random_seed(0)
        model = build_pretrainer(_config(data), options)
        assert model.encoder.embeddings.compute_dtype == {"bf16": "bfloat16", "fp16": "float16"}[dtype]
        assert isinstance(model.optimizer, optimization.LossScaleOptimizer) == (dtype == "fp16")
        logs = training.train(model, tf.distribute.get_strategy(), dataset_fn, str(tmp_path / dtype),
                              num_train_steps=4, global_batch_size=8, steps_per_loop=4, save_checkpoints_steps=4)
        assert logs["step"] == 4 and np.isfinite(logs["loss"])
        assert all(w.dtype == "float32" and np.isfinite(w.numpy()).all() for w in model.trainable_weights)


def test_a_ctrl_c_during_a_checkpoint_save_waits_for_the_save_then_interrupts(data, tmp_path, monkeypatch):
    """A SIGINT that arrives while `train` saves (here: inside the checkpoint manager's save, before the state file
    is written) lets the save finish, then interrupts: the checkpoint is whole and `latest_checkpoint` names it."""
    import signal

    import tensorflow as tf

    save = tf.train.CheckpointManager.save

    def interrupted_save(manager, *args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # as a Ctrl-C in the middle of the save
        return save(manager, *args, **kwargs)

    from bert_tf.pretraining import PretrainingOptions, run_pretraining

    monkeypatch.setattr(tf.train.CheckpointManager, "save", interrupted_save)
    options = PretrainingOptions(num_train_steps=4, max_seq_length=SEQ, max_predictions_per_seq=PREDS,
                                 train_batch_size=8, num_warmup_steps=0, save_checkpoints_steps=2,
                                 iterations_per_loop=2)
    # Python's own Ctrl-C handler, as in a command run from a terminal (a pytest-xdist worker ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_pretraining(_config(data), str(data / "records" / "*.tfrecord"), str(tmp_path / "run"), options)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith("ckpt-2")


def test_sigterm_saves_and_stops_then_resumes(data, tmp_path):
    """SIGTERM (what a preempted VM or a scheduler sends) while training: the loop in progress finishes, a
    checkpoint is written, `Preempted` says so, and the scalars of every loop are in the events file while the
    error is still in hand; the next run resumes from it."""
    import re
    import signal
    import threading

    import keras
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=40,
                                 num_warmup_steps=0)

    def dataset_fn(context):
        return pretraining_dataset(str(data / "records" / "*"), SEQ, PREDS, 8, seed=1)

    def train(model):
        return training.train(model, tf.distribute.get_strategy(), dataset_fn, str(tmp_path), num_train_steps=40,
                              global_batch_size=8, steps_per_loop=2, save_checkpoints_steps=100)

    keras.utils.set_random_seed(0)
    model = build_pretrainer(_config(data), options)

    def preempt():  # once training is under way; the handler is installed by then
        while int(model.optimizer.iterations) < 1:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=preempt, daemon=True).start()
    with pytest.raises(training.Preempted, match="SIGTERM at step") as stopped:
        train(model)
    at = int(re.search(r"SIGTERM at step (\d+)", str(stopped.value)).group(1))
    assert 2 <= at < 40 and tf.train.latest_checkpoint(str(tmp_path)).endswith(f"ckpt-{at}")
    assert signal.getsignal(signal.SIGTERM) == previous  # the previous handler is back
    events = list((tmp_path / "train").glob("events.out.tfevents.*"))
    logged = [event.step for event in tf.compat.v1.train.summary_iterator(str(events[0]))
              for value in event.summary.value if value.tag == "loss"]
    assert logged == list(range(2, at + 1, 2))  # flushed at each loop, not left to the writer's finalizer
    assert train(build_pretrainer(_config(data), options))["step"] == 40


def test_phase_two_starts_from_phase_one_weights_at_another_length(data, tmp_path):
    from data_gen.generate import Options, generate, output_paths

    from bert_tf import checkpoints
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, run_pretraining

    config = _config(data)
    common = dict(num_warmup_steps=0, learning_rate=1e-3, train_batch_size=8, save_checkpoints_steps=3,
                  iterations_per_loop=3, num_train_steps=3)
    run_pretraining(config, str(data / "records" / "*.tfrecord"), str(tmp_path / "phase1"),
                    PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, **common))
    generate(str(next(data.glob("corpus.txt"))), output_paths(str(tmp_path / "records64") + "/", 2),
             str(data / "vocab.txt"), Options(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1),
             progress=False)
    phase2 = PretrainingOptions(max_seq_length=64, max_predictions_per_seq=10,
                                init_checkpoint=str(tmp_path / "phase1"), **common)
    results = run_pretraining(config, str(tmp_path / "records64" / "*.tfrecord"), str(tmp_path / "phase2"), phase2)
    assert results["train"]["step"] == 3
    # a fresh optimizer, as the original's phase 2 (`init_from_checkpoint` of the trainable variables): its update
    # count, the schedule's step, starts at 0, not at phase 1's 3, and its moments at zero
    import tensorflow as tf

    saved = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "phase2")))
    assert saved.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 3
    fresh = build_pretrainer(config, phase2)
    fresh.optimizer.build(fresh.trainable_variables)
    checkpoints.restore_weights(fresh, str(tmp_path / "phase1"))
    assert int(fresh.optimizer.iterations.numpy()) == 0
    assert not any(np.any(v.numpy()) for v in fresh.optimizer.variables if v is not fresh.optimizer.iterations)
    # the weights phase 2 started from are phase 1's, whichever format they are read from
    from_object = build_pretrainer(config, phase2)
    checkpoints.restore_weights(from_object, str(tmp_path / "phase1"))
    from_original = build_pretrainer(config, phase2)
    checkpoints.restore_weights(from_original, str(tmp_path / "phase1" / "bert_model" / "bert_model.ckpt"))
    for a, b in zip(from_object.trainable_weights, from_original.trainable_weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # fine-tuning from the pretraining run's directory: its encoder, with the classifier's own fresh optimizer
    from bert_tf.models import BertClassifier, BertEncoder
    from bert_tf.optimization import create_optimizer

    classifier = BertClassifier(BertEncoder(config), num_classes=2)
    classifier.compile(optimizer=create_optimizer(1e-3, 10, 1))
    classifier.optimizer.build(classifier.trainable_variables)
    checkpoints.restore_weights(classifier, str(tmp_path / "phase1"))
    assert int(classifier.optimizer.iterations.numpy()) == 0
    for a, b in zip(classifier.encoder.weights, from_original.encoder.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(Exception, match="no checkpoint in this directory"):
        checkpoints.restore_weights(from_object, str(tmp_path / "records64"))


def test_input_is_sharded_by_file_or_by_record(data, caplog):
    """4 files: 2 pipelines get 2 files each; 8 pipelines get every 8th record of the interleaved stream (with a
    warning). Either way the pipelines' records are disjoint and together they are all the records."""
    import tensorflow as tf

    from bert_tf.pretraining import pretraining_dataset

    files = str(data / "records" / "*.tfrecord")
    everything = pretraining_dataset(files, SEQ, PREDS, 10_000, is_training=False)
    total = sum(int(tf.shape(x["input_word_ids"])[0]) for x, _ in everything)

    def rows(pipelines, index):
        context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=index)
        dataset = pretraining_dataset(files, SEQ, PREDS, 10_000, is_training=False, input_context=context)
        return [tuple(r) for x, _ in dataset for r in x["input_word_ids"].numpy().tolist()]

    for pipelines in (2, 8):
        caplog.clear()
        parts = [rows(pipelines, i) for i in range(pipelines)]
        assert sum(map(len, parts)) == total
        assert len(set().union(*map(set, parts))) == len(set(r for p in parts for r in p))
        assert all(len(p) > 0 for p in parts)
        assert ("sharding by record" in caplog.text) == (pipelines == 8)


def test_the_inputs_run_without_tf_datas_autotuning_keeping_their_other_options(data):
    """The training and evaluation inputs have autotuning off (`bert_tf.tf_data`), and turning it off keeps a
    dataset's other options."""
    import tensorflow as tf

    from bert_tf.pretraining import pretraining_dataset
    from bert_tf.tf_data import without_autotuning

    files = str(data / "records" / "*.tfrecord")
    for kind in (dict(), dict(is_training=False), dict(is_training=False, repeat_eval=True)):
        assert pretraining_dataset(files, SEQ, PREDS, 4, **kind).options().autotune.enabled is False, kind
    options = tf.data.Options()
    options.threading.private_threadpool_size = 3
    options.deterministic = False
    kept = without_autotuning(tf.data.Dataset.range(3).with_options(options)).options()
    assert (kept.autotune.enabled, kept.threading.private_threadpool_size, kept.deterministic) == (False, 3, False)


def test_under_mirrored_strategy_freeing_the_input_waits_for_no_autotuning_thread(data, tmp_path):
    """Two logical CPUs under MirroredStrategy: TensorFlow's multi-device iterator feeds each device from a dataset
    of its own, which `bert_tf.tf_data` makes without autotuning too (each one it makes is seen), so no free of the
    training input waits (with TensorFlow's own, a free at random waits out autotuning's period, here ~1 s). A
    separate process: the CPU split must be configured before TensorFlow starts."""
    script = tmp_path / "frees.py"
    script.write_text(FREES_SCRIPT)
    out = forking.python([str(script), str(data / "records" / "*.tfrecord"), str(SEQ), str(PREDS)], cwd=ROOT,
                         timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    frees, autotuned = json.loads(out.stdout.strip().splitlines()[-1])
    assert autotuned == [False] * 12  # 2 devices x 6 iterators
    assert len(frees) == 6 and max(frees) < 0.5, frees


FREES_SCRIPT = r'''
import json, sys, time
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
from tensorflow.python.data.ops import multi_device_iterator_ops
from bert_tf.pretraining import pretraining_dataset

files, seq, preds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
batches = strategy.distribute_datasets_from_function(
    lambda context: pretraining_dataset(files, seq, preds, 4, seed=1, input_context=context))
made, make = [], multi_device_iterator_ops._create_device_dataset  # the per-device datasets, as they are made
multi_device_iterator_ops._create_device_dataset = lambda *a, **k: made.append(make(*a, **k)) or made[-1]
frees = []
for _ in range(6):
    iterator, start = iter(batches), time.perf_counter()
    while time.perf_counter() - start < 1.5:  # autotuning's period is then 1.28 s, its next wake ~1 s away
        next(iterator)
    start = time.perf_counter()
    del iterator
    frees.append(time.perf_counter() - start)
print(json.dumps([frees, [dataset.options().autotune.enabled for dataset in made]]))
'''


def test_evaluation_reads_as_the_original_input_fn(data):
    """--do_eval's input is the original's eval input_fn (TFRecordDataset over the files in order, repeat, batches
    with drop_remainder), written here with tf.data alone: the same records in the same batches, the files read one
    after another and going round again past their end; without repeat_eval, every record once, in that order."""
    import tensorflow as tf

    from bert_tf.pretraining import expand_files, pretraining_dataset

    files = expand_files(str(data / "records" / "*.tfrecord"))
    total = sum(1 for _ in tf.data.TFRecordDataset(files))
    batch = 10 if total % 10 else 11
    steps = total // batch + 3  # past the end of the last file

    def original(records):
        spec = {"input_ids": tf.io.FixedLenFeature([SEQ], tf.int64)}
        parsed = records.map(lambda r: tf.io.parse_single_example(r, spec)["input_ids"])
        return parsed.repeat().batch(batch, drop_remainder=True).take(steps)

    ours = pretraining_dataset(files, SEQ, PREDS, batch, is_training=False, repeat_eval=True).take(steps)
    want = [b.numpy() for b in original(tf.data.TFRecordDataset(files))]
    got = [x["input_word_ids"].numpy() for x, _ in ours]
    assert len(got) == steps and all(b.shape[0] == batch for b in got)
    np.testing.assert_array_equal(np.concatenate(got), np.concatenate(want))
    once = np.concatenate([x["input_word_ids"].numpy() for x, _ in pretraining_dataset(files, SEQ, PREDS, batch,
                                                                                          is_training=False)])
    assert len(once) == total and total % batch  # a short last batch
    np.testing.assert_array_equal(once, np.concatenate(want)[:total])


def test_jit_compiled_training_step_matches_the_plain_one(data, tmp_path):
    import keras
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    config = dataclasses.replace(_config(data), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=3,
                                 num_warmup_steps=0, learning_rate=1e-3)
    weights = []
    for jit in (False, True):
        keras.utils.set_random_seed(0)
        model = build_pretrainer(config, options)
        training.train(model, tf.distribute.get_strategy(),
                       lambda c: pretraining_dataset(str(data / "records" / "*"), SEQ, PREDS, 8, seed=1),
                       str(tmp_path / str(jit)), num_train_steps=3, global_batch_size=8, steps_per_loop=3,
                       save_checkpoints_steps=3, jit_compile=jit)
        weights.append([w.numpy() for w in model.trainable_weights])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)  # XLA fuses and reorders float sums


def test_evaluation_alone_reports_the_step_of_the_checkpoint_it_evaluates(data, tmp_path, caplog):
    """eval_results.txt's global_step is the trained step also when nothing is trained in the evaluating run:
    from the run's own checkpoint, and from the released-layout bert_model.ckpt (which carries the original's
    global_step); weights that record no step (HF) leave the line out rather than claim 0."""
    from bert_tf import BertEncoder, checkpoints
    from bert_tf.pretraining import PretrainingOptions, run_pretraining

    config, records = _config(data), str(data / "records" / "*.tfrecord")
    common = dict(max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=8, num_warmup_steps=0,
                  save_checkpoints_steps=7, iterations_per_loop=7, max_eval_steps=2, eval_batch_size=8)
    run_pretraining(config, records, str(tmp_path / "run"), PretrainingOptions(num_train_steps=7, **common))
    evaluate = PretrainingOptions(do_train=False, do_eval=True, **common)

    def step_written(output_dir, options):
        scores = run_pretraining(config, records, str(tmp_path / output_dir), options)["eval"]
        lines = (tmp_path / output_dir / "eval_results.txt").read_text().splitlines()
        return scores.get("global_step"), [line for line in lines if line.startswith("global_step")]

    assert step_written("run", evaluate) == (7, ["global_step = 7"])
    released = str(tmp_path / "run" / "bert_model" / "bert_model.ckpt")
    assert step_written("heldout", dataclasses.replace(evaluate, init_checkpoint=released)) == (7, ["global_step = 7"])
    with pytest.raises(ValueError, match=r"--do_eval alone evaluates a trained model, and there is none"):
        step_written("fresh", evaluate)  # untrained weights' figures would be written as a model's
    checkpoints.save_original(BertEncoder(config), tmp_path / "nostep" / "bert_model.ckpt")
    assert step_written("other", dataclasses.replace(evaluate, init_checkpoint=str(
        tmp_path / "nostep" / "bert_model.ckpt"))) == (None, [])
    # every record once (the quickstart's held-out figures): the end of the data is expected, not warned about
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert step_written("run", dataclasses.replace(evaluate, max_eval_steps=None)) == (7, ["global_step = 7"])
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    # --init_checkpoint beside a run's own checkpoint is not read, as the original's Estimator: a warning says so
    with caplog.at_level("WARNING"):
        assert step_written("run", dataclasses.replace(evaluate, init_checkpoint=str(
            tmp_path / "nostep" / "bert_model.ckpt"))) == (7, ["global_step = 7"])
    assert "nostep/bert_model.ckpt is not read: evaluating" in caplog.text
