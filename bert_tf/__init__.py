"""bert-tf: BERT (Devlin et al., 2018) in TensorFlow 2 and Keras 3."""

from bert_tf.config import BertConfig, ConfigError
from bert_tf.models import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer, BertSpanQA,
                            BertTokenClassifier)

__all__ = ["BertConfig", "ConfigError", "BertEncoder", "BertPretrainer", "BertClassifier", "BertTokenClassifier",
           "BertSpanQA", "BertMultipleChoice"]
__version__ = "0.1.0"
