"""The `bfloat16` inference policy: `mixed_bfloat16`'s arithmetic with the GEMM weights stored in bfloat16.

Under `mixed_bfloat16` every dense layer rounds its float32 kernel and bias to bfloat16 on every call: in a BERT-Base
forward pass that is 85M weights read, rounded and written again each time, for the same values. Under `bfloat16`
the encoder's dense layers (attention, feed-forward, pooler) keep their weights in bfloat16, already rounded, and
the layers whose float32 variables `mixed_bfloat16` uses unrounded (the embedding tables, which are summed in
float32, the LayerNorms, the masked-LM head with its float32 bias, the layer mixes and LSTMs) keep
`mixed_bfloat16`, as do the task heads (a few thousand weights). Inference therefore gives the same outputs, bit
for bit, as under `mixed_bfloat16` from the same float32 weights. It is for inference only: bfloat16 weights cannot
take updates smaller than 1/256 of their value, so training under it is refused (`refuse_training`)."""

import contextlib

import keras

INFERENCE_POLICY = "bfloat16"


def parameter_policy(policy):
    """The policy for a sub-layer whose float32 variables `policy` must keep: `mixed_bfloat16` for the `bfloat16`
    inference policy, `policy` itself otherwise."""
    policy = keras.dtype_policies.get(policy)
    return keras.dtype_policies.get("mixed_bfloat16") if policy.name == INFERENCE_POLICY else policy


def refuse_training(model) -> None:
    """Raises for a model with a trainable bfloat16 variable (one built under the `bfloat16` inference policy)."""
    if any(variable.dtype == "bfloat16" for variable in model.trainable_variables):
        raise ValueError(f"{model.name}: built with dtype={INFERENCE_POLICY!r}, whose bfloat16 weights are for "
                         "inference only; train under 'mixed_bfloat16' (float32 weights) and load its weights into "
                         f"a {INFERENCE_POLICY!r} model to serve them")


@contextlib.contextmanager
def global_policy(policy):
    """Keras's global dtype policy set to `policy` inside the block, and restored after it."""
    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(old)
