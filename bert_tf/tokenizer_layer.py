"""`BertTokenizerLayer`: the in-graph WordPiece tokenizer (`tokenization.InGraphTokenizer`) as a Keras layer."""

import keras

from bert_tf.tokenization import InGraphTokenizer


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenizerLayer(InGraphTokenizer, keras.layers.Layer):
    """String tensor [batch] -> ragged int64 ids [batch, (pieces)], with `InGraphTokenizer`'s methods (offsets,
    words). The vocabulary is kept in the layer's config, so a saved model does not need the file.

    Args: `InGraphTokenizer`'s, and Keras's layer arguments.
    """

    def __init__(self, vocab_file=None, do_lower_case=True, vocab=None, **kwargs):
        keras.layers.Layer.__init__(self, **kwargs)
        InGraphTokenizer.__init__(self, vocab_file, do_lower_case, vocab)

    def call(self, text):
        return self.tokenize(text)

    def get_config(self):
        config = super().get_config()
        config.update(vocab=list(self.vocab), do_lower_case=self.do_lower_case)
        return config
