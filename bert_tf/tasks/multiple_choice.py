"""The multiple-choice family: one context and several endings, the answer the index of the right ending, as SWAG
(paper section 4.4). Trained by `run_classifier` (and `run_swag`) exactly as classification, except that every
(context, ending) pair is packed by the same in-graph `Preprocessor` and the model scores the choices against
each other (`BertMultipleChoice`)."""

from __future__ import annotations

import tensorflow as tf

from bert_tf.serving import hold, string_spec, trim
from bert_tf.tasks.base import Example
from bert_tf.tasks.classification import Classification, encode


class MultipleChoice(Classification):
    kinds = ("multiple_choice",)
    export_kind = "multiple_choice"
    program = "run_swag"

    def kind(self, task):
        return self.kinds[0]

    def build_model(self, task, config, dropout_rate: float, dtype=None):
        from bert_tf.models import BertEncoder, BertMultipleChoice

        return BertMultipleChoice(BertEncoder(config, dtype=dtype), dropout_rate=dropout_rate)

    def features(self, examples, vocab_file: str, do_lower_case: bool, max_seq_length: int) -> dict:
        """Every (text_a, choice) pair packed as a sentence pair -> int32 arrays [n, choices, max_seq_length]."""
        count = len(examples[0].choices)
        flat = [Example(e.guid, e.text_a, choice) for e in examples for choice in e.choices]
        packed = encode(flat, vocab_file, do_lower_case, max_seq_length)
        return {key: value.reshape(len(examples), count, max_seq_length) for key, value in packed.items()}

    def serving_module(self, model, info, preprocessor, *, doc_stride, scratch):
        return MultipleChoiceModule(model, preprocessor=preprocessor)


FAMILY = MultipleChoice()


class MultipleChoiceModule(tf.Module):
    """Multiple choice on raw text: `context` [batch] and `endings` [batch, choices] -> `probabilities`, `best`;
    each (context, ending) pair packed as `run_swag` packs it, and scored."""

    def __init__(self, model, preprocessor, name="multiple_choice"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.serve = tf.function(self._serve, autograph=False,
                                 input_signature=[string_spec("context"), string_spec("endings", 2)])

    def _serve(self, context, endings):
        pre = self.preprocessor
        choices = tf.shape(endings)[1]
        packed = trim(pre.serve_pairs(tf.repeat(context, choices), tf.reshape(endings, [-1])))
        inputs = {key: tf.reshape(value, [-1, choices, tf.shape(value)[-1]]) for key, value in packed.items()}
        probabilities = tf.nn.softmax(self.model(inputs)["logits"], axis=-1)
        return {"probabilities": probabilities, "best": tf.argmax(probabilities, axis=-1)}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}
