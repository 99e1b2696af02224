"""Step parity with the original google-research/bert training: our pretraining and run_classifier paths against
`tests/reference/original_bert.py`, a float64 numpy rewrite of the original's model_fn, losses and
`AdamWeightDecayOptimizer` that shares no code with bert_tf.

Both sides start from the same original-format checkpoint (written here with TensorFlow's raw SaveV2, not with
our writer), see the same records in the same order, with dropout off and one replica. After 1, 10 and 100 updates
every weight must equal the reference's within 1e-5 of the tensor's largest value. What remains is float32
rounding on our side (the reference is float64); its measured size is in docs/training.md.
"""

import collections

import numpy as np
import pytest

from tests.reference import original_bert as ref

SEQ, PREDS, BATCH, STEPS = 24, 4, 8, 100
CHECK_AT = (1, 10, 100)
RTOL = 1e-5
SMALL = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
         "max_position_embeddings": 32, "type_vocab_size": 2}


def _config(vocab_size):
    from bert_tf import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_act="gelu_tanh", hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, **SMALL)


def _initial_weights(vocab_size, heads, seed=0):
    """Random weights by original name; LayerNorm and biases away from 1 and 0 so that every term matters."""
    rng = np.random.default_rng(seed)
    h, inter = SMALL["hidden_size"], SMALL["intermediate_size"]
    shapes = {"bert/embeddings/word_embeddings": (vocab_size, h),
              "bert/embeddings/token_type_embeddings": (SMALL["type_vocab_size"], h),
              "bert/embeddings/position_embeddings": (SMALL["max_position_embeddings"], h),
              "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
              "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,)}
    for i in range(SMALL["num_hidden_layers"]):
        n = f"bert/encoder/layer_{i}/"
        for name in ("query", "key", "value"):
            shapes |= {n + f"attention/self/{name}/kernel": (h, h), n + f"attention/self/{name}/bias": (h,)}
        shapes |= {n + "attention/output/dense/kernel": (h, h), n + "attention/output/dense/bias": (h,),
                   n + "attention/output/LayerNorm/gamma": (h,), n + "attention/output/LayerNorm/beta": (h,),
                   n + "intermediate/dense/kernel": (h, inter), n + "intermediate/dense/bias": (inter,),
                   n + "output/dense/kernel": (inter, h), n + "output/dense/bias": (h,),
                   n + "output/LayerNorm/gamma": (h,), n + "output/LayerNorm/beta": (h,)}
    shapes |= heads(h)
    weights = {}
    for name, shape in shapes.items():
        if name.endswith("gamma"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(("beta", "bias")):
            value = 0.05 * rng.standard_normal(shape)
        else:
            value = 0.2 * rng.standard_normal(shape)
        weights[name] = value.astype(np.float32).astype(np.float64)  # what a float32 checkpoint holds
    return weights


def _write_checkpoint(weights, prefix):
    """An original TF1 (name -> tensor) checkpoint, written with TensorFlow's SaveV2 op alone."""
    import tensorflow as tf

    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n], tf.float32) for n in names])
    return prefix


