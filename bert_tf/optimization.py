"""The optimizers of the paper's recipe, with linear warmup and linear decay.

`create_optimizer` returns a Keras optimizer: decoupled weight decay 0.01 on every weight except LayerNorm
gamma/beta and biases, β 0.9/0.999, ε 1e-6, global-norm clipping 1.0 and, for float16, dynamic loss scaling.
Three optimizers:

- "original_adamw" (the default): the original `AdamWeightDecayOptimizer` of google-research/bert, which the paper
  used. Adam's moments without bias correction, so the update is `m / (sqrt(v) + ε)`, plus the decay
  `weight_decay * param` (from the weights before the update), times the learning rate.
- "adamw": Keras's AdamW, which is bias-corrected: its update is `sqrt(1 - β2^t) / (1 - β1^t)` times the
  original's (0.54x at step 350, 0.80x at step 1,000), so the same learning rate trains differently for thousands
  of steps, i.e. for a whole GLUE fine-tuning run.
- "lamb": LAMB (You et al., 2019), for large batches: bias-corrected Adam with the decay inside each layer's trust
  ratio, LayerNorm and biases left out of both (`Lamb`).

Beyond these, four things are added to Keras:

- the schedule (`LinearWarmup` in front of Keras's `PolynomialDecay`), with the original's step arithmetic;
- replica-correct clipping and skipping (`_ReplicaAware`): Keras clips each replica's share of the gradient before
  summing the shares, so under `MirroredStrategy` the clip norm means something different from one device. We sum
  first, then clip, and the update that follows does not sum again. A step whose gradients are not finite on any
  replica, or whose global norm overflows, is skipped on all of them, so a NaN never reaches the weights and
  replicas never disagree. Gradients are made dense first: the global norm of a gather's IndexedSlices counts
  repeated rows separately. Variables without a gradient are skipped without Keras's warning, as the original's
  optimizer skips them;
- the variables spared weight decay (LayerNorm's and the biases' by default) saved in the optimizer's config
  (`_DecayExclusions`), so that an optimizer reloaded with a model spares them too;
- Keras's AdamW update in TF's fused `ResourceApplyAdam` kernel, one pass per variable; in a graph run op by op
  on this CPU, each float32 variable's `original_adamw` update is one XLA-compiled function with the same rounding
  (`bert_tf.adam_updates`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf import adam_updates
from bert_tf.losses import replica_sum

# Variables without weight decay: biases (incl. the MLM `output_bias`) and LayerNorm's gamma/beta. Keras matches
# the pattern against the TensorFlow variable's name under the TF backend ("embeddings/LayerNorm/gamma:0"), and
# against the Keras name ("gamma") elsewhere: it must match both.
NO_DECAY_PATTERN = r"(^|/)(gamma|beta)(:\d+)?$|bias(:\d+)?$"
OPTIMIZERS = ("original_adamw", "adamw", "lamb")


@keras.saving.register_keras_serializable(package="bert_tf")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """`peak * step / warmup_steps` for the first `warmup_steps` updates, then `after(step)`.

    As in the original, `after` is evaluated at the absolute step, so with a linear decay over `num_train_steps`
    the rate right after warmup is `peak * (1 - warmup_steps / num_train_steps)`, and the first update uses rate 0.

    Args:
      peak: the learning rate at the end of warmup.
      warmup_steps: number of warmup updates (0: no warmup).
      after: the schedule used from `warmup_steps` on (a Keras schedule or its config).
    """

    def __init__(self, peak, warmup_steps, after):
        super().__init__()
        if isinstance(after, dict):
            after = keras.saving.deserialize_keras_object(after)
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.after = after

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        decayed = tf.cast(self.after(step), tf.float32)
        if self.warmup_steps <= 0:
            return decayed
        warm = self.peak * step / float(self.warmup_steps)
        return tf.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps,
                "after": keras.saving.serialize_keras_object(self.after)}


def _replica_context():
    """The replica context when running on more than one replica, else None."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return context


def _all_replicas(flag):
    """True where `flag` is true on every replica (one scalar all-reduce)."""
    return tf.equal(replica_sum(1.0 - tf.cast(flag, tf.float32)), 0.0)


