"""The optimizers: the original BERT optimizer against the independent reference, and checkpoints that resume only
with the optimizer that wrote them."""

import numpy as np
import pytest

from tests.reference import original_bert as ref


def test_original_adamw_is_the_originals_update_with_clipping_and_schedule():
    """create_optimizer("original_adamw") over 8 updates (warmup 3 of 8 steps, gradients large enough to be clipped
    in some steps) against the reference `AdamWeightDecayOptimizer` + `clip_by_global_norm`, in float64."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import create_optimizer

    rng = np.random.default_rng(0)
    start = {"layer/dense/kernel": rng.normal(size=(5, 7)), "layer/dense/bias": rng.normal(size=7),
             "layer/LayerNorm/gamma": 1 + 0.1 * rng.normal(size=7)}
    grads = [{k: rng.normal(size=v.shape) * (0.05 if t % 2 else 1.0) for k, v in start.items()} for t in range(8)]
    assert any(np.sqrt(sum((g ** 2).sum() for g in step.values())) < 1 for step in grads)  # some steps unclipped
    variables = [keras.Variable(v, dtype="float64", name=k.split("/")[-1]) for k, v in start.items()]
    opt = create_optimizer(1e-2, num_train_steps=8, num_warmup_steps=3, optimizer="original_adamw")
    for g in grads:
        opt.apply([tf.constant(g[k], tf.float64) for k in start], variables)

    want, reference = dict(start), ref.AdamWeightDecay(1e-2, 8, 3)
    for g in grads:
        want = reference.apply(want, g)
    # float64 variables: only the learning rate is float32 (as the original's schedule), 3e-8 of each update, and
    # the updates add up to < 0.3 per weight here
    for variable, name in zip(variables, start):
        np.testing.assert_allclose(variable.numpy(), want[name], rtol=0, atol=1e-8, err_msg=name)
    # bias-corrected Keras AdamW takes other steps from the same gradients
    variables_adamw = [keras.Variable(v, dtype="float64", name=k.split("/")[-1]) for k, v in start.items()]
    adamw = create_optimizer(1e-2, num_train_steps=8, num_warmup_steps=3, optimizer="adamw")
    for g in grads:
        adamw.apply([tf.constant(g[k], tf.float64) for k in start], variables_adamw)
    assert not np.allclose(variables_adamw[0].numpy(), want["layer/dense/kernel"], rtol=1e-3)


def test_lamb_is_the_papers_with_the_decay_inside_the_trust_ratio_and_layer_norm_and_biases_left_out():
    """create_optimizer("lamb") over 8 updates (warmup 3 of 8, some steps clipped) against the reference LAMB in
    float64: a kernel, a kernel starting at zero (trust ratio 1), a bias and a LayerNorm gamma (no decay, no ratio).
    Keras's own Lamb, which decays apart from the ratio and scales every variable, ends elsewhere."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import NO_DECAY_PATTERN, create_optimizer, warmup_linear_decay

    rng = np.random.default_rng(1)
    start = {"layer/dense/kernel": rng.normal(size=(5, 7)), "head/dense/kernel": np.zeros((7, 3)),
             "layer/dense/bias": rng.normal(size=7), "layer/LayerNorm/gamma": 1 + 0.1 * rng.normal(size=7)}
    grads = [{k: rng.normal(size=v.shape) * (0.05 if t % 2 else 1.0) for k, v in start.items()} for t in range(8)]

    def run(optimizer):
        variables = [keras.Variable(v, dtype="float64", name=k.split("/")[-1]) for k, v in start.items()]
        for g in grads:
            optimizer.apply([tf.constant(g[k], tf.float64) for k in start], variables)
        return {name: variable.numpy() for name, variable in zip(start, variables)}

    ours = run(create_optimizer(1e-2, num_train_steps=8, num_warmup_steps=3, optimizer="lamb"))
    want, reference = dict(start), ref.Lamb(1e-2, 8, 3)
    for g in grads:
        want = reference.apply(want, g)
    # float64 variables; the learning rate is float32, as the schedule makes it (3e-8 of each update)
    for name in start:
        np.testing.assert_allclose(ours[name], want[name], rtol=0, atol=1e-8, err_msg=name)
    assert np.abs(want["head/dense/kernel"]).max() > 1e-3  # it moved: ratio 1 while its norm was 0

    keras_lamb = keras.optimizers.Lamb(learning_rate=warmup_linear_decay(1e-2, 8, 3), weight_decay=0.01,
                                       global_clipnorm=1.0)
    keras_lamb.exclude_from_weight_decay(var_names=[NO_DECAY_PATTERN])
    theirs = run(keras_lamb)
    for name in ("layer/dense/kernel", "layer/LayerNorm/gamma"):
        assert not np.allclose(theirs[name], want[name], rtol=0, atol=1e-5), name


