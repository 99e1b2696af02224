"""SavedModel modules of a pretrained model; the fine-tuned task families' serving modules live with their
families in `bert_tf.tasks`, the TF-Hub-style text preprocessor is `bert_tf.serving.Preprocessor`.

- `EncoderModule`: TF-Hub-style encoder on the three inputs -> `sequence_output`, `pooled_output`,
  `encoder_outputs`; fine-tunable through Keras 3's TFSMLayer and TF Hub's reusable-SavedModel API.
- `MaskedLMModule`: `text` with `[MASK]` written where a word piece is wanted -> the `top_k` most probable pieces
  and their probabilities for every mask (dense: padded with "" / 0, with `num_masks`).
- `MaskedLMSubModule`: the TF-Hub encoder's optional `mlm` sub-object.
"""

from __future__ import annotations

import bert_tf  # noqa: F401

import tensorflow as tf

from bert_tf.serving import hold, string_spec, traced_for_saving
from bert_tf.tokenization import merge_words, pack_inputs_graph, row_ids


ENCODER_INPUTS = {key: tf.TensorSpec([None, None], tf.int32, name=key)
                  for key in ("input_word_ids", "input_mask", "input_type_ids")}


class EncoderModule(tf.Module):
    """The encoder with the TF-Hub BERT signature (int32 `input_word_ids`, `input_mask`, `input_type_ids`), and
    fine-tunable from the SavedModel:

    - `serve` (also the `serving_default` signature) and `serve_training`, the same function with dropout on: the
      call and training endpoints of Keras 3's `TFSMLayer(path, call_endpoint="serve",
      call_training_endpoint="serve_training", trainable=True)`;
    - TF Hub's reusable-SavedModel API for `hub.KerasLayer(path, trainable=True)`: `__call__(inputs, training)`
      with a Model Garden encoder's outputs (`sequence_output`, `pooled_output`, `default`, `encoder_outputs` as a
      list), `variables`, `trainable_variables` and `regularization_losses` (none: BERT has no weight penalty in
      the graph; AdamW's decay is the optimizer's).
    """

    # tf.Module computes these from its attributes; a reusable SavedModel stores them as lists (set in __init__,
    # from the traces made for the save).
    variables = trainable_variables = None

    def __init__(self, encoder, name="encoder"):
        super().__init__(name=name)
        hold(self, "encoder", encoder)
        self.serve = tf.function(lambda inputs: self._flat(inputs, False), autograph=False,
                                 input_signature=[ENCODER_INPUTS])
        self.serve_training = tf.function(lambda inputs: self._flat(inputs, True), autograph=False,
                                          input_signature=[ENCODER_INPUTS])
        self.__call__ = tf.function(self._call, autograph=False)
        with traced_for_saving():
            traced = [self.__call__.get_concrete_function(ENCODER_INPUTS, training=training)
                      for training in (False, True)]
            traced += [self.serve.get_concrete_function(), self.serve_training.get_concrete_function()]
        self.variables = list({id(v): v for f in traced for v in f.variables}.values())
        self.trainable_variables = list({id(v): v for f in traced for v in f.trainable_variables}.values())
        self.regularization_losses = []

    def _call(self, inputs, training=False):
        outputs = self.encoder(inputs, training=training)
        return {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"],
                "default": outputs["pooled_output"], "encoder_outputs": list(outputs["encoder_outputs"])}

    def _flat(self, inputs, training):
        outputs = self.encoder(inputs, training=training)
        result = {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"]}
        result.update({f"encoder_outputs_{i}": layer for i, layer in enumerate(outputs["encoder_outputs"])})
        return result

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class MaskedLMModule(tf.Module):
    """`[MASK]` fill-ins on raw text with a pretraining model's MLM head. The literal `[MASK]` is cut out before
    tokenization (which would split it) and replaced by the mask id; masks beyond `seq_length` are dropped."""

    def __init__(self, pretrainer, preprocessor, top_k=5, name="masked_lm"):
        super().__init__(name=name)
        hold(self, "model", pretrainer)
        self.preprocessor, self.top_k = preprocessor, top_k
        self.vocab = tf.constant(preprocessor.tokenizer.vocab)
        self._mask = preprocessor.tokenizer.vocab.index("[MASK]")
        self.serve = tf.function(self._serve, autograph=False, input_signature=[string_spec("text")])

    def _serve(self, text):
        pre = self.preprocessor
        parts = tf.strings.split(text, "[MASK]")  # [batch, (parts)]
        pieces = pre.tokenizer(parts.flat_values)  # [parts, (pieces)]
        not_last = tf.not_equal(tf.ragged.range(parts.row_lengths()).flat_values + 1,
                                tf.gather(parts.row_lengths(), row_ids(parts)))
        masks = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(tf.cast(not_last, tf.int64))],
                                                         tf.constant(self._mask, tf.int64)),
                                                 tf.cast(not_last, tf.int64))
        ids = merge_words(parts.with_flat_values(tf.concat([pieces, masks], axis=1)))
        inputs = pack_inputs_graph([ids], pre.seq_length, pre._cls, pre._sep)
        is_mask = tf.equal(inputs["input_word_ids"], self._mask)
        positions = tf.ragged.boolean_mask(tf.broadcast_to(tf.range(pre.seq_length), tf.shape(is_mask)), is_mask)
        inputs["masked_lm_positions"] = tf.cast(positions.to_tensor(0), tf.int32)
        logits = self.model(inputs)["mlm_logits"]
        probabilities, top = tf.math.top_k(tf.nn.softmax(logits, axis=-1), self.top_k)
        present = tf.sequence_mask(positions.row_lengths(), tf.shape(top)[1])[:, :, None]
        return {"top_tokens": tf.where(present, tf.gather(self.vocab, top), ""),
                "top_probabilities": tf.where(present, probabilities, 0.0),
                "num_masks": positions.row_lengths()}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class MaskedLMSubModule(tf.Module):
    """The TF-Hub encoder's optional `mlm` sub-object: encoder inputs + `masked_lm_positions` -> `mlm_logits` (and
    the encoder outputs), for exports from a checkpoint that has the MLM head."""

    def __init__(self, pretrainer, name="mlm"):
        super().__init__(name=name)
        hold(self, "model", pretrainer)
        spec = {**ENCODER_INPUTS, "masked_lm_positions": tf.TensorSpec([None, None], tf.int32,
                                                                       name="masked_lm_positions")}
        self.__call__ = tf.function(self._call, autograph=False, input_signature=[spec])

    def _call(self, inputs):
        return {"mlm_logits": self.model(inputs)["mlm_logits"]}