def _all_finite(tensors):
    """True where no tensor holds an inf or NaN: one sum per tensor (inf and NaN propagate through sums), not a
    boolean copy of every gradient; a sum beyond float32's range also counts as not finite."""
    sums = [tf.reduce_sum(tf.cast(t, tf.float32)) for t in tensors if t is not None]
    return tf.math.is_finite(tf.add_n(sums)) if sums else tf.constant(True)


def _clip_by_global_norm(tensors, clip_norm):
    """(tensors scaled to a global norm of at most `clip_norm`, whether that norm is finite), op for op as the
    original's `tf.clip_by_global_norm`: the norm `sqrt(2 * sum of each tensor's l2_loss)` (one kernel per tensor,
    where Keras's `clip_by_global_norm` writes a squared copy of each gradient and sums it), the scale
    `clip_norm * min(1 / norm, 1 / clip_norm)` (`1 / clip_norm` divided in the norm's dtype, not in Python's
    double), which turns every gradient into NaN when the norm is not finite. The norm's finiteness is the step's:
    an inf or NaN in a gradient makes it so, and so do finite gradients whose squares overflow, which the clipping
    would otherwise turn into NaN weights."""
    norm = tf.sqrt(tf.reduce_sum(tf.stack([tf.nn.l2_loss(t) for t in tensors if t is not None])) * 2.0)
    scale = clip_norm * tf.minimum(1.0 / norm, tf.constant(1.0, norm.dtype) / clip_norm) + (norm - norm)
    return [t if t is None else t * scale for t in tensors], tf.math.is_finite(norm)


class _ReplicaAware:
    """Mixin for a Keras optimizer: sum gradients across replicas first and clip them to their global norm, then
    skip the update everywhere if they (or that norm) are not finite, else let Keras apply them (see the module
    docstring)."""

    def apply(self, grads, trainable_variables=None):
        # Dense gradients: the global norm of a gather's IndexedSlices counts repeated rows separately, which is
        # not the norm of the gradient (and the tables they come from, token type and position, are small).
        grads = [g if g is None else tf.convert_to_tensor(g) for g in grads]
        if not self.built:  # variables must not be created inside the branch below
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
            self.built = True
        context = _replica_context()
        if context is not None:
            present = [i for i, g in enumerate(grads) if g is not None]
            for i, g in zip(present, context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])):
                grads[i] = g
        # the same on every replica: the gradients are summed
        if self._clips_here():
            grads, finite = _clip_by_global_norm(grads, self.global_clipnorm)
        else:
            finite = _all_finite(grads)

        def update():
            if trainable_variables is None:
                super(_ReplicaAware, self).apply(grads)
                return
            # Variables without a gradient (the pooler under a span or tagging head) are left alone, silently, as
            # the original optimizer does; Keras would warn that the loss may be missing.
            kept = [(g, v) for g, v in zip(grads, trainable_variables) if g is not None]
            super(_ReplicaAware, self).apply([g for g, _ in kept], [v for _, v in kept])

        if not tf.distribute.has_strategy() or tf.__internal__.distribute.strategy_supports_no_merge_call():
            tf.cond(finite, update, lambda: None)
            return

        # Keras's update calls merge_call, which may not sit under a cond in a replica context: branch in the
        # cross-replica context and re-enter the replicas there (as Keras's LossScaleOptimizer does).
        def branch(distribution, finite):
            finite = distribution.experimental_local_results(finite)[0]
            tf.cond(finite, lambda: distribution.extended.call_for_each_replica(update), lambda: None)

        tf.distribute.get_replica_context().merge_call(branch, args=(finite,))

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)  # `apply` summed them already

    def _clips_here(self) -> bool:
        """Whether `apply` clips to the global norm itself, before Keras's update (which then does not): the norm
        is the finiteness check, one pass over the gradients instead of two. Not with Keras's own loss scale
        factor or gradient accumulation, which come between its unscaling and its clipping."""
        return bool(self.global_clipnorm) and self.loss_scale_factor is None and not self.gradient_accumulation_steps

    def _clip_gradients(self, grads):
        return grads if self._clips_here() else super()._clip_gradients(grads)