@pytest.mark.parametrize("clip_norm", [1.0, 73.7964664525592, 1e6])
def test_clipping_is_the_originals_clip_by_global_norm_bit_for_bit(clip_norm):
    """The clipping before the update is `tf.clip_by_global_norm`, the op sequence the original ran (each tensor's
    `l2_loss`), bit for bit in a graph: gradients of every magnitude, clipped (norm above 1, and above a clip norm
    whose reciprocal rounds apart in float32 and in Python's double) and not (1e6)."""
    import tensorflow as tf

    from bert_tf.optimization import _clip_by_global_norm

    rng = np.random.default_rng(0)
    grads = [tf.constant((rng.standard_normal(shape) * 10.0 ** rng.integers(-20, 3, size=shape)).astype("float32"))
             for shape in ((300, 70), (70,), (5, 7, 3))]

    @tf.function
    def both():
        ours, finite = _clip_by_global_norm(grads + [None], clip_norm)
        return ours[:-1], finite, tf.clip_by_global_norm(grads, clip_norm)[0]

    ours, finite, want = both()
    # one l2_loss kernel per gradient, no squared copy of it
    ops = [op.type for op in both.get_concrete_function().graph.get_operations()]
    assert ops.count("L2Loss") == 2 * len(grads) and "Square" not in ops
    assert bool(finite)
    for a, b in zip(ours, want):
        assert np.array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))
    norm = np.sqrt(sum((g.numpy().astype(np.float64) ** 2).sum() for g in grads))
    assert np.array_equal(ours[0].numpy(), grads[0].numpy()) == (clip_norm > norm)  # clipped where the norm is above


@pytest.mark.parametrize("kind", ["original_adamw", "adamw", "lamb"])
def test_an_optimizer_round_trips_through_keras_serialization_sparing_layer_norm_and_biases(kind, tmp_path):
    """Rebuilt from its config, alone or as the compiled optimizer of a saved model, an optimizer still spares
    LayerNorm and biases from weight decay (Keras leaves the exclusions out of the config), also from a config
    saved without them."""
    import keras

    from bert_tf.optimization import OriginalAdamW, create_optimizer

    def spared(optimizer):
        names = ("kernel", "bias", "gamma", "beta", "embeddings")
        return {name for name in names if not optimizer._use_weight_decay(keras.Variable([1.0], name=name))}

    opt = create_optimizer(1e-4, 100, 10, optimizer=kind)
    assert spared(opt) == {"bias", "gamma", "beta"}
    again = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(again) is type(opt) and again.get_config() == opt.get_config() and spared(again) == spared(opt)
    config = keras.optimizers.serialize(opt)
    del config["config"]["weight_decay_exclusions"]  # as a model saved before the key existed
    assert spared(keras.optimizers.deserialize(config)) == spared(opt)

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=opt, loss="mse")
    model.train_on_batch(np.ones((2, 3)), np.zeros((2, 2)))  # builds the optimizer's variables, which are saved
    model.save(tmp_path / "model.keras")
    assert spared(keras.saving.load_model(tmp_path / "model.keras").optimizer) == spared(opt)
    with pytest.raises(ValueError, match="by name"):
        opt.exclude_from_weight_decay(var_list=[model.layers[0].kernel])
    if kind == "original_adamw":
        with pytest.raises(ValueError, match="no AMSGrad"):
            OriginalAdamW(amsgrad=True)


def test_model_fit_traces_the_training_step_once_and_trains(tiny_config):
    """Without a strategy Keras builds the optimizer while tracing the first step, and tf.function, having seen
    variables made, traces the whole step again; our models build it before the trace."""
    import keras

    from bert_tf import BertClassifier
    from bert_tf.optimization import create_optimizer
    from tests.conftest import make_batch

    traces = []

    class Counting(BertClassifier):
        def train_step(self, data):
            traces.append(data)
            return super().train_step(data)

    model = Counting(tiny_config, num_classes=2)
    before = [w.numpy() for w in model.trainable_weights]
    model.compile(optimizer=create_optimizer(1e-2, 4, 1), loss=keras.losses.SparseCategoricalCrossentropy(True))
    model.fit(make_batch(tiny_config, batch=4), np.array([0, 1, 0, 1]), batch_size=2, epochs=2, verbose=0)
    assert len(traces) == 1
    assert int(model.optimizer.iterations.numpy()) == 4
    assert all(not np.array_equal(w.numpy(), b) for w, b in zip(model.trainable_weights, before))


