"""What every SavedModel that takes raw strings is built from: the in-graph `Preprocessor` (text -> BERT inputs
with tensorflow-text), which fine-tuning also calls to make its training features so that an export cannot drift
from training, and the helpers that keep Keras models inside `tf.Module`s loadable by TF Serving.

`Preprocessor` is TF-Hub-style: `tokenize` (strings -> ragged word-piece ids), `tokenize_with_offsets` (plus byte
offsets), `bert_pack_inputs` (one or two ragged segments -> the three model inputs), and serving signatures
`serving_default` (one sentence) and `pairs` (two) returning `input_word_ids`, `input_mask`, `input_type_ids`.
Special-token ids are exported as variables (`cls_id`, `sep_id`, `pad_id`, `mask_id`); the vocabulary is attached
as an asset (`assets/vocab.txt`), and the graph holds the word-piece model as constants, so an export loads with
`tensorflow` and `tensorflow_text` imported, nothing else.
"""

from __future__ import annotations

import os

from bert_tf.tokenization import pack_inputs_graph
from bert_tf.tokenizer_layer import BertTokenizerLayer

import tensorflow as tf

STRINGS = tf.TensorSpec([None], tf.string)


def string_spec(name: str, rank: int = 1) -> tf.TensorSpec:
    """A named string input of a serving signature: [batch] (rank 1) or [batch, n] (rank 2)."""
    return tf.TensorSpec([None] * rank, tf.string, name=name)


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


# The options every export is saved with. TF keys a tf.function's traces on the save options' variable policy while
# `tf.saved_model.save` runs, so a trace made outside a save is made again inside it.
SAVE_OPTIONS = tf.saved_model.SaveOptions()


def traced_for_saving():
    """A context in which tf.functions trace as `tf.saved_model.save(..., options=SAVE_OPTIONS)` will trace them,
    so that the save reuses those traces."""
    from tensorflow.python.saved_model import save_context

    return save_context.save_context(SAVE_OPTIONS)


def track_captured_variables(module: tf.Module, functions) -> None:
    """Tracks on `module` every variable that the (input-signature) tf.functions capture, traced for saving."""
    seen, variables = set(), []
    with traced_for_saving():
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

    @tf.function(autograph=False, input_signature=[STRINGS])
    def tokenize(self, text):
        """strings [batch] -> ragged int64 word-piece ids [batch, (pieces)]."""
        return self.tokenizer(text)

    @tf.function(autograph=False, input_signature=[STRINGS])
    def tokenize_with_offsets(self, text):
        """strings [batch] -> (ids, start byte offsets, end byte offsets), ragged [batch, (pieces)]."""
        return self.tokenizer.tokenize_with_offsets(text)

    @tf.function(autograph=False)
    def bert_pack_inputs(self, segments, seq_length=None):
        """1 or 2 ragged id segments -> dict of int32 [batch, seq_length]: `[CLS] A [SEP] (B [SEP])`.
        Exported for one and two segments with `seq_length` an int32 scalar tensor (as TF-Hub preprocessors)."""
        return pack_inputs_graph(list(segments), self.seq_length if seq_length is None else seq_length,
                                 self._cls, self._sep)

    @tf.function(autograph=False, input_signature=[STRINGS])
    def serve_single(self, text):
        return pack_inputs_graph([self.tokenizer(text)], self.seq_length, self._cls, self._sep)

    @tf.function(autograph=False, input_signature=[STRINGS, STRINGS])
    def serve_pairs(self, text_a, text_b):
        return pack_inputs_graph([self.tokenizer(text_a), self.tokenizer(text_b)], self.seq_length, self._cls,
                                 self._sep)

    def signatures(self) -> dict:
        ragged = tf.RaggedTensorSpec([None, None], tf.int64)
        for count in (1, 2):  # trace the packing for the saved object, as TF-Hub preprocessors have it
            self.bert_pack_inputs.get_concrete_function([ragged] * count, tf.TensorSpec([], tf.int32))
        return {"serving_default": self.serve_single, "pairs": self.serve_pairs}


def labels_asset(module: tf.Module, labels, directory: str) -> None:
    """Attaches `labels` (one per line) to `module` as the asset `labels.txt`, written in `directory` first."""
    from bert_tf.training import write_lines

    path = os.path.join(directory, "labels.txt")
    write_lines(path, labels)
    module.labels_file = tf.saved_model.Asset(path)