class _DecayExclusions:
    """Mixin for a Keras optimizer: the names of the variables spared weight decay (regular expressions, default
    LayerNorm's and the biases', `NO_DECAY_PATTERN`) are part of its config. Keras leaves what
    `exclude_from_weight_decay` was given out of `get_config`, so an optimizer rebuilt from one (the compiled
    optimizer of a `model.keras` that `keras.saving.load_model` reloads) would decay every variable."""

    def __init__(self, *args, weight_decay_exclusions=(NO_DECAY_PATTERN,), **kwargs):
        super().__init__(*args, **kwargs)
        self.exclude_from_weight_decay(var_names=list(weight_decay_exclusions))

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        if var_list:
            raise ValueError(f"{type(self).__name__} spares variables from weight decay by name (var_names), which "
                             "its config saves; variables themselves cannot be saved")
        super().exclude_from_weight_decay(var_names=var_names)
        self._weight_decay_exclusions = list(var_names or ())

    def get_config(self):
        config = super().get_config()
        config["weight_decay_exclusions"] = list(self._weight_decay_exclusions)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamW(_ReplicaAware, _DecayExclusions, keras.optimizers.AdamW):
    """Keras AdamW (bias-corrected) with replica-correct clipping and non-finite step skipping, and Adam's update in
    one kernel.

    Keras composes each variable's Adam update from about ten element-wise ops, each a full pass over the
    variable. TensorFlow's fused `ResourceApplyAdam` kernel does the same arithmetic (bias-corrected, ε outside
    the square root) in one pass. The weight decay stays Keras's (decoupled, applied before the Adam step).
    """

    kind = "adamw"

    def __init__(self, *args, amsgrad=False, **kwargs):
        if amsgrad:
            raise ValueError(f"{type(self).__name__} has no AMSGrad variant")
        super().__init__(*args, amsgrad=False, **kwargs)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        # Keras makes the update's scalars again for every variable, ops that every trace of a training step pays
        # for; they are made here once per dtype for the whole step.
        scalars = {dtype: self._scalars(dtype) for dtype in {variable.dtype for _, variable in grads_and_vars}}
        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, self._update, args=(gradient, learning_rate,
                                                                       scalars[variable.dtype]), group=False)

    def update_step(self, gradient, variable, learning_rate):
        self._update(variable, gradient, learning_rate, self._scalars(variable.dtype))

    def _apply_weight_decay(self, variables):
        del variables  # each variable's decay is part of its update (`_update`)

    def _scalars(self, dtype) -> dict:
        """The scalars of one step's update of `dtype` variables."""
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.constant(self.beta_1, dtype), tf.constant(self.beta_2, dtype)
        rate = self._rate(dtype, adam_updates.opaque_zero(self.iterations))
        return dict(beta1=beta_1, beta2=beta_2, beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
                    epsilon=tf.constant(self.epsilon, dtype), rate=rate,
                    decay_rate=tf.constant(self.weight_decay or 0.0, dtype) * rate)

    def _rate(self, dtype, zero):
        """The learning rate of this step's update: the schedule's at this step, as Keras passes it to `_update`
        (there per replica under a strategy), in `dtype`. Grappler regroups chains of products with constants by
        the graph around them (how many ops read each), which differs between `OriginalAdamW`'s compiled and
        op-by-op update, so a float32 rate passes through `adam_updates.opaque`: no update's graph changes how the
        rate, and products of it such as the decay's, round. (A safeguard: the bit-for-bit tests of the update
        left pass without it; they failed without it for a compiled `adamw`, since taken out.)"""
        rate = tf.cast(self.learning_rate, dtype)
        return adam_updates.opaque(rate, zero) if dtype == tf.float32 else rate

    def _update(self, variable, gradient, learning_rate, scalars):
        """Keras's decoupled decay, `w -= w * (weight_decay * rate)` (not for LayerNorm and biases), then Adam's
        step in `ResourceApplyAdam`."""
        index = self._get_variable_index(variable)
        if self.weight_decay and self._use_weight_decay(variable):
            _tf_variable(variable).assign_sub(_tf_variable(variable) * scalars["decay_rate"])
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(self._momentums[index]), v=_handle(self._velocities[index]),
            lr=scalars["rate"], grad=tf.cast(tf.convert_to_tensor(gradient), variable.dtype), beta1=scalars["beta1"],
            beta2=scalars["beta2"], beta1_power=scalars["beta1_power"], beta2_power=scalars["beta2_power"],
            epsilon=scalars["epsilon"])


