import platform

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertEncoder, BertPretrainer
from bert_tf import onednn
from bert_tf.layers import LayerNorm
from bert_tf.layers.layer_norm import kernel_available
from tests.conftest import graph_nodes

H = 768
EPSILON = 1e-12
FLOAT32_EPS, FLOAT16_EPS, BFLOAT16_EPS = 2.0 ** -24, 2.0 ** -11, 2.0 ** -8  # unit roundoffs: half an ulp, relative


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(1, 0.1, H).astype("float32"), rng.normal(0, 0.1, H).astype("float32")


def make(cls, policy="float32", **kwargs):
    layer = cls(epsilon=EPSILON, dtype=policy, **kwargs)
    layer.build((None, None, H))
    gamma, beta = weights()
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)
    return layer


def kernels_in(function, *args) -> int:
    graph = function.get_concrete_function(*args).graph.as_graph_def()
    return sum(n.op == "_MklLayerNorm" for n in graph_nodes(graph))


def runs_kernel_here() -> bool:
    return kernel_available() and onednn.onednn_enabled()


def test_tensorflow_for_x86_ships_the_kernel():
    """On x86, where CI and most users run, the one-kernel path is the one taken (TensorFlow's wheels build
    oneDNN in); elsewhere the layer is Keras's (tested below), so nothing depends on it."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert kernel_available() and runs_kernel_here()


@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (2.0, 3.0), (100.0, 1.0), (0.0, 1e-3)])
def test_in_a_graph_it_normalizes_as_float64_does_within_float32_rounding(mean, std):
    """Against LayerNorm computed in float64 from the same float32 input. The bound is float32's: a few roundings of
    each output, and of the input's distance from its mean (large where the mean is large against the spread).
    Keras's layer meets the same bound."""
    x = np.random.default_rng(1).normal(mean, std, (4, 32, H)).astype("float32")
    gamma, beta = weights()
    wide = x.astype("float64")
    centered = wide - wide.mean(-1, keepdims=True)
    reference = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + EPSILON) * gamma + beta
    bound = 16 * FLOAT32_EPS * (1 + abs(mean) / std) * np.abs(reference).max()
    ours = tf.function(make(LayerNorm).__call__)
    assert kernels_in(ours, x) == (1 if runs_kernel_here() else 0)
    for layer in (ours, make(keras.layers.LayerNormalization)):
        assert np.abs(layer(x).numpy() - reference).max() <= bound


def test_its_gradients_are_float64_autodiffs_within_float32_rounding():
    """The one-kernel path brings its own gradient; Keras's layer in float64, differentiated by TensorFlow, is the
    reference for the input's, gamma's and beta's gradients of a weighted sum of the outputs."""
    rng = np.random.default_rng(2)
    x, upstream = rng.normal(1, 2, (4, 32, H)), rng.normal(0, 1, (4, 32, H))

    def gradients(layer, dtype):
        inputs, weights_of_outputs = tf.constant(x, dtype), tf.constant(upstream, dtype)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(layer(inputs) * weights_of_outputs)
        return tape.gradient(loss, [inputs, layer.gamma, layer.beta])

    ours = make(LayerNorm)
    step = tf.function(lambda: gradients(ours, tf.float32))
    assert kernels_in(step) == (1 if runs_kernel_here() else 0)
    reference = gradients(make(keras.layers.LayerNormalization, "float64"), tf.float64)
    for name, got, want in zip(("input", "gamma", "beta"), step(), reference):
        got, want = got.numpy().astype("float64"), want.numpy()
        assert np.abs(got - want).max() <= 64 * FLOAT32_EPS * np.abs(want).max(), name


@pytest.mark.parametrize("policy,given", [("mixed_bfloat16", "float32"), ("mixed_bfloat16", "bfloat16"),
                                          ("mixed_float16", "float16")])
def test_under_a_16_bit_policy_it_normalizes_in_float32_and_rounds_once(policy, given):
    """Under `mixed_bfloat16` or `mixed_float16` (and so under the `bfloat16` inference policy, whose LayerNorms
    take `mixed_bfloat16`), as Keras's layer: the input normalized in float32 with the float32 gamma and beta, the
    result rounded to the 16-bit dtype once (within its unit roundoff of float64's, plus float32's error)."""
    x = tf.cast(np.random.default_rng(3).normal(1, 2, (4, 32, H)), given)
    seen = tf.cast(x, tf.float64).numpy()
    gamma, beta = weights()
    centered = seen - seen.mean(-1, keepdims=True)
    reference = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + EPSILON) * gamma + beta
    graph = tf.function(make(LayerNorm, policy).__call__)
    assert kernels_in(graph, x) == (1 if runs_kernel_here() else 0)
    out = graph(x)
    assert out.dtype == policy.removeprefix("mixed_")
    error = np.abs(tf.cast(out, tf.float64).numpy() - reference)
    unit = BFLOAT16_EPS if policy == "mixed_bfloat16" else FLOAT16_EPS
    assert (error <= unit * np.abs(reference) + 64 * FLOAT32_EPS * np.abs(reference).max()).all()


