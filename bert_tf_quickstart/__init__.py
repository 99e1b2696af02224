"""The main job, an application on top of `bert_tf`, `data_gen` and `export`: raw text to answers from served
models in one command (`python -m bert_tf_quickstart`). Nothing in those three packages imports it.

`bert_tf` is imported first, before any module here imports TensorFlow or Keras: it chooses TensorFlow's CPU kernels
(oneDNN) and quiets its start-up log, which it can do only before TensorFlow is loaded.
"""

import bert_tf  # noqa: F401
