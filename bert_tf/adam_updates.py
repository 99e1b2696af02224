"""The original optimizer's update of one variable as one XLA-compiled function, rounded as TensorFlow's op-by-op
arithmetic rounds it.

Op by op, the original's update (`bert_tf.optimization.OriginalAdamW`) is about ten element-wise passes over each
variable and its two moments. On a CPU these passes are memory-bound, and XLA compiles the update into one
function of three loops. But XLA's CPU compiler lets LLVM contract a product followed by a sum into one fused
multiply-add, which rounds once where the ops round twice: within a few steps the weights would leave the op-by-op
ones, and the original's, in the last bit. So each product that a sum or a difference takes passes through
`opaque`: its bits, plus an integer zero that the compiler cannot know, read back as a float. The value is the
same and the sum's operand is no longer a product, so nothing is contracted. What remains is IEEE arithmetic that
XLA and TensorFlow's kernels round alike (multiply, divide, square root, add), in the same order as the op-by-op
update (tested bit for bit against it, over gradients down to float32's denormals).

Used where the training step's graph runs op by op on this CPU (`bert_tf.onednn.graph_runs_on_this_cpu`), for
float32 variables (`compiles`). Not for `AdamW`: its fused `ResourceApplyAdam` kernel updates in place in one
pass, and compiled with its decay it gained little of a train step for more memory (BENCHMARKS.md).
"""

import tensorflow as tf


def compiles(dtype) -> bool:
    """Whether a variable of `dtype` is updated by `original_update`, in the graph being traced."""
    from bert_tf.onednn import graph_runs_on_this_cpu

    return tf.as_dtype(dtype) == tf.float32 and graph_runs_on_this_cpu()


def opaque_zero(iterations):
    """An int32 zero computed from the optimizer's step count at run time (never negative), which neither XLA nor
    grappler can fold into a constant: `opaque` takes it."""
    return tf.cast(tf.minimum(iterations, tf.constant(0, iterations.dtype)), tf.int32)


def opaque(x, zero):
    """Float32 `x` unchanged, through an integer identity that no compiler sees through: XLA cannot contract it into
    the sum that takes it, and grappler cannot regroup it with the products around it."""
    return tf.bitcast(tf.bitcast(x, tf.int32) + zero, tf.float32)


def _read(handle):
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)


def _assign(variable, m, v, value, next_m, next_v):
    tf.raw_ops.AssignVariableOp(resource=variable, value=value)
    tf.raw_ops.AssignVariableOp(resource=m, value=next_m)
    tf.raw_ops.AssignVariableOp(resource=v, value=next_v)


@tf.function(jit_compile=True, autograph=False)
def original_update(variable, m, v, gradient, learning_rate, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2,
                    epsilon, weight_decay, zero):
    """`bert_tf.optimization.OriginalAdamW`'s update of one variable (handles), `weight_decay` None for none."""
    grad = tf.cast(gradient, tf.float32)
    next_m = opaque(beta_1 * _read(m), zero) + opaque(one_minus_beta_1 * grad, zero)
    next_v = opaque(beta_2 * _read(v), zero) + opaque(one_minus_beta_2 * tf.square(grad), zero)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    value = _read(variable)
    if weight_decay is not None:
        update += opaque(weight_decay * value, zero)
    _assign(variable, m, v, value - opaque(learning_rate * update, zero), next_m, next_v)