def _read_checkpoint(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _compare(ours, reference, initial, lr_sum, where):
    """Every reference weight is in ours and equal within RTOL of the tensor's largest value; returns the worst
    relative difference and the worst difference as a share of the update (reference - initial).

    Attention key biases are the exception: softmax ignores a shift shared by all of a query's scores, so their
    gradient is exactly 0 and the reference never moves them. In float32 (ours, and the original's alike) it is
    rounding noise, which Adam divides by sqrt(v) + 1e-6 instead of leaving at ~0. A real gradient moves a weight
    by about the summed learning rate `lr_sum`; noise below 1e-8 moves it by at most 1 % of that, the bound here.
    """
    worst = worst_update = 0.0
    for name, want in reference.items():
        got = ours[name].astype(np.float64)
        if name.endswith("attention/self/key/bias"):
            assert np.abs(want - initial[name]).max() < 1e-12, name  # the reference's own zero gradient
            drift = np.abs(got - initial[name]).max()
            assert drift <= 0.01 * lr_sum, f"{where}: {name} moved by {drift:.2e} (bound {0.01 * lr_sum:.2e})"
            continue
        scale = np.abs(want).max()
        error = np.abs(got - want).max() / scale
        assert error <= RTOL, f"{where}: {name} differs by {error:.2e} of its largest value (bound {RTOL})"
        worst = max(worst, error)
        moved = np.abs(want - initial[name]).max()
        if moved > 0:
            worst_update = max(worst_update, np.abs(got - want).max() / moved)
    return worst, worst_update


# --------------------------------------------------------------------------------------- the reference itself
def test_reference_gradients_match_finite_differences():
    """The hand-written backward pass of the reference is the derivative of its forward pass (float64)."""
    rng = np.random.default_rng(1)
    vocab = 23

    def heads(h):
        return {"cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
                "cls/predictions/transform/LayerNorm/gamma": (h,), "cls/predictions/transform/LayerNorm/beta": (h,),
                "cls/predictions/output_bias": (vocab,), "cls/seq_relationship/output_weights": (2, h),
                "cls/seq_relationship/output_bias": (2,), "output_weights": (3, h), "output_bias": (3,)}

    p = _initial_weights(vocab, heads, seed=2)
    seq = 7
    mask = np.ones((3, seq))
    mask[1, 5:] = 0
    batch = {"input_ids": rng.integers(0, vocab, (3, seq)), "input_mask": mask,
             "segment_ids": (np.arange(seq)[None] >= 3).astype(int).repeat(3, 0),
             "masked_lm_positions": rng.integers(0, 5, (3, 2)), "masked_lm_ids": rng.integers(0, vocab, (3, 2)),
             "masked_lm_weights": np.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]),
             "next_sentence_labels": np.array([0, 1, 1]), "label_ids": np.array([2, 0, 1])}
    for loss_fn in (ref.pretraining_loss_and_grads, ref.classifier_loss_and_grads):
        _, grads = loss_fn(p, SMALL, batch)
        for name, grad in grads.items():
            flat = p[name].reshape(-1)
            for index in rng.choice(flat.size, size=min(3, flat.size), replace=False):
                saved = flat[index]
                flat[index] = saved + 1e-6
                up = loss_fn(p, SMALL, batch)[0]
                flat[index] = saved - 1e-6
                down = loss_fn(p, SMALL, batch)[0]
                flat[index] = saved
                numeric = (up - down) / 2e-6
                assert grad.reshape(-1)[index] == pytest.approx(numeric, rel=1e-5, abs=1e-8), (loss_fn, name)


def test_reference_optimizer_is_adam_without_bias_correction():
    """One update of the reference from zero moments: m / (sqrt(v) + eps) = g (1 - b1) / (|g| sqrt(1 - b2) + eps),
    plus the decay on a kernel and none on a bias or LayerNorm, at the warmup rate."""
    opt = ref.AdamWeightDecay(1e-2, num_train_steps=10, num_warmup_steps=4)
    opt.step = 2  # rate 1e-2 * 2 / 4
    params = {"a/kernel": np.array([1.0, -2.0]), "a/bias": np.array([1.0]), "LayerNorm/gamma": np.array([3.0])}
    grads = {"a/kernel": np.array([0.3, -0.4]), "a/bias": np.array([0.1]), "LayerNorm/gamma": None}
    out = ref.AdamWeightDecay.apply(opt, dict(params), grads)
    adam = 0.1 * np.array([0.3, -0.4, 0.1]) / (np.sqrt(0.001) * np.abs([0.3, -0.4, 0.1]) + 1e-6)
    np.testing.assert_allclose(out["a/kernel"], params["a/kernel"] - 5e-3 * (adam[:2] + 0.01 * params["a/kernel"]))
    np.testing.assert_allclose(out["a/bias"], params["a/bias"] - 5e-3 * adam[2:])
    assert out["LayerNorm/gamma"].tolist() == [3.0]


