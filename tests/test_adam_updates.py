"""The XLA-compiled update of the original optimizer (`bert_tf.adam_updates`) against the op-by-op update it
replaces: the same weights and moments bit for bit, through the optimizer as training uses it."""

from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, adam_updates, onednn
from bert_tf.optimization import create_optimizer
from tests.conftest import graph_nodes, make_batch

STEPS = 6


def op_by_op():
    """The updates as they are where the compiled ones are not used (eagerly, under XLA, for export)."""
    return mock.patch.object(adam_updates, "compiles", lambda dtype: False)


def gradients(rng, shape):
    """Normal values scaled by 10^-25 .. 10^3 element by element: squares down to float32's denormals and below
    (flushed to zero by both), sums of very unequal terms; plus zeros of both signs."""
    g = rng.standard_normal(shape) * 10.0 ** rng.integers(-25, 4, size=shape)
    g.flat[:4] = [0.0, -0.0, 1e-38, -1e-20]
    return g.astype(np.float32)


def compiled_calls(fn) -> list:
    """The XLA-compiled functions a traced step calls."""
    graph_def = fn.get_concrete_function().graph.as_graph_def()
    return [n.name for n in graph_nodes(graph_def) if "_XlaMustCompile" in n.attr and n.attr["_XlaMustCompile"].b]


@pytest.mark.parametrize("learning_rate,weight_decay", [(1e-2, 0.01), (0.5, 0.9)])
def test_the_compiled_update_is_the_op_by_op_update_bit_for_bit(learning_rate, weight_decay):
    """Six updates of a decayed kernel, an undecayed LayerNorm gamma and a bias, with warmup and clipping, from
    gradients of every magnitude: weights and both moments are bit-identical to the op-by-op update's. Removing
    any one `opaque` makes XLA contract a multiply-add and fails this (the decay's only with a decay large
    enough for its product's rounding to show, the second case)."""
    rng = np.random.default_rng(0)
    start = {"kernel": rng.normal(size=(96, 80)) * 0.02, "gamma": 1 + 0.1 * rng.normal(size=80),
             "bias": 0.05 * rng.normal(size=80)}
    steps = [[tf.constant(gradients(rng, v.shape)) for v in start.values()] for _ in range(STEPS)]

    def train(compiled):
        variables = [keras.Variable(v.astype(np.float32), name=name) for name, v in start.items()]
        opt = create_optimizer(learning_rate, num_train_steps=STEPS, num_warmup_steps=2, weight_decay=weight_decay)
        opt.build(variables)
        grads = [tf.Variable(g) for g in steps[0]]
        step = tf.function(lambda: opt.apply([g.read_value() for g in grads], variables), autograph=False)
        if compiled:
            calls = compiled_calls(step)
        else:
            with op_by_op():
                calls = compiled_calls(step)
        for g in steps:
            for variable, value in zip(grads, g):
                variable.assign(value)
            step()
        slots = [opt._momentums[opt._get_variable_index(v)] for v in variables]
        slots += [opt._velocities[opt._get_variable_index(v)] for v in variables]
        return calls, [np.asarray(v.numpy()) for v in variables + slots]

    calls, compiled = train(compiled=True)
    assert len(calls) == 3, calls  # one per variable
    reference_calls, reference = train(compiled=False)
    assert not reference_calls
    names = [f"{slot} of {name}" for slot in ("value", "m", "v") for name in start]
    for name, ours, want in zip(names, compiled, reference):
        differing = np.flatnonzero(ours.view(np.int32) != want.view(np.int32))
        assert differing.size == 0, f"{name} differs in {differing.size} elements, e.g. " \
            f"{ours.flat[differing[0]]!r} against {want.flat[differing[0]]!r}"
    assert not np.array_equal(compiled[0], start["kernel"].astype(np.float32))  # it trained


@pytest.mark.parametrize("warmup", [0, 1])
def test_model_fit_trains_as_op_by_op(tiny_config, warmup):
    """A tiny classifier fitted for 6 steps with the default optimizer, its update compiled and op by op: the same
    weights, bit for bit (dropout on: the masks are seeded the same). A large learning rate, with and without
    warmup: grappler regroups products of constants and the schedule by the graph around them, which differs
    between the two kinds of update. It did so for `adamw`'s compiled form, since taken out, where this test
    failed without warmup; `AdamW._rate` keeps the rate opaque to it for the update left."""
    batch = make_batch(tiny_config, batch=12)
    labels = np.arange(12) % 2

    def fit():
        keras.utils.set_random_seed(3)
        model = BertClassifier(tiny_config, num_classes=2)
        model.compile(optimizer=create_optimizer(5e-2, 8, warmup),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(batch, labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
        return model, [w.numpy() for w in model.trainable_weights]

    with mock.patch.object(adam_updates, "original_update", wraps=adam_updates.original_update) as traced:
        model, compiled = fit()
    assert traced.call_count == len(model.trainable_weights)  # one trace of the step, one call per variable
    with op_by_op():
        _, reference = fit()
    differing = [w.path for w, a, b in zip(model.trainable_weights, compiled, reference)
                 if not np.array_equal(a.view(np.int32), b.view(np.int32))]
    assert not differing, differing


@pytest.mark.parametrize("where", ["eager", "float64", "elsewhere", "xla"])
def test_the_updates_compile_only_in_graphs_run_op_by_op_on_this_cpu(where):
    """Not eagerly, not for float64 variables, not in a graph traced for elsewhere or compiled by XLA as a whole
    (which fuses the update itself)."""
    if where == "eager":
        assert not adam_updates.compiles(tf.float32)
        return
    if where == "float64":
        assert not tf.function(lambda: tf.constant(adam_updates.compiles(tf.float64)))()
        assert tf.function(lambda: tf.constant(adam_updates.compiles(tf.float32)))()
        return
    variables = [keras.Variable(np.ones((4, 3), np.float32), name="kernel")]
    opt = create_optimizer(1e-2, 8)
    opt.build(variables)
    step = tf.function(lambda: opt.apply([tf.ones((4, 3))], variables), autograph=False,
                       jit_compile=where == "xla")
    if where == "elsewhere":
        with onednn.traced_to_run_elsewhere():
            assert not compiled_calls(step)
    else:
        assert not compiled_calls(step)
        step()
        assert np.all(variables[0].numpy() < 1)