@keras.saving.register_keras_serializable(package="bert_tf")
class OriginalAdamW(AdamW):
    """The original BERT optimizer (`AdamWeightDecayOptimizer`): Adam without bias correction.

    Per variable, with `g` the clipped gradient and `lr` the scheduled rate, op for op as the original:
    `m = β1 m + (1 - β1) g`, `v = β2 v + (1 - β2) g²`, `param -= lr * (m / (sqrt(v) + ε) + weight_decay * param)`,
    the decay left out for LayerNorm and bias variables. Not `ResourceApplyAdam`: it computes `1 - β2` in the
    variable's precision, which in float32 is 1.3e-5 off the original's constant `1 - 0.999` (docs/training.md).
    Where the step's graph runs op by op on this CPU, a float32 variable's update is one XLA-compiled function with
    the same rounding (`bert_tf.adam_updates`); elsewhere, the ops of `_original_update`.
    """

    kind = "original_adamw"

    def _scalars(self, dtype) -> dict:
        zero = adam_updates.opaque_zero(self.iterations)  # the compiled update's, and the rate's
        return dict(beta_1=tf.constant(self.beta_1, dtype), one_minus_beta_1=tf.constant(1.0 - self.beta_1, dtype),
                    beta_2=tf.constant(self.beta_2, dtype), one_minus_beta_2=tf.constant(1.0 - self.beta_2, dtype),
                    epsilon=tf.constant(self.epsilon, dtype),
                    weight_decay=tf.constant(self.weight_decay or 0.0, dtype), rate=self._rate(dtype, zero), zero=zero)

    def _update(self, variable, gradient, learning_rate, scalars):
        index = self._get_variable_index(variable)
        decay = scalars["weight_decay"] if self.weight_decay and self._use_weight_decay(variable) else None
        args = (_handle(variable), _handle(self._momentums[index]), _handle(self._velocities[index]),
                tf.convert_to_tensor(gradient), scalars["rate"], scalars["beta_1"],
                scalars["one_minus_beta_1"], scalars["beta_2"], scalars["one_minus_beta_2"], scalars["epsilon"], decay)
        if adam_updates.compiles(variable.dtype):
            adam_updates.original_update(*args, scalars["zero"])
        else:
            _original_update(*args)


# One variable's update as a function of its own, traced once per variable shape, dtype and decay or not: a training
# step's graph holds one call per variable instead of the ~20 ops of its update, which every trace of the step would
# otherwise build op by op. TensorFlow inlines the calls before it runs the graph, so the arithmetic is the same. It
# takes the variables' handles (under a distribution strategy, this device's copies) rather than the variables.
@tf.function(autograph=False)
def _original_update(variable, m, v, gradient, learning_rate, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2,
                     epsilon, weight_decay):
    dtype = learning_rate.dtype
    grad = tf.cast(gradient, dtype)
    next_m = beta_1 * _read(m, dtype) + one_minus_beta_1 * grad
    next_v = beta_2 * _read(v, dtype) + one_minus_beta_2 * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    value = _read(variable, dtype)
    if weight_decay is not None:
        update += weight_decay * value
    tf.raw_ops.AssignVariableOp(resource=variable, value=value - learning_rate * update)
    tf.raw_ops.AssignVariableOp(resource=m, value=next_m)
    tf.raw_ops.AssignVariableOp(resource=v, value=next_v)


def _read(handle, dtype):
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)


