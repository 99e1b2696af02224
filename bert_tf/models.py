"""BERT as Keras models: the encoder, the pretraining model (MLM + NSP) and the fine-tuning task models.

All are functional models built in `__init__`, so they have symbolic inputs (for export and `summary()`), run under
`jit_compile`, and serialize through `get_config` (the task models store their encoder's config, not a copy of its
graph). Inputs and outputs follow the TF-Hub BERT convention.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf import losses
from bert_tf.config import BertConfig
from bert_tf.layers import (BertEmbeddings, BertPooler, BertTransformerBlock, ClassificationHead, FoldChoices,
                            MaskedLMHead, causal_bias, padding_bias)
from bert_tf.layers.feature_combination import FeatureCombination
from bert_tf.layers.precision import parameter_policy, refuse_training

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _as_config(config) -> BertConfig:
    if isinstance(config, BertConfig):
        return config
    if isinstance(config, dict):
        return BertConfig(**config)
    raise TypeError(f"expected a BertConfig or its dict, got {type(config).__name__}")


def encoder_inputs(batch_shape=(None,)):
    """Symbolic int32 inputs `input_word_ids`, `input_mask`, `input_type_ids` of shape [batch, *batch_shape]."""
    return {name: keras.Input(shape=batch_shape, dtype="int32", name=name) for name in INPUT_NAMES}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """The BERT encoder: embeddings, `num_hidden_layers` post-LN transformer blocks and the [CLS] pooler.

    Call it on a dict with `input_word_ids`, `input_mask` and `input_type_ids` (int32 [batch, seq], any seq up to
    `max_position_embeddings`). It returns a dict with `sequence_output` [batch, seq, H], `pooled_output` [batch, H]
    `encoder_outputs`, the list of every block's output (the last equals `sequence_output`), and
    `embedding_output` [batch, seq, H], the embeddings after their LayerNorm (and dropout, in training): the
    original's `get_embedding_output()`, layer 0 of the feature-based approach.

    The padding bias for attention is computed once per batch and shared by all blocks. With the config's
    `causal_attention` each position attends only to itself and the positions before it, and `pooled_output` reads
    the last real token (the paper's left-to-right ablation). Sub-layers are public
    (`embeddings`, `transformer_layers`, `pooler`) because checkpoint loaders and the task heads address them.

    Args:
      config: a `BertConfig` (or its dict).
      dtype: optional Keras dtype policy for all layers, e.g. "mixed_bfloat16"; default: the global policy.
        "bfloat16" is `mixed_bfloat16` for inference with the dense layers' weights stored in bfloat16
        (`bert_tf.layers.precision`): the same outputs without rounding the weights on every call.
    """

    def __init__(self, config, dtype=None, name="bert", **kwargs):
        config = _as_config(config)
        policy = keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()
        inputs = encoder_inputs()
        embeddings = BertEmbeddings(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                                    type_vocab_size=config.type_vocab_size,
                                    max_position_embeddings=config.max_position_embeddings,
                                    initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
                                    dropout_rate=config.hidden_dropout_prob, dtype=parameter_policy(policy),
                                    name="embeddings")
        x = embedded = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        bias = (causal_bias if config.causal_attention else padding_bias)(inputs["input_mask"])
        blocks, layer_outputs = [], []
        for i in range(config.num_hidden_layers):
            block = BertTransformerBlock(hidden_size=config.hidden_size, num_heads=config.num_attention_heads,
                                         intermediate_size=config.intermediate_size, activation=config.hidden_act,
                                         dropout_rate=config.hidden_dropout_prob,
                                         attention_dropout_rate=config.attention_probs_dropout_prob,
                                         initializer_range=config.initializer_range,
                                         layer_norm_eps=config.layer_norm_eps, dtype=policy, name=f"layer_{i}")
            x = block(x, bias)
            blocks.append(block)
            layer_outputs.append(x)
        pooler = BertPooler(hidden_size=config.hidden_size, initializer_range=config.initializer_range,
                            last_token=config.causal_attention, dtype=policy, name="pooler")
        pooled = pooler(x, inputs["input_mask"]) if config.causal_attention else pooler(x)
        outputs = {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": layer_outputs,
                   "embedding_output": embedded}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self.dtype_policy = policy  # which the heads take (`heads_policy`); a functional model drops its dtype kwarg
        self.bert_config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler
        restore_frozen(self)

    # Set by a model that probes this encoder's features frozen (`BertFeatureTagger`): it then runs in inference
    # mode (no dropout) in every call, where Keras would pass a training call's mode on to it.
    inference_only = False

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(inputs, training=False if self.inference_only else training, mask=mask, **kwargs)

    def get_config(self):
        config = super().get_config()
        # the policy it computes in, which a model reloaded under another global policy keeps, as Keras's own
        # layers do (saved as None before 2026-11-28: the global policy at loading)
        config.update(config=self.bert_config.to_dict(), dtype=self.dtype_policy.name, **frozen_config(self))
        if self.inference_only:
            config["inference_only"] = True
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        inference_only, frozen = config.pop("inference_only", False), config.pop("frozen_layers", ())
        encoder = cls(**config)
        encoder.inference_only = inference_only
        restore_frozen(encoder, frozen)
        return encoder

    def train_step(self, data):
        refuse_training(self)
        return super().train_step(data)


def _sublayers(model, skip=None) -> list:
    """`model`'s sub-layers at every depth, in the order it tracks them (the same for every build of one config),
    without `skip` and what is inside it."""
    found = []

    def walk(layer):
        for sub in layer._flatten_layers(include_self=False, recursive=False):
            if sub is not skip:
                found.append(sub)
                walk(sub)

    walk(model)
    return found


def frozen_config(model, skip=None) -> dict:
    """{"frozen_layers": [index, ...]}: which of a trainable model's sub-layers (`_sublayers`) are not trainable,
    for its config; {} where none is. These models rebuild their layers from their own arguments, so without this a
    reloaded model would train what its user froze (Keras's functional constructor also applies `trainable=False`
    before it tracks any layer, which `restore_frozen` makes up for)."""
    if not model.trainable:
        return {}
    frozen = [i for i, layer in enumerate(_sublayers(model, skip)) if not layer.trainable]
    return {"frozen_layers": frozen} if frozen else {}


def restore_frozen(model, frozen_layers=(), skip=None) -> None:
    """Freezes what `frozen_config` recorded, and the whole model where its `trainable` is off."""
    if not model.trainable:  # now that its layers are tracked
        freeze(model)
    layers = _sublayers(model, skip)
    for i in frozen_layers:
        freeze(layers[i])


def freeze(layer) -> None:
    """`layer.trainable = False` down to every sub-layer and variable, also where `layer.trainable` is False
    already, which the assignment would skip as a no-op (TensorFlow's trackable objects skip setting an attribute
    to the object it holds) while sub-layers may still train."""
    keras.layers.Layer.trainable.fset(layer, False)


def with_dtype(model, dtype):
    """A copy of `model`, a `BertEncoder` or a model with heads on one, whose encoder runs under the dtype policy
    `dtype`, with the same weights; its heads keep the policy they had. E.g. `with_dtype(model, "bfloat16")`
    serves a model trained in float32 or `mixed_bfloat16` with the inference policy of `BertEncoder`'s `dtype`."""
    encoder = model if isinstance(model, BertEncoder) else model.encoder
    copy = BertEncoder.from_config({**encoder.get_config(), "dtype": keras.dtype_policies.get(dtype).name})
    if model is not encoder:  # its config names the heads' policy
        copy = type(model).from_config({**model.get_config(), "encoder": copy})
    copy.set_weights(model.get_weights())
    return copy


def _as_encoder(encoder) -> BertEncoder:
    if isinstance(encoder, BertEncoder):
        return encoder
    if isinstance(encoder, dict) and "class_name" in encoder:  # a serialized encoder, from get_config
        return keras.saving.deserialize_keras_object(encoder)
    if isinstance(encoder, (BertConfig, dict)):
        return BertEncoder(encoder)
    raise TypeError(f"expected a BertEncoder, BertConfig or serialized encoder, got {type(encoder).__name__}")


def heads_policy(encoder, kwargs):
    """The dtype policy a task model's heads compute in, taken out of its `kwargs`: their `dtype` where given (a
    saved model's), else the encoder's own, so that `BertEncoder(config, dtype="mixed_bfloat16")` makes a whole
    mixed model; with float32 weights where that is the `bfloat16` inference policy (`parameter_policy`: the heads
    are a few thousand weights). The model keeps it as its `dtype_policy` (`_finish`), which its config saves."""
    return parameter_policy(kwargs.pop("dtype", None) or encoder.dtype_policy)


def _loss_divisor(loss) -> str:
    """What a compiled loss divides its weighted sum by: "global weights" (`losses.GlobalMean`), "weights"
    (Keras's `mean_with_sample_weight`), "terms" (Keras's default `sum_over_batch_size`, and a string or function,
    which Keras wraps with it) or "sum" (no division)."""
    if isinstance(loss, losses.GlobalMean):
        return "global weights"
    reduction = loss.reduction if isinstance(loss, keras.losses.Loss) else "sum_over_batch_size"
    kinds = {"sum_over_batch_size": "terms", "mean": "terms", "mean_with_sample_weight": "weights", "sum": "sum"}
    if reduction not in kinds:
        raise ValueError(f"gradient accumulation needs a loss reduced to a number; {type(loss).__name__} has "
                         f"reduction={reduction!r}")
    return kinds[reduction]


class _TaskModel(keras.Model):
    """Shared plumbing of the models that put a head on a `BertEncoder`: config round trip via the encoder, and
    gradient accumulation.

    `gradient_accumulation_steps` (attribute, default 1): `train_step` splits each batch into that many equal
    micro-batches, runs them one after another and hands the optimizer their summed gradient once, so a batch too
    big for memory trains exactly as if it fitted. Losses that average over a count taken across the batch (the
    masked-LM loss) get that count from the whole batch (`_loss_denominators`), not from each micro-batch; compiled
    losses, which average over each micro-batch, are weighted by the micro-batch's part of the batch
    (`_micro_share`).
    """

    _head_args: tuple[str, ...] = ()
    gradient_accumulation_steps = 1
    _denominators = None

    def _loss_denominators(self, y):
        """Whole-batch counts that `compute_loss` divides by, computed before the batch is split; None: none."""
        del y
        return None

    def _micro_share(self, sample_weight, batch, steps):
        """`share(i)`: the part of the whole batch's loss that micro-batch i's loss stands for, so that the summed
        gradient is the whole batch's. It follows what each compiled loss divides by (`_loss_divisor`): Keras's
        default reduction divides by the number of terms, so every micro-batch stands for 1/steps whatever its
        sample weights; `mean_with_sample_weight` by the weights' sum, so a micro-batch stands for its weights'
        part of this replica's; `losses.GlobalMean` (the fine-tuning heads' losses), which in the loop averages over
        the micro-batch's weights on this replica (`losses.counted_here`), for its weights' part of the global
        batch's, summed across replicas here, outside the loop; a sum, for itself. A model without a compiled loss
        divides by whole-batch counts itself (`_loss_denominators`)."""
        if self.loss is None:
            return lambda i: 1.0
        weights = [w for w in tf.nest.flatten(sample_weight) if w is not None]
        if len(weights) > 1:
            raise ValueError("gradient accumulation takes one sample weight for every output; got "
                             f"{len(weights)}")
        divisors = {_loss_divisor(loss) for loss in tf.nest.flatten(self.loss)}
        if len(divisors) > 1:
            raise ValueError("gradient accumulation needs the compiled losses to reduce alike; they divide by "
                             f"{' and '.join(sorted(divisors))}")
        (divisor,) = divisors
        if divisor == "sum":
            return lambda i: 1.0
        if divisor == "terms" or not weights:
            per_micro = tf.fill([steps], tf.cast(batch // steps, tf.float32))
        else:
            per_micro = tf.reduce_sum(tf.reshape(tf.cast(weights[0], tf.float32), [steps, -1]), axis=1)
        total = tf.reduce_sum(per_micro)
        if divisor == "global weights":
            total = losses.replica_sum(total)
        return lambda i: tf.math.divide_no_nan(per_micro[i], total)

    def make_train_function(self, force=False):
        # Without a strategy Keras builds the optimizer while tracing the first step, and tf.function, having seen
        # variables created, traces the whole step a second time. Built before the trace, they are not.
        if self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force)

    def train_step(self, data):
        refuse_training(self)
        steps = int(self.gradient_accumulation_steps)
        if steps <= 1:
            return super().train_step(data)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        batch = tf.shape(tf.nest.flatten(x)[0])[0]
        tf.debugging.assert_equal(batch % steps, 0, message=f"the batch size must be a multiple of "
                                  f"gradient_accumulation_steps={steps}")
        micro = tf.nest.map_structure(
            lambda t: None if t is None else tf.reshape(t, tf.concat([[steps, batch // steps], tf.shape(t)[1:]], 0)),
            (x, y, sample_weight))
        variables = self.trainable_variables
        self._denominators = self._loss_denominators(y)  # all-reduces stay outside the loop below
        share = self._micro_share(sample_weight, batch, steps)
        connected = []  # per variable: whether the loss reaches it (a head that skips the pooler does not)

        def body(i, grads, total):
            xi, yi, wi = tf.nest.map_structure(lambda t: None if t is None else t[i], micro)
            with tf.GradientTape() as tape:
                y_pred = self(xi, training=True)
                loss = self._compute_loss(x=xi, y=yi, y_pred=y_pred, sample_weight=wi, training=True) * share(i)
                scaled = self.optimizer.scale_loss(loss)
            new = tape.gradient(scaled, variables)
            connected[:] = [n is not None for n in new]
            self.compute_metrics(xi, yi, y_pred, sample_weight=wi)
            # dense, with the variable's static shape (all-reduce packing needs the same shapes on every replica)
            new = [tf.zeros(v.shape, v.dtype) if n is None else tf.reshape(tf.convert_to_tensor(n), v.shape)
                   for n, v in zip(new, variables)]
            return i + 1, [g + n for g, n in zip(grads, new)], total + loss

        zeros = [tf.zeros(v.shape, v.dtype) for v in variables]
        with losses.counted_here():
            _, grads, loss = tf.while_loop(lambda i, *_: i < steps, body,
                                           (tf.constant(0), zeros, tf.constant(0.0)))
        self._denominators = None
        # Keras's loss tracker averages each replica's share scaled back to a whole-batch value
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self._loss_tracker.update_state(loss * replicas, sample_weight=batch)
        # Variables the loss does not reach get no update, as Keras's own step leaves them (weight decay included)
        used = [(g, v) for g, v, c in zip(grads, variables, connected) if c]
        self.optimizer.apply([g for g, _ in used], [v for _, v in used])
        return self.get_metrics_result()

    def _finish(self, encoder, policy, **head_args):
        self.dtype_policy = policy
        restore_frozen(self)
        self.encoder = encoder
        self.bert_config = encoder.bert_config
        for key, value in head_args.items():
            setattr(self, key, value)

    def get_config(self):
        config = super().get_config()
        config["dtype"] = self.dtype_policy.name  # the heads' policy (`heads_policy`)
        config.update(frozen_config(self, skip=self.encoder))
        if self.gradient_accumulation_steps != 1:  # a training setting of the model's, kept for resuming
            config["gradient_accumulation_steps"] = int(self.gradient_accumulation_steps)
        config["encoder"] = keras.saving.serialize_keras_object(self.encoder)
        config.update({key: getattr(self, key) for key in self._head_args})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = _as_encoder(config["encoder"])
        # saved without it (before 2026-11-28): the heads took the global policy, as they do here
        config.setdefault("dtype", keras.config.dtype_policy().name)
        frozen = config.pop("frozen_layers", ())
        steps = config.pop("gradient_accumulation_steps", 1)
        model = cls(**config)
        restore_frozen(model, frozen, skip=model.encoder)  # the encoder has restored its own
        model.gradient_accumulation_steps = steps
        return model


# The paper's Table 5 objectives, by the names `run_pretraining --objective` takes.
OBJECTIVES = ("mlm_nsp", "mlm", "ltr")


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(_TaskModel):
    """BERT with its pretraining heads, for one of the paper's Table 5 objectives (section 5.1):

    - `mlm_nsp` (the paper's BERT): masked LM at `masked_lm_positions` and next-sentence prediction;
    - `mlm` ("No NSP"): masked LM alone, no next-sentence head, output, loss or metric;
    - `ltr` ("LTR & No NSP"): a left-to-right LM on an encoder with `causal_attention`: every position predicts the
      next token, with no masking and no next-sentence prediction.

    Inputs: the encoder inputs, plus `masked_lm_positions` (int32 [batch, max_predictions_per_seq]) for the masked
    LM. Outputs: `mlm_logits` float32 [batch, max_predictions, vocab] (decoder tied to the word embeddings),
    `nsp_logits` float32 [batch, 2] (index 1 = "B is a random sentence", as in the original records) with NSP; for
    `ltr`, `lm_logits` float32 [batch, seq, vocab] (position t predicts token t + 1), from the same head
    (`cls/predictions` in checkpoints).

    Training: compiled without a loss (`model.compile(optimizer)`), it trains on the labels that
    `bert_tf.pretraining.pretraining_dataset` yields, `masked_lm_ids`, `masked_lm_weights` and
    `next_sentence_labels` (`lm_ids`, `lm_weights` for `ltr`), with the original's loss: the LM cross-entropy summed
    with the positions' weights, over the weights' sum + 1e-5, plus the mean next-sentence cross-entropy; the same
    for any number of replicas (see `bert_tf.losses`). It reports `masked_lm_accuracy`, `masked_lm_loss`,
    `next_sentence_accuracy` and `next_sentence_loss` (the original's eval names; `lm_accuracy`, `lm_loss` for
    `ltr`). Compiled with a loss, Keras's usual per-output losses apply instead.

    Args:
      encoder: a `BertEncoder` (or a `BertConfig` to build a fresh one); causal for `ltr`, bidirectional otherwise.
      objective: one of `OBJECTIVES`.
    """

    LABELS = {"mlm_nsp": ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels"),
              "mlm": ("masked_lm_ids", "masked_lm_weights"), "ltr": ("lm_ids", "lm_weights")}
    _head_args = ("objective",)

    def __init__(self, encoder, objective="mlm_nsp", name="bert_pretrainer", **kwargs):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective={objective!r}: expected one of {', '.join(OBJECTIVES)}")
        encoder = _as_encoder(encoder)
        cfg = encoder.bert_config
        if cfg.causal_attention != (objective == "ltr"):
            raise ValueError(f"objective={objective!r} needs an encoder with causal_attention="
                             f"{objective == 'ltr'} (BertConfig(..., causal_attention={objective == 'ltr'}))")
        policy = heads_policy(encoder, kwargs)
        inputs = encoder_inputs()
        if objective != "ltr":
            inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        outputs = encoder({k: inputs[k] for k in INPUT_NAMES})
        mlm = MaskedLMHead(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, activation=cfg.hidden_act,
                           initializer_range=cfg.initializer_range, layer_norm_eps=cfg.layer_norm_eps,
                           dtype=parameter_policy(policy), name="predictions")
        prefix = "lm" if objective == "ltr" else "mlm"
        heads = {f"{prefix}_logits": mlm(outputs["sequence_output"], inputs.get("masked_lm_positions"),
                                         encoder.embeddings.word_embeddings)}
        nsp = None
        if objective == "mlm_nsp":
            nsp = ClassificationHead(num_outputs=2, dropout_rate=0.0, initializer_range=cfg.initializer_range,
                                     dtype=policy, name="seq_relationship")
            heads["nsp_logits"] = nsp(outputs["pooled_output"])
        super().__init__(inputs=inputs, outputs=heads, name=name, **kwargs)
        self._finish(encoder, policy, objective=objective)
        self.masked_lm = mlm
        self.next_sentence_head = nsp
        metric = "lm" if objective == "ltr" else "masked_lm"
        self.lm_accuracy = keras.metrics.SparseCategoricalAccuracy(f"{metric}_accuracy")
        self.lm_loss = keras.metrics.Mean(f"{metric}_loss")
        if nsp is not None:
            self.next_sentence_accuracy = keras.metrics.SparseCategoricalAccuracy("next_sentence_accuracy")
            self.next_sentence_loss = keras.metrics.Mean("next_sentence_loss")

    @property
    def next_sentence(self) -> bool:
        return self.objective == "mlm_nsp"

    def _lm_labels(self, y):
        """(ids, float32 weights) of the LM loss."""
        ids, weights = self.LABELS[self.objective][:2]
        return y[ids], tf.cast(y[weights], tf.float32)

    def _loss_denominators(self, y):
        if self.loss is not None:
            return None
        # The original divides the weighted sum by the weights' sum + 1e-5 (a batch without masks gives 0, not NaN).
        counts = {"lm": losses.replica_sum(tf.reduce_sum(self._lm_labels(y)[1])) + 1e-5}
        if self.next_sentence:
            counts["next_sentence"] = losses.replica_sum(tf.cast(tf.size(y["next_sentence_labels"]), tf.float32))
        return counts

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.loss is not None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        labels = self.LABELS[self.objective]
        if not isinstance(y, dict) or any(key not in y for key in labels):
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(f"BertPretrainer compiled without a loss trains on labels {list(labels)} (what "
                             f"bert_tf.pretraining.pretraining_dataset yields); got {got}")
        ids, weights = self._lm_labels(y)
        counts = self._denominators or self._loss_denominators(y)
        logits = y_pred["lm_logits" if self.objective == "ltr" else "mlm_logits"]
        ce = losses.sparse_cross_entropy(ids, logits)
        self.lm_loss.update_state(ce, weights)
        self.lm_accuracy.update_state(ids, logits, weights)
        loss = losses.weighted_share(ce, weights, counts["lm"])
        if self.next_sentence:
            nsp_labels = tf.reshape(y["next_sentence_labels"], [-1])
            nsp_ce = losses.sparse_cross_entropy(nsp_labels, y_pred["nsp_logits"])
            self.next_sentence_loss.update_state(nsp_ce)
            self.next_sentence_accuracy.update_state(nsp_labels, y_pred["nsp_logits"])
            loss += losses.weighted_share(nsp_ce, None, counts["next_sentence"])
        if self.losses:  # regularization, if a user adds any: Keras's own scaling for replicas
            loss += self._aggregate_additional_loss(keras.ops.sum(self.losses))
        return loss

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "next_sentence" in config:  # saved before the objectives had names
            config["objective"] = "mlm_nsp" if config.pop("next_sentence") else "mlm"
        return super().from_config(config)


class _LabelModel(_TaskModel):
    """A dropout + dense head on one encoder output (`_features`); the classifier and the tagger differ only there."""

    _head_args = ("num_classes", "dropout_rate")
    _features = ""

    def __init__(self, encoder, num_classes, dropout_rate=0.1, name=None, **kwargs):
        encoder = _as_encoder(encoder)
        inputs = encoder_inputs()
        policy = heads_policy(encoder, kwargs)
        head = ClassificationHead(num_outputs=num_classes, dropout_rate=dropout_rate,
                                  initializer_range=encoder.bert_config.initializer_range, dtype=policy,
                                  name="classifier")
        logits = head(encoder(inputs)[self._features])
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self._finish(encoder, policy, num_classes=num_classes, dropout_rate=dropout_rate)
        self.head = head


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(_LabelModel):
    """Sequence (pair) classification on the pooled [CLS] output; `num_classes=1` makes it a regression (STS-B).

    Output: `logits` float32 [batch, num_classes].

    Args:
      encoder: a `BertEncoder` or `BertConfig`.
      num_classes: number of labels (1 = one real-valued score).
      dropout_rate: dropout on the pooled output (paper: 0.1).
    """

    _features = "pooled_output"

    def __init__(self, encoder, num_classes, dropout_rate=0.1, name="bert_classifier", **kwargs):
        super().__init__(encoder, num_classes=num_classes, dropout_rate=dropout_rate, name=name, **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(_LabelModel):
    """Per-token labels (NER-style tagging) from `sequence_output`. Output: `logits` float32 [batch, seq, classes].

    Args:
      encoder: a `BertEncoder` or `BertConfig`.
      num_classes: number of tags.
      dropout_rate: dropout on the token features (paper: 0.1).
    """

    _features = "sequence_output"

    def __init__(self, encoder, num_classes, dropout_rate=0.1, name="bert_token_classifier", **kwargs):
        super().__init__(encoder, num_classes=num_classes, dropout_rate=dropout_rate, name=name, **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanQA(_TaskModel):
    """Extractive QA (SQuAD): a start vector S and end vector E scored against every token (paper section 4.2).

    Outputs `start_logits` and `end_logits`, float32 [batch, seq]. For SQuAD 2.0 the no-answer score is read at the
    [CLS] position (index 0), so the same head serves both versions.

    Args:
      encoder: a `BertEncoder` or `BertConfig`.
      dropout_rate: dropout on the token features (the original run_squad uses none beyond the encoder's).
      bilstm_head: put a randomly initialised bidirectional LSTM (hidden_size / 2 units each way, padding masked)
        between the encoder and the span head, trained with it: the paper's "+ BiLSTM" row of Table 5, which gives
        a left-to-right model the right context it lacks.
    """

    _head_args = ("dropout_rate", "bilstm_head")

    def __init__(self, encoder, dropout_rate=0.0, bilstm_head=False, name="bert_span_qa", **kwargs):
        encoder = _as_encoder(encoder)
        policy = heads_policy(encoder, kwargs)
        inputs = encoder_inputs()
        head = ClassificationHead(num_outputs=2, dropout_rate=dropout_rate,
                                  initializer_range=encoder.bert_config.initializer_range, dtype=policy, name="squad")
        features = encoder(inputs)["sequence_output"]
        bilstm = None
        if bilstm_head:
            bilstm = bidirectional_lstm(encoder.bert_config.hidden_size // 2, policy, "bilstm")
            features = bilstm(features, mask=keras.ops.cast(inputs["input_mask"], "bool"))
        logits = head(features)
        outputs = {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._finish(encoder, policy, dropout_rate=dropout_rate, bilstm_head=bool(bilstm_head))
        self.head = head
        self.bilstm = bilstm


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(_TaskModel):
    """Multiple choice (SWAG): each (context, ending) pair is encoded, scored by a vector on [CLS], and the scores
    of one example are returned side by side for a softmax over choices (paper section 4.4).

    Inputs: the encoder inputs with an extra choices axis, int32 [batch, num_choices, seq]. Output: `logits`
    float32 [batch, num_choices]. The number of choices may vary between batches.

    Args:
      encoder: a `BertEncoder` or `BertConfig`.
      dropout_rate: dropout on the pooled output (paper: 0.1).
    """

    _head_args = ("dropout_rate",)

    def __init__(self, encoder, dropout_rate=0.1, name="bert_multiple_choice", **kwargs):
        encoder = _as_encoder(encoder)
        policy = heads_policy(encoder, kwargs)
        inputs = encoder_inputs(batch_shape=(None, None))
        fold = FoldChoices(dtype="float32", name="fold_choices")  # reshapes only: float32 scores stay float32
        flat = {k: fold(v) for k, v in inputs.items()}
        head = ClassificationHead(num_outputs=1, dropout_rate=dropout_rate,
                                  initializer_range=encoder.bert_config.initializer_range, dtype=policy,
                                  name="classifier")
        scores = head(encoder(flat)["pooled_output"])
        logits = fold(scores, like=inputs["input_word_ids"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self._finish(encoder, policy, dropout_rate=dropout_rate)
        self.head = head


def bidirectional_lstm(units: int, policy, name: str):
    """A BiLSTM over a sequence, `units` each way, returning every position (the paper's probe and "+ BiLSTM")."""
    policy = parameter_policy(policy)  # the wrapper builds its two LSTMs from the inner one's config, policy too
    return keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True, dtype=policy), dtype=policy,
                                      name=name)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertFeatureTagger(_TaskModel):
    """The paper's feature-based NER probe (section 5.3, Table 7): a frozen `BertEncoder`, one `FeatureCombination`
    of its layers, a two-layer BiLSTM of `lstm_units` each way, then a per-token classifier. Only the combination's
    weights (for the weighted sums), the BiLSTM and the classifier train; the encoder runs in inference mode (no
    dropout) and its weights never change. Outputs `logits` float32 [batch, seq, num_classes], as `BertTokenClassifier`.

    Args:
      encoder: a `BertEncoder` or `BertConfig` (its weights are what is probed: load them before training). The
        probe owns it: an encoder given is frozen and set to inference mode (`inference_only`) for every model
        that uses it; give the probe an encoder of its own.
      num_classes: tags.
      combination: one of `COMBINATIONS`.
      lstm_units: each LSTM's width per direction (the paper: 768).
      dropout_rate: dropout before the classifier.
    """

    _head_args = ("num_classes", "combination", "lstm_units", "dropout_rate")

    def __init__(self, encoder, num_classes, combination="concat_last_four", lstm_units=768, dropout_rate=0.1,
                 name="bert_feature_tagger", **kwargs):
        encoder = _as_encoder(encoder)
        policy = heads_policy(encoder, kwargs)
        inputs = encoder_inputs()
        combine = FeatureCombination(combination, encoder.bert_config.num_hidden_layers,
                                     dtype=parameter_policy(policy), name="combination")
        encoder.inference_only = True  # Keras passes a training call's mode on, whatever this call says
        features = combine(encoder(inputs))
        mask = keras.ops.cast(inputs["input_mask"], "bool")
        lstms = [bidirectional_lstm(lstm_units, policy, f"bilstm_{i}") for i in range(2)]
        for lstm in lstms:
            features = lstm(features, mask=mask)
        head = ClassificationHead(num_outputs=num_classes, dropout_rate=dropout_rate,
                                  initializer_range=encoder.bert_config.initializer_range, dtype=policy,
                                  name="classifier")
        super().__init__(inputs=inputs, outputs={"logits": head(features)}, name=name, **kwargs)
        self._finish(encoder, policy, num_classes=num_classes, combination=combination, lstm_units=lstm_units,
                     dropout_rate=dropout_rate)
        self.combine, self.lstms, self.head = combine, lstms, head
        freeze(encoder)
