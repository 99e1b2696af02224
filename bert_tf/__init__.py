"""bert-tf: BERT (Devlin et al., 2018) in TensorFlow 2 and Keras 3.

Imported before TensorFlow, the package turns on its oneDNN CPU kernels on x86 (`bert_tf.onednn.prefer_onednn`) and
imports TensorFlow with its C++ log quiet: none of its start-up lines, and `TF_CPP_MIN_LOG_LEVEL=3` unless that is set
or absl's `--verbosity` is on the command line (`bert_tf.tf_log`; `TF_CPP_MIN_LOG_LEVEL=0` shows every line). It
also defers matplotlib, which Keras imports then, to its first use (`bert_tf.deferred_imports`), and imports without
garbage collections (`bert_tf.heap`). Where Keras is refused during the import (data_gen's main process,
`data_gen.keras_free`), the model classes are imported at their first use.

TensorFlow reads both settings once, when it is imported, so import `bert_tf` (or any module of it) before
`tensorflow` or `keras`. This is the reason, stated once here, why the CLIs, `data_gen`, the exporter, the benchmarks
and the quickstart import `bert_tf` before TensorFlow (`import bert_tf  # noqa: F401` where nothing else of it is
used). If TensorFlow came first with oneDNN off, `import bert_tf` warns and says how to fix it.
"""

import sys

from bert_tf.deferred_imports import defer_matplotlib
from bert_tf.heap import collector_paused
from bert_tf.onednn import prefer_onednn
from bert_tf.tf_log import quiet_import

prefer_onednn()
defer_matplotlib()
with collector_paused(promote=True):
    quiet_import()
    from bert_tf.config import BertConfig, ConfigError  # noqa: E402 (after the settings TensorFlow reads at import)
    try:
        from bert_tf.models import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer,  # noqa: E402,F401
                                    BertSpanQA, BertTokenClassifier)
    except ModuleNotFoundError as e:  # Keras refused (`data_gen.keras_free`): the models load at first use
        if e.name != "keras" or not any(getattr(finder, "refuses_keras", False) for finder in sys.meta_path):
            raise

_MODELS = ("BertClassifier", "BertEncoder", "BertMultipleChoice", "BertPretrainer", "BertSpanQA",
           "BertTokenClassifier")


def __getattr__(name):
    """The model classes in a process that imported bert_tf with Keras refused: imported at first use."""
    if name in _MODELS:
        from bert_tf import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BertConfig", "ConfigError", *_MODELS]
__version__ = "0.1.0"