def _tf_variable(variable):
    """The TF variable of a Keras or TF variable (in an update context: this replica's copy)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def _value(variable):
    """The current value of a Keras or TF variable, as a tensor."""
    return tf.convert_to_tensor(_tf_variable(variable))


def _handle(variable):
    return _tf_variable(variable).handle


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_ReplicaAware, _DecayExclusions, keras.optimizers.Lamb):
    """LAMB as its paper (You et al., 2019, Algorithm 2) defines it, with LayerNorm and biases excluded as the BERT
    pretraining code built on it excludes them (Model Garden's `LAMB`, whose layer-adaptation exclusions default to
    its weight-decay exclusions), plus replica-correct clipping and non-finite step skipping.

    Per variable, with `g` the clipped gradient and `lr` the scheduled rate: `m = β1 m + (1 - β1) g`,
    `v = β2 v + (1 - β2) g²`, the bias-corrected Adam direction `r = (m / (1 - β1^t)) / (sqrt(v / (1 - β2^t)) + ε)`,
    the decay added to it, `u = r + weight_decay * param`, and the layer's trust ratio scaling the step:
    `param -= lr * (‖param‖ / ‖u‖) * u` (ratio 1 where either norm is 0). LayerNorm and bias variables take neither
    the decay nor the trust ratio: `param -= lr * r`. Keras's own `Lamb` applies the decay apart, before the step,
    and scales every variable, LayerNorm and biases included, by `‖param‖ / ‖r‖`.
    """

    kind = "lamb"

    def _apply_weight_decay(self, variables):
        del variables  # each variable's decay is part of its update, inside the trust ratio (`update_step`)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        grad = tf.cast(gradient, dtype)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.constant(self.beta_1, dtype), tf.constant(self.beta_2, dtype)
        next_m = beta_1 * _value(m) + (1.0 - beta_1) * grad
        next_v = beta_2 * _value(v) + (1.0 - beta_2) * tf.square(grad)
        self.assign(m, next_m)
        self.assign(v, next_v)
        update = (next_m / (1.0 - tf.pow(beta_1, step))) / (tf.sqrt(next_v / (1.0 - tf.pow(beta_2, step)))
                                                             + tf.constant(self.epsilon, dtype))
        ratio = tf.constant(1.0, dtype)
        if self._use_weight_decay(variable):  # not LayerNorm or a bias: decay and trust ratio
            value = _value(variable)
            if self.weight_decay:
                update += tf.constant(self.weight_decay, dtype) * value
            weight_norm, update_norm = tf.norm(value), tf.norm(update)
            ratio = tf.where((weight_norm > 0) & (update_norm > 0),
                             weight_norm / tf.where(update_norm > 0, update_norm, 1.0), ratio)
        self.assign_sub(variable, tf.cast(learning_rate, dtype) * ratio * update)


@keras.saving.register_keras_serializable(package="bert_tf")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras dynamic loss scaling whose finiteness check agrees across replicas (Keras checks each replica's own
    gradients, and replicas that disagree would wait on each other forever)."""

    def check_finite(self, grads):
        return _all_replicas(super().check_finite(grads))


def warmup_linear_decay(learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0) -> LinearWarmup:
    """The original schedule: linear warmup to `learning_rate`, linear decay to 0 at `num_train_steps`."""
    decay = keras.optimizers.schedules.PolynomialDecay(initial_learning_rate=learning_rate,
                                                        decay_steps=num_train_steps, end_learning_rate=0.0, power=1.0)
    return LinearWarmup(peak=learning_rate, warmup_steps=num_warmup_steps, after=decay)


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0, *,
                     optimizer: str = "original_adamw", weight_decay: float = 0.01, beta_1: float = 0.9,
                     beta_2: float = 0.999, epsilon: float = 1e-6, clipnorm: float | None = 1.0,
                     loss_scale: bool = False):
    """The paper's optimizer: `optimizer` (one of `OPTIMIZERS`, see the module docstring) with warmup then linear
    decay to 0 at `num_train_steps` (counted in updates), decoupled weight decay except LayerNorm and biases,
    global-norm clipping; `loss_scale` wraps it in dynamic loss scaling (for float16). Gradient accumulation is the
    model's job (`model.gradient_accumulation_steps`), which hands the optimizer one summed gradient per update."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"--optimizer={optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
    if num_train_steps < 1:
        raise ValueError(f"--num_train_steps={num_train_steps} must be at least 1")
    if not 0 <= num_warmup_steps <= num_train_steps:
        raise ValueError(f"--num_warmup_steps={num_warmup_steps} must be between 0 and --num_train_steps")
    if not learning_rate > 0:
        raise ValueError(f"--learning_rate={learning_rate} must be above 0")
    if not weight_decay >= 0:
        raise ValueError(f"--weight_decay={weight_decay} must be 0 or more")
    schedule = warmup_linear_decay(learning_rate, num_train_steps, num_warmup_steps)
    cls = {"original_adamw": OriginalAdamW, "adamw": AdamW, "lamb": Lamb}[optimizer]
    opt = cls(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
              global_clipnorm=clipnorm or None)  # LayerNorm and biases are spared decay by default
    return LossScaleOptimizer(opt) if loss_scale else opt


def optimizer_kind(optimizer) -> str:
    """The `create_optimizer` name of `optimizer` (through a loss-scale wrapper); another optimizer's class name."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return getattr(inner, "kind", type(inner).__name__)


def current_learning_rate(optimizer) -> tf.Tensor:
    """The rate the next update will use (through a loss-scale wrapper)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return inner._get_current_learning_rate()