# ------------------------------------------------------------------------------------------------ pretraining
@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """10 batches of pretraining records from real English (installed docstrings), one file, in a fixed order."""
    import tensorflow as tf

    from bench.common import docstring_lines
    from data_gen.generate import Options, generate, output_paths

    root = tmp_path_factory.mktemp("parity")
    lines = docstring_lines()[:800]
    (root / "corpus.txt").write_text("\n".join(line + ("\n" if i % 7 == 6 else "") for i, line in enumerate(lines)),
                                     encoding="utf-8")
    words = collections.Counter(w for line in lines for w in line.lower().split() if w.isalpha() and len(w) > 1)
    chars = sorted({c for line in lines for c in line.lower() if not c.isspace()})
    vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
                               + [w for w, _ in words.most_common(150)]))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    generate(str(root / "corpus.txt"), output_paths(str(root / "all") + "/", 1), str(root / "vocab.txt"),
             Options(max_seq_length=SEQ, max_predictions_per_seq=PREDS, dupe_factor=1), progress=False)
    [source] = tf.io.gfile.glob(str(root / "all" / "*.tfrecord*"))
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(source).take(10 * BATCH)]
    assert len(serialized) == 10 * BATCH
    path = str(root / "records.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in serialized:
            writer.write(record)
    parsed = collections.defaultdict(list)
    for record in serialized:
        example = tf.train.Example.FromString(record)
        for key, feature in example.features.feature.items():
            parsed[key].append(list(feature.int64_list.value) or list(feature.float_list.value))
    arrays = {key: np.array(value) for key, value in parsed.items()}
    batches = [{key: value[i * BATCH:(i + 1) * BATCH] for key, value in arrays.items()} for i in range(10)]
    return path, len(vocab), batches


def _pretraining_heads(vocab_size):
    def heads(h):
        return {"cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
                "cls/predictions/transform/LayerNorm/gamma": (h,), "cls/predictions/transform/LayerNorm/beta": (h,),
                "cls/predictions/output_bias": (vocab_size,), "cls/seq_relationship/output_weights": (2, h),
                "cls/seq_relationship/output_bias": (2,)}
    return heads


def test_pretraining_steps_match_the_original(records, tmp_path):
    """`training.train` on a `build_pretrainer` model (the run_pretraining path) against the original's
    model_fn + create_optimizer, no warmup (so the first update moves every weight), 100 updates with decay."""
    import keras
    import tensorflow as tf

    from bert_tf import checkpoints, training
    from bert_tf.pretraining import PretrainingOptions, build_pretrainer, pretraining_dataset

    path, vocab_size, batches = records
    initial = _initial_weights(vocab_size, _pretraining_heads(vocab_size))
    prefix = _write_checkpoint(initial, str(tmp_path / "init" / "bert_model.ckpt"))
    lr, warmup = 1e-4, 0

    options = PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=BATCH,
                                 learning_rate=lr, num_train_steps=STEPS, num_warmup_steps=warmup,
                                 init_checkpoint=prefix)
    keras.utils.set_random_seed(0)
    model = build_pretrainer(_config(vocab_size), options)
    ours = {}

    def progress(step, scalars):
        del scalars
        if step in CHECK_AT:
            ours[step] = _read_checkpoint(checkpoints.save_original(model, str(tmp_path / f"at{step}" / "ckpt")))

    training.train(model, tf.distribute.get_strategy(),
                   lambda context: pretraining_dataset(path, SEQ, PREDS, BATCH, is_training=False).repeat(),
                   str(tmp_path / "run"), num_train_steps=STEPS, global_batch_size=BATCH, steps_per_loop=1,
                   save_checkpoints_steps=STEPS, init_checkpoint=prefix, progress=progress)

    params, opt = dict(initial), ref.AdamWeightDecay(lr, STEPS, warmup)
    for step in range(1, STEPS + 1):
        _, grads = ref.pretraining_loss_and_grads(params, SMALL, batches[(step - 1) % len(batches)])
        params = opt.apply(params, grads)
        if step in CHECK_AT:
            lr_sum = sum(ref.learning_rate(t, lr, STEPS, warmup) for t in range(step))
            worst, update = _compare(ours[step], params, initial, lr_sum, f"pretraining step {step}")
            print(f"pretraining after {step} updates: weights within {worst:.2e} relative, updates within "
                  f"{update:.2e}")
    assert set(ours[STEPS]) == set(params)


# ----------------------------------------------------------------------------------------------- run_classifier
WORDS = ("the cat dog sat ran on under a mat log big small red blue bird saw heard it was not very quite "
         "happy sad").split()