@pytest.mark.parametrize("shape", [(H,), (16, H), (2, 3, 8, H)])
def test_any_rank_is_normalized_over_its_last_axis(shape):
    """The kernel takes 2-D and 3-D tensors; others are flattened to [-1, H] for it and back. Outputs and input
    gradients against Keras's layer in float64."""
    x = np.random.default_rng(5).normal(1, 2, shape)

    def run(layer, dtype):
        inputs = tf.constant(x, dtype)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = layer(inputs)
            loss = tf.reduce_sum(y * y)
        return y, tape.gradient(loss, inputs)

    ours = make(LayerNorm)
    graph = tf.function(lambda: run(ours, tf.float32))
    assert kernels_in(graph) == (1 if runs_kernel_here() else 0)
    for got, want in zip(graph(), run(make(keras.layers.LayerNormalization, "float64"), tf.float64)):
        got, want = got.numpy().astype("float64"), want.numpy()
        assert got.shape == shape and np.abs(got - want).max() <= 64 * FLOAT32_EPS * np.abs(want).max()


def test_a_graph_for_xla_is_traced_for_elsewhere():
    """The kernel is chosen when a graph is traced. A tf.function traced here and then called inside a
    `jit_compile` function carries the kernel into XLA, which refuses it; traced under `traced_to_run_elsewhere`,
    the same function compiles and gives Keras's outputs (docs/model.md)."""
    x = np.random.default_rng(6).normal(1, 2, (4, 32, H)).astype("float32")
    layer = make(LayerNorm)
    traced_here = tf.function(layer.__call__)
    traced_here(x)
    if runs_kernel_here():
        with pytest.raises(tf.errors.InvalidArgumentError, match="_MklLayerNorm"):
            tf.function(lambda: traced_here(x), jit_compile=True)()
    for_xla = tf.function(layer.__call__)
    with onednn.traced_to_run_elsewhere():
        for_xla(x)
    keras_layer = tf.function(make(keras.layers.LayerNormalization).__call__)
    np.testing.assert_array_equal(tf.function(lambda: for_xla(x), jit_compile=True)().numpy(),
                                  tf.function(lambda: keras_layer(x), jit_compile=True)().numpy())


def test_anywhere_else_it_is_keras_layer_norm_bit_for_bit():
    """Eagerly, under XLA, for graphs traced to run elsewhere or by `tf.saved_model.save`, and for what the kernel
    does not compute (another axis, no center), there is no oneDNN op and the outputs are Keras's own, run the same
    way (TensorFlow's graph optimizer rewrites Keras's ops, so a graph's outputs are not the eager ones)."""
    x = np.random.default_rng(4).normal(1, 2, (4, 32, H)).astype("float32")
    ours, theirs = make(LayerNorm), make(keras.layers.LayerNormalization)
    np.testing.assert_array_equal(ours(x).numpy(), theirs(x).numpy())  # eagerly
    under_xla = tf.function(ours.__call__, jit_compile=True)
    np.testing.assert_array_equal(under_xla(x).numpy(),
                                  tf.function(theirs.__call__, jit_compile=True)(x).numpy())
    with onednn.traced_to_run_elsewhere():
        elsewhere = tf.function(ours.__call__)
        assert kernels_in(elsewhere, x) == 0
    np.testing.assert_array_equal(elsewhere(x).numpy(), tf.function(theirs.__call__)(x).numpy())
    from bert_tf.serving import traced_for_saving

    with traced_for_saving():
        assert kernels_in(tf.function(ours.__call__), x) == 0
    for kwargs in ({"axis": 1}, {"center": False}):
        shape = (None, 32, H)
        ours, theirs = (cls(epsilon=EPSILON, **kwargs) for cls in (LayerNorm, keras.layers.LayerNormalization))
        ours.build(shape)
        theirs.build(shape)
        graph = tf.function(ours.__call__)
        assert kernels_in(graph, x) == 0
        np.testing.assert_array_equal(graph(x).numpy(), tf.function(theirs.__call__)(x).numpy())


def test_it_serializes_as_itself():
    layer = make(LayerNorm)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(again) is LayerNorm and again.epsilon == EPSILON and again.get_config() == layer.get_config()


def test_every_layer_norm_in_the_models_is_ours(tiny_config):
    for model in (BertPretrainer(BertEncoder(tiny_config)), BertClassifier(BertEncoder(tiny_config), 3)):
        layers = list(model._flatten_layers())
        assert sum(isinstance(layer, LayerNorm) for layer in layers) == 2 * tiny_config.num_hidden_layers + 1 + (
            isinstance(model, BertPretrainer))
        assert not [layer.name for layer in layers if type(layer) is keras.layers.LayerNormalization]
