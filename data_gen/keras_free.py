"""create_pretraining_data's main process without Keras.

The main process reads the corpus and tokenizes it with TensorFlow and tensorflow-text (`InGraphTokenizer`); it never
builds a model. TensorFlow's import nevertheless imports Keras (an "eager load of Keras' code" at the end of
`tensorflow/__init__.py`, whose failure it ignores; the legacy `tf_keras` instead under `TF_USE_LEGACY_KERAS`), and
so would tensorflow-text's, for its Keras layers: time and memory in a start-up that bounds the command on small
corpora (BENCHMARKS.md, "Pretraining data generation", measures both). `import_bert_tf` imports bert_tf, and
TensorFlow with it, with both refused: `import keras` finds Keras (TensorFlow reads where it is installed, for
`tf.keras`) and fails to load it. Afterwards Keras loads as usual wherever it is imported (`tf.keras`,
`bert_tf.BertEncoder`, tensorflow-text's layers at their first use): only the eager load is skipped.

What runs during the refusal must not touch `tf.keras` (or `tf.losses`, `tf.metrics`, `tf.optimizers`,
`tf.initializers`): TensorFlow's lazy loader behind them marks itself loaded before it imports Keras, so a failed
first use would leave it broken for the rest of the process (a test uses `tf.keras` after the refusal). Standard
library only: it runs before TensorFlow's import.
"""

import importlib.machinery
import sys

REFUSED = ("keras", "tf_keras")


class _Refused:
    """A loader that finds Keras and declines to load it."""

    @staticmethod
    def create_module(spec):
        raise ModuleNotFoundError(f"{spec.name} is not loaded while bert_tf imports TensorFlow here "
                                  "(data_gen.keras_free)", name=spec.name)

    @staticmethod
    def exec_module(module):  # never reached: create_module raises
        raise ModuleNotFoundError(module.__name__, name=module.__name__)


class _RefuseKeras:
    """A finder for `sys.meta_path`: Keras's own spec, with `_Refused` as its loader. `refuses_keras` tells
    `import bert_tf` that a missing Keras is this refusal, not a broken installation."""

    refuses_keras = True

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in REFUSED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _Refused()
        return spec


def import_bert_tf() -> None:
    """Imports bert_tf with Keras refused while it imports TensorFlow; as a plain import where either of them, or
    Keras, is imported already."""
    finder = None if any(name in sys.modules for name in ("bert_tf", "tensorflow") + REFUSED) else _RefuseKeras()
    if finder:
        sys.meta_path.insert(0, finder)
    try:
        import bert_tf  # noqa: F401
    finally:
        if finder:
            sys.meta_path.remove(finder)
