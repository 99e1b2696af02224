"""Keras layers of BERT, one concept per module."""

from bert_tf.layers.attention import BertSelfAttention, causal_bias, padding_bias
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.heads import BertPooler, ClassificationHead, FoldChoices, MaskedLMHead
from bert_tf.layers.layer_norm import LayerNorm
from bert_tf.layers.saved_model_layer import SavedModelLayer
from bert_tf.layers.scalar_mix import ScalarMix
from bert_tf.layers.transformer_block import BertTransformerBlock

__all__ = ["BertEmbeddings", "BertSelfAttention", "BertTransformerBlock", "BertPooler", "MaskedLMHead",
           "ClassificationHead", "Dropout", "FoldChoices", "LayerNorm", "SavedModelLayer", "ScalarMix", "causal_bias",
           "padding_bias"]
