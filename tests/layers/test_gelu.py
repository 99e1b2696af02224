import dataclasses
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy.special import erfc

from bert_tf import BertClassifier, BertEncoder, onednn
from bert_tf.layers import BertTransformerBlock
from bert_tf.layers.activations import get_activation
from bert_tf.layers.gelu import APPROXIMATE, compiled_gelu
from tests.conftest import make_batch

FLOAT32_EPS = 2.0 ** -24  # unit roundoff: half an ulp, relative
SIXTEEN_BIT_EPS = {tf.bfloat16: 2.0 ** -8, tf.float16: 2.0 ** -11}


def gelu_and_slope(x, approximate):
    """The GELU and its derivative in float64, written from the two published formulas."""
    if approximate:
        c = math.sqrt(2 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    phi = 0.5 * erfc(-x / math.sqrt(2))
    return x * phi, phi + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def terms_of(x):
    """The size of the terms whose float32 rounding the value and the slope carry (see the first test)."""
    return np.abs(x), 1 + np.abs(x) * (1 + 3 * 0.044715 * x ** 2)


def value_and_gradient(fn, x):
    @tf.function
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return y, tape.gradient(y, x)

    return [t.numpy().astype("float64") for t in run(tf.constant(x))]


@pytest.mark.parametrize("name", sorted(APPROXIMATE))
def test_float32_values_and_gradients_are_as_close_to_float64_as_tensorflows_own_ops(name):
    """Each output and each derivative against the formula in float64, from the same float32 inputs, over the range
    that matters and beyond. TensorFlow's op-by-op GELU (Keras's, autodiff for the gradient) sets the bound on this
    machine: float32's tanh saturates at |x| ~ 4.9, where both lose the last 3.5e-6 of the slope. Ours may be off by
    twice its error plus a few roundings of the terms: x/2 times a rounded `1 + t` for the value, and x/2 (1 + 3a x^2)
    times a rounded `1 - t^2` for the slope."""
    approximate = APPROXIMATE[name]
    x = np.concatenate([np.linspace(-10, 10, 40001),
                        np.random.default_rng(0).normal(0, 3, 20000)]).astype("float32")
    wide = x.astype("float64")
    reference = gelu_and_slope(wide, approximate)
    ours = value_and_gradient(lambda x: compiled_gelu(x, approximate), x)
    theirs = value_and_gradient(get_activation(name), x)
    for what, mine, keras_own, exact, terms in zip(("value", "slope"), ours, theirs, reference, terms_of(wide)):
        bound = 2 * np.abs(keras_own - exact) + 4 * FLOAT32_EPS * (np.abs(exact) + terms)
        ok = np.abs(mine - exact) <= bound
        assert ok.all(), (name, what, x[~ok][:5], (mine - exact)[~ok][:5])


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
@pytest.mark.parametrize("name", sorted(APPROXIMATE))
def test_a_16_bit_input_is_computed_in_float32_and_rounded_once_both_ways(name, dtype):
    """Every 16-bit value in [-8, 8): the GELU and (for an upstream gradient of 1) its slope come out within one
    16-bit rounding of float64's, in the input's dtype, plus the float32 error of the first test."""
    approximate = APPROXIMATE[name]
    grid = np.unique(tf.cast(tf.constant(np.linspace(-8, 8, 40000, endpoint=False), tf.float32), dtype)
                     .numpy().astype("float32"))
    value, slope = (t.numpy().astype("float64") for t in tf.function(lambda x: _with_slope(x, approximate))(
        tf.constant(grid, dtype)))
    wide = grid.astype("float64")
    for what, out, exact, terms in zip(("value", "slope"), (value, slope), gelu_and_slope(wide, approximate),
                                       terms_of(wide)):
        float32_error = 8 * FLOAT32_EPS * (np.abs(exact) + terms)
        ok = np.abs(out - exact) <= 2 * SIXTEEN_BIT_EPS[dtype] * np.abs(exact) + float32_error
        assert ok.all(), (name, dtype.name, what, grid[~ok][:5])


def _with_slope(x, approximate):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = compiled_gelu(x, approximate)
    gradient = tape.gradient(y, x, output_gradients=tf.ones_like(y))
    assert y.dtype == x.dtype and gradient.dtype == x.dtype
    return y, gradient


def xla_functions(function, *args) -> int:
    """How many functions TensorFlow must compile with XLA in the graph `function` traces for `args`."""
    graph = function.get_concrete_function(*args).graph.as_graph_def()
    return sum(f.attr["_XlaMustCompile"].b for f in graph.library.function)


def test_only_a_training_graph_that_runs_on_this_cpu_compiles_the_gelu():
    """In training on this CPU the block's GELU is the two compiled kernels, and its output is the op-by-op one's
    within float32 rounding. Anywhere else it stays TensorFlow's ops: in inference (fused into the GEMM), in float64,
    eagerly, under XLA (which fuses them anyway), and in graphs traced for elsewhere or by a SavedModel save, which
    must not need XLA to run."""
    from bert_tf.serving import traced_for_saving

    block = BertTransformerBlock(hidden_size=32, num_heads=4, intermediate_size=64, dropout_rate=0.0,
                                 attention_dropout_rate=0.0)
    x = tf.constant(np.random.default_rng(1).normal(0, 1, (2, 5, 32)), tf.float32)

    def graph(training):
        return tf.function(lambda x: block(x, training=training))

    assert xla_functions(graph(True), x) == 1  # the forward kernel; a gradient adds the other (below)
    assert xla_functions(graph(False), x) == 0
    wide = BertTransformerBlock(hidden_size=32, num_heads=4, intermediate_size=64, dtype="float64")
    assert xla_functions(tf.function(lambda x: wide(x, training=True)), tf.cast(x, tf.float64)) == 0  # (`compiles`)
    with onednn.traced_to_run_elsewhere():
        elsewhere = graph(True)
        assert xla_functions(elsewhere, x) == 0
    with traced_for_saving():
        assert xla_functions(graph(True), x) == 0
    compiled, op_by_op = graph(True)(x).numpy(), elsewhere(x).numpy()
    np.testing.assert_allclose(compiled, op_by_op, rtol=0, atol=64 * FLOAT32_EPS * np.abs(op_by_op).max())
    eager = block(x, training=True).numpy()
    np.testing.assert_array_equal(eager, block(x, training=True).numpy())
    under_xla = tf.function(lambda x: block(x, training=True), jit_compile=True)
    np.testing.assert_allclose(under_xla(x).numpy(), eager, rtol=0, atol=64 * FLOAT32_EPS * np.abs(eager).max())


def test_a_classifier_train_step_gets_the_op_by_op_gradients_within_float32_rounding(tiny_config):
    """The whole backward pass through the compiled GELUs: every variable's gradient against the same step traced
    with TensorFlow's ops (for elsewhere), dropout off so that both see the same network."""
    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertClassifier(BertEncoder(config), 3, dropout_rate=0.0)
    batch = make_batch(config, batch=4, seq=12)
    labels = tf.constant([0, 2, 1, 1])
    model(batch)

    @tf.function
    def gradients(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)["logits"]
            loss = keras.ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    compiled = [g.numpy() for g in gradients(batch)]
    with onednn.traced_to_run_elsewhere():
        op_by_op_step = tf.function(gradients.python_function)
        op_by_op_step.get_concrete_function(batch)
    assert xla_functions(gradients, batch) == 2  # the forward and gradient kernels, shared by the layers
    assert xla_functions(op_by_op_step, batch) == 0
    op_by_op = [g.numpy() for g in op_by_op_step(batch)]
    largest = max(np.abs(g).max() for g in op_by_op)
    for variable, mine, theirs in zip(model.trainable_variables, compiled, op_by_op):
        scale = max(np.abs(theirs).max(), 1e-3 * largest)  # the key bias's is 0 but for rounding (softmax's shift)
        assert np.abs(mine - theirs).max() <= 256 * FLOAT32_EPS * scale, variable.path
