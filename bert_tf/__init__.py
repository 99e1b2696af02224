"""bert-tf: BERT (Devlin et al., 2018) in TensorFlow 2 and Keras 3.

Imported before TensorFlow, the package turns on its oneDNN CPU kernels on x86 (`bert_tf.onednn.prefer_onednn`).
"""

from bert_tf.onednn import prefer_onednn

prefer_onednn()

from bert_tf.config import BertConfig, ConfigError  # noqa: E402 (after prefer_onednn: TF reads it at import)
from bert_tf.models import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer,  # noqa: E402
                            BertSpanQA, BertTokenClassifier)

__all__ = ["BertConfig", "ConfigError", "BertEncoder", "BertPretrainer", "BertClassifier", "BertTokenClassifier",
           "BertSpanQA", "BertMultipleChoice"]
__version__ = "0.1.0"
