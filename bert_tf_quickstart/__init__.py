"""The main job, an application on top of `bert_tf`, `data_gen` and `export`: raw text to answers from served
models in one command (`python -m bert_tf_quickstart`). Nothing in those three packages imports it.

`bert_tf` is imported first, before any module here imports TensorFlow or Keras (see `bert_tf`'s docstring).
"""

import bert_tf  # noqa: F401
