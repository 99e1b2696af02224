"""SavedModel modules that take raw strings: the tensorflow-text preprocessing is part of the graph.

- `Preprocessor`: TF-Hub-style preprocessing: `tokenize` (strings -> ragged word-piece ids), `tokenize_with_offsets`
  (plus byte offsets), `bert_pack_inputs` (one or two ragged segments -> the three model inputs), and serving
  signatures `serving_default` (one sentence) and `pairs` (two) returning `input_word_ids`, `input_mask`,
  `input_type_ids`. Special-token ids are exported as variables (`cls_id`, `sep_id`, `pad_id`, `mask_id`).
- `ClassifierModule`: raw text (a pair for pair tasks) -> class probabilities and the predicted label name
  (regression: the score), for a model fine-tuned with `run_classifier`.
- `EncoderModule`: TF-Hub-style encoder on the three inputs -> `sequence_output`, `pooled_output`,
  `encoder_outputs`.

The vocabulary and label names are also attached as `tf.saved_model.Asset`s (`assets/vocab.txt`, `labels.txt`),
so a copied export directory carries them; the graph itself holds the word-piece model and label names as
constants, and loads with `tensorflow` and `tensorflow_text` imported, nothing else.
"""

from __future__ import annotations

from bert_tf.tokenization import BertTokenizerLayer, pack_inputs_graph  # before TF: sets TF_ENABLE_ONEDNN_OPTS

import tensorflow as tf

STRINGS = tf.TensorSpec([None], tf.string)


def hold(module: tf.Module, name: str, model) -> None:
    """Keeps a Keras model on `module` without tf.Module's object tracking seeing it.

    Tracked, a Keras 3 model saves its `keras.Variable` wrappers while the serving functions capture the
    tf.Variables inside them; `tf.saved_model.load` copes, but the session-based loader that TF Serving uses
    restores the wrappers and leaves the captured variables uninitialised ("Could not find variable ..."). The
    captured variables are tracked instead, by `track_captured_variables`, as Keras's own ExportArchive does."""
    object.__setattr__(module, name, model)


def trim(inputs: dict) -> dict:
    """Packed inputs cut to the longest row of the batch: the padding beyond it changes no output (attention never
    reads padded positions), so a short request costs a short sequence, not `seq_length`."""
    width = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=-1)), 1)
    return {key: value[..., :width] for key, value in inputs.items()}


def track_captured_variables(module: tf.Module, functions) -> None:
    """Tracks on `module` every variable that the (input-signature) tf.functions capture."""
    seen, variables = set(), []
    for function in functions:
        for variable in function.get_concrete_function().variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                variables.append(variable)
    module.captured_variables = variables


