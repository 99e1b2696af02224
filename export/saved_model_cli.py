r"""TensorFlow's `saved_model_cli` with the tensorflow-text ops registered, so that `run` works on our exports
(the plain `saved_model_cli` does not import tensorflow_text and `run` would fail with "Op type not registered";
`show` works with either).

  python -m export.saved_model_cli show --all --dir exports/mrpc/1
  python -m export.saved_model_cli run --dir exports/mrpc/1 --tag_set serve --signature_def serving_default \
      --input_exprs 'text_a=["The cat sat."];text_b=["A cat was sitting."]'
"""

import tensorflow_text  # noqa: F401  (registers the ops, as TF Serving links them)
from tensorflow.python.tools import saved_model_cli


def run():
    saved_model_cli.main()


if __name__ == "__main__":
    run()