@pytest.mark.parametrize("kind", ["original_adamw", "adamw"])
def test_a_step_makes_its_scalars_once_not_once_per_variable(kind):
    """The optimizer's constants, β powers and scheduled rate are made once per step, and the original's update
    arithmetic once per variable shape: doubling the variables adds none of their ops to the traced update (the
    per-variable arithmetic is checked against the references above)."""
    import keras
    import tensorflow as tf

    from bert_tf.optimization import create_optimizer
    from tests.conftest import graph_nodes

    def ops(count):
        variables = [keras.Variable(np.full((3, 2), i, "float32"), name=f"kernel_{i}") for i in range(count)]
        grads = [tf.ones((3, 2))] * count
        opt = create_optimizer(1e-2, 8, 2, optimizer=kind)
        opt.build(variables)
        graph = tf.function(lambda: opt.apply(grads, variables), autograph=False).get_concrete_function().graph
        nodes = [n.op for n in graph_nodes(graph.as_graph_def())]
        return {op: nodes.count(op) for op in ("Const", "Pow", "Less", "SelectV2", "Minimum", "Sqrt", "RealDiv")}

    four, eight = ops(4), ops(8)
    assert eight == four, (four, eight)


def _train(tiny_config, output_dir, optimizer, steps):
    import keras
    import tensorflow as tf

    from bert_tf import BertPretrainer, training
    from bert_tf.optimization import create_optimizer

    rng = np.random.default_rng(0)
    x = {"input_word_ids": rng.integers(5, tiny_config.vocab_size, (16, 12)).astype("int32"),
         "input_mask": np.ones((16, 12), "int32"), "input_type_ids": np.zeros((16, 12), "int32"),
         "masked_lm_positions": np.tile(np.arange(1, 4, dtype="int32"), (16, 1))}
    y = {"masked_lm_ids": rng.integers(5, tiny_config.vocab_size, (16, 3)).astype("int32"),
         "masked_lm_weights": np.ones((16, 3), "float32"), "next_sentence_labels": np.zeros((16, 1), "int32")}
    keras.utils.set_random_seed(0)
    model = BertPretrainer(tiny_config)
    model.compile(optimizer=create_optimizer(1e-3, 4, optimizer=optimizer))
    return training.train(model, tf.distribute.get_strategy(),
                          lambda context: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4),
                          str(output_dir), num_train_steps=steps, global_batch_size=4, steps_per_loop=1,
                          save_checkpoints_steps=1)


def test_a_checkpoint_resumes_only_with_the_optimizer_that_wrote_it(tiny_config, tmp_path):
    from bert_tf.training import TrainingError

    _train(tiny_config, tmp_path, "adamw", 1)
    for other in ("original_adamw", "lamb"):
        with pytest.raises(TrainingError, match=r"trained with --optimizer=adamw, not " + other):
            _train(tiny_config, tmp_path, other, 2)
    # resuming with the same optimizer: test_pretraining's kill -9 test resumes through the same check


def test_a_checkpoint_without_its_optimizer_recorded_is_refused(tiny_config, tmp_path):
    """A checkpoint from before the optimizer was recorded: which one wrote it is unknown, so no guess is made."""
    import tensorflow as tf

    from bert_tf.training import TrainingError

    tf.train.Checkpoint(step=tf.Variable(3)).save(str(tmp_path / "ckpt"))
    with pytest.raises(TrainingError, match="does not record which optimizer"):
        _train(tiny_config, tmp_path, "original_adamw", 4)


@pytest.mark.parametrize("module, options", [("bert_tf.cli.run_pretraining", "bert_tf.pretraining:PretrainingOptions"),
                                             ("bert_tf.cli.run_classifier", "bert_tf.finetuning:FinetuneOptions")])
def test_training_clis_default_to_the_original_optimizer_and_pass_the_flag_on(module, options):
    """run_squad, run_ner and run_swag take the fine-tuning flags of run_classifier (cli.define_finetuning_flags)."""
    from tests import forking

    code = f"""
import importlib, sys
from absl import flags
importlib.import_module("{module}")
from bert_tf.cli import options_from_flags
module, name = "{options}".split(":")
cls = getattr(importlib.import_module(module), name)
for argv in ([], ["--optimizer=adamw", "--weight_decay=0.02"]):
    flags.FLAGS.unparse_flags()
    required = ["--bert_config_file=c", "--input_file=i", "--vocab_file=v", "--output_dir=o", "--task_name=mrpc"]
    flags.FLAGS(["prog", *required, *argv], known_only=True)
    o = options_from_flags(flags.FLAGS, cls)
    print(o.optimizer, o.weight_decay)
"""
    out = forking.python(["-c", code], timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["original_adamw", "0.01", "adamw", "0.02"]