class Preprocessor(tf.Module):
    """Text -> BERT inputs, in the graph. Long inputs are truncated longest-first to `seq_length` (the original's
    rule); `seq_length` defaults to the value given at export and can be passed to `bert_pack_inputs`.

    Args:
      vocab_file: the model's `vocab.txt`.
      do_lower_case: as the model was trained.
      seq_length: default packed length of the serving signatures.
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True, seq_length: int = 128, name="preprocessor"):
        super().__init__(name=name)
        self.tokenizer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
        vocab = self.tokenizer.vocab
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.seq_length = seq_length
        self.cls_id = tf.Variable(vocab.index("[CLS]"), trainable=False, name="cls_id")
        self.sep_id = tf.Variable(vocab.index("[SEP]"), trainable=False, name="sep_id")
        self.pad_id = tf.Variable(vocab.index("[PAD]") if "[PAD]" in vocab else 0, trainable=False, name="pad_id")
        self.mask_id = tf.Variable(vocab.index("[MASK]") if "[MASK]" in vocab else -1, trainable=False,
                                   name="mask_id")
        self._cls, self._sep = vocab.index("[CLS]"), vocab.index("[SEP]")

    @tf.function(input_signature=[STRINGS])
    def tokenize(self, text):
        """strings [batch] -> ragged int64 word-piece ids [batch, (pieces)]."""
        return self.tokenizer(text)

    @tf.function(input_signature=[STRINGS])
    def tokenize_with_offsets(self, text):
        """strings [batch] -> (ids, start byte offsets, end byte offsets), ragged [batch, (pieces)]."""
        return self.tokenizer.tokenize_with_offsets(text)

    @tf.function
    def bert_pack_inputs(self, segments, seq_length=None):
        """1 or 2 ragged id segments -> dict of int32 [batch, seq_length]: `[CLS] A [SEP] (B [SEP])`.
        Exported for one and two segments with `seq_length` an int32 scalar tensor (as TF-Hub preprocessors)."""
        return pack_inputs_graph(list(segments), self.seq_length if seq_length is None else seq_length,
                                 self._cls, self._sep)

    @tf.function(input_signature=[STRINGS])
    def serve_single(self, text):
        return pack_inputs_graph([self.tokenizer(text)], self.seq_length, self._cls, self._sep)

    @tf.function(input_signature=[STRINGS, STRINGS])
    def serve_pairs(self, text_a, text_b):
        return pack_inputs_graph([self.tokenizer(text_a), self.tokenizer(text_b)], self.seq_length, self._cls,
                                 self._sep)

    def signatures(self) -> dict:
        ragged = tf.RaggedTensorSpec([None, None], tf.int64)
        for count in (1, 2):  # trace the packing for the saved object, as TF-Hub preprocessors have it
            self.bert_pack_inputs.get_concrete_function([ragged] * count, tf.TensorSpec([], tf.int32))
        return {"serving_default": self.serve_single, "pairs": self.serve_pairs}


class EncoderModule(tf.Module):
    """The encoder with the TF-Hub BERT signature: int32 `input_word_ids`, `input_mask`, `input_type_ids`."""

    def __init__(self, encoder, name="encoder"):
        super().__init__(name=name)
        hold(self, "encoder", encoder)

    @tf.function(input_signature=[{key: tf.TensorSpec([None, None], tf.int32, name=key)
                                   for key in ("input_word_ids", "input_mask", "input_type_ids")}])
    def serve(self, inputs):
        outputs = self.encoder(inputs)
        result = {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"]}
        result.update({f"encoder_outputs_{i}": layer for i, layer in enumerate(outputs["encoder_outputs"])})
        return result

    def signatures(self) -> dict:
        return {"serving_default": self.serve}


class ClassifierModule(tf.Module):
    """Raw text -> `probabilities` [batch, classes] and `label` (name of the most probable class); for a
    regression task `score` [batch]. Pair tasks take `text_a` and `text_b`, single-sentence tasks `text`. Inputs
    are truncated to `seq_length` as in training; the batch runs at the length of its longest row."""

    def __init__(self, model, preprocessor: Preprocessor, labels, pairs: bool, regression: bool, labels_file=None,
                 name="classifier"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.pairs, self.regression = pairs, regression
        self.label_names = tf.constant(list(labels) or [""])
        if labels_file:
            self.labels_file = tf.saved_model.Asset(labels_file)
        if pairs:
            self.serve = tf.function(self._pair, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                                                  tf.TensorSpec([None], tf.string, name="text_b")])
        else:
            self.serve = tf.function(self._single, input_signature=[tf.TensorSpec([None], tf.string, name="text")])

    def _outputs(self, inputs):
        logits = self.model(trim(inputs))["logits"]
        if self.regression:
            return {"score": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "label": tf.gather(self.label_names, tf.argmax(probabilities, axis=-1))}

    def _pair(self, text_a, text_b):
        return self._outputs(self.preprocessor.serve_pairs(text_a, text_b))

    def _single(self, text):
        return self._outputs(self.preprocessor.serve_single(text))

    def signatures(self) -> dict:
        return {"serving_default": self.serve}
