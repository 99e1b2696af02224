"""bert-tf: BERT (Devlin et al., 2018) in TensorFlow 2 and Keras 3.

Importing the package turns on TensorFlow's oneDNN CPU kernels (`TF_ENABLE_ONEDNN_OPTS=1`) unless the variable is
already set. TensorFlow enables them by itself only on x86 CPUs with AVX-512 VNNI/BF16 or AMX; on the AVX2 CPUs
that are still common in clouds (AMD EPYC among them) it falls back to Eigen's GEMM, and BERT's step is mostly GEMM:
the BERT-Base fine-tuning step runs ~1.2x faster with oneDNN on (BENCHMARKS.md). TensorFlow reads the variable once,
when it is imported, so this takes effect only when `bert_tf` is imported first; set `TF_ENABLE_ONEDNN_OPTS=0` to
keep Eigen's kernels.
"""

import os as _os

_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from bert_tf.config import BertConfig, ConfigError
from bert_tf.models import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer, BertSpanQA,
                            BertTokenClassifier)

__all__ = ["BertConfig", "ConfigError", "BertEncoder", "BertPretrainer", "BertClassifier", "BertTokenClassifier",
           "BertSpanQA", "BertMultipleChoice"]
__version__ = "0.1.0"