def _pair_task(root, rng, count=16):
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    pairs = []
    for i in range(count):
        a = list(rng.choice(WORDS, size=rng.integers(3, 8)))
        b = list(rng.choice(WORDS, size=rng.integers(2, 7)))
        label = int(rng.integers(0, 2))
        rows.append(f"{label}\t{i}\t{100 + i}\t{' '.join(a)}\t{' '.join(b)}")
        pairs.append((a, b, label))
    (root / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return pairs


def test_run_classifier_steps_match_the_original(tmp_path):
    """`run_classifier` (library function behind the CLI) on a tiny MRPC-format task: the whole training set is one
    batch, so every step sees the same examples in any order; 10 % warmup, then linear decay."""
    from bert_tf import checkpoints
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.classification import run_classifier
    from bert_tf.tasks import get_task

    rng = np.random.default_rng(3)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(WORDS)
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    pairs = _pair_task(tmp_path, rng)
    initial = _initial_weights(len(vocab), lambda h: {"output_weights": (2, h), "output_bias": (2,)}, seed=4)
    prefix = _write_checkpoint(initial, str(tmp_path / "init" / "bert_model.ckpt"))

    # the original's features: [CLS] a [SEP] b [SEP], segment 0 then 1, zero padding
    index = {word: i for i, word in enumerate(vocab)}
    ids, types, mask = np.zeros((len(pairs), SEQ), int), np.zeros((len(pairs), SEQ), int), np.zeros((len(pairs), SEQ))
    for row, (a, b, _) in enumerate(pairs):
        tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
        ids[row, :len(tokens)] = [index[t] for t in tokens]
        types[row, len(a) + 2:len(tokens)] = 1
        mask[row, :len(tokens)] = 1
    batch = {"input_ids": ids, "segment_ids": types, "input_mask": mask,
             "label_ids": np.array([label for _, _, label in pairs])}

    lr = 5e-5
    options = FinetuneOptions(do_train=True, max_seq_length=SEQ, train_batch_sizes=len(pairs),
                              learning_rates=(lr,), num_train_epochs=STEPS, warmup_proportion=0.1, dropout_rate=0.0,
                              init_checkpoint=prefix, iterations_per_loop=1)
    ours = {}

    def capture(model, step, scalars):
        if step in CHECK_AT:
            ours[step] = _read_checkpoint(checkpoints.save_original(model, str(tmp_path / f"at{step}" / "ckpt")))

    run_classifier(get_task("mrpc"), _config(len(vocab)), str(tmp_path / "vocab.txt"), str(tmp_path / "out"),
                   options, data_dir=str(tmp_path), progress=capture)

    params, opt = dict(initial), ref.AdamWeightDecay(lr, STEPS, int(STEPS * 0.1))
    for step in range(1, STEPS + 1):
        _, grads = ref.classifier_loss_and_grads(params, SMALL, batch)
        params = opt.apply(params, grads)
        if step in CHECK_AT:
            lr_sum = sum(ref.learning_rate(t, lr, STEPS, int(STEPS * 0.1)) for t in range(step))
            worst, update = _compare(ours[step], params, initial, lr_sum, f"run_classifier step {step}")
            print(f"run_classifier after {step} updates: weights within {worst:.2e} relative, updates within "
                  f"{update:.2e}")
    assert set(ours[STEPS]) == set(params)


# ------------------------------------------------------------------------------------------------ task losses
def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _ce(logits, labels):
    return -np.take_along_axis(_log_softmax(logits), labels[..., None], -1)[..., 0]


def test_task_losses_are_the_originals_on_the_same_logits(tiny_config):
    """The fine-tuning losses as `finetuning.fit` compiles them, on given logits: classification and multiple
    choice the mean cross-entropy (run_classifier.py), SQuAD (mean start + mean end) / 2 (run_squad.py), tagging
    the mean over the labelled word pieces (HF's ignore-index mean; padding must not shrink it), regression the
    mean squared error."""
    import keras

    from bert_tf import BertEncoder
    from bert_tf.finetuning import task_losses
    from bert_tf.tasks.span_qa import SPAN_LOSS_WEIGHTS
    from bert_tf.models import BertClassifier, BertMultipleChoice, BertSpanQA, BertTokenClassifier

    rng = np.random.default_rng(5)
    batch, seq = 6, 9
    labels_cls = rng.integers(0, 3, batch).astype("int32")
    start, end = rng.integers(0, seq, batch).astype("int32"), rng.integers(0, seq, batch).astype("int32")
    tags = rng.integers(0, 4, (batch, seq)).astype("int32")
    tag_weights = (rng.random((batch, seq)) < 0.3).astype("float32")
    tag_weights[0, 0] = 1.0
    scores = rng.normal(size=batch).astype("float32")
    cases = [
        (BertClassifier(BertEncoder(tiny_config), num_classes=3), {"logits": labels_cls}, None, None,
         {"logits": rng.normal(size=(batch, 3))}, lambda p: _ce(p["logits"], labels_cls).mean()),
        (BertMultipleChoice(BertEncoder(tiny_config)), {"logits": labels_cls}, None, None,
         {"logits": rng.normal(size=(batch, 3))}, lambda p: _ce(p["logits"], labels_cls).mean()),
        (BertSpanQA(BertEncoder(tiny_config)), {"start_logits": start, "end_logits": end}, SPAN_LOSS_WEIGHTS, None,
         {"start_logits": rng.normal(size=(batch, seq)), "end_logits": rng.normal(size=(batch, seq))},
         lambda p: (_ce(p["start_logits"], start).mean() + _ce(p["end_logits"], end).mean()) / 2),
        (BertTokenClassifier(BertEncoder(tiny_config), num_classes=4), {"logits": tags}, None, {"logits": tag_weights},
         {"logits": rng.normal(size=(batch, seq, 4))},
         lambda p: (_ce(p["logits"], tags) * tag_weights).sum() / tag_weights.sum()),
        (BertClassifier(BertEncoder(tiny_config), num_classes=1), {"logits": scores}, None, None,
         {"logits": rng.normal(size=(batch, 1))}, lambda p: ((p["logits"][:, 0] - scores) ** 2).mean()),
    ]
    for model, labels, loss_weights, sample_weight, logits, want in cases:
        model.compile(optimizer="sgd", loss=task_losses(labels), loss_weights=loss_weights)
        y_pred = {k: keras.ops.convert_to_tensor(v.astype("float32")) for k, v in logits.items()}
        got = float(model.compute_loss(x=None, y=labels, y_pred=y_pred, sample_weight=sample_weight))
        assert got == pytest.approx(want(logits), rel=1e-5), type(model).__name__
