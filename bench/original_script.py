"""Run google-research/bert's own `create_pretraining_data.py`, unmodified, on TensorFlow 2.

  python -m bench.original_script /path/to/google-research/bert -- --input_file=... --output_file=... ...

The script is TF1 code (`tf.flags`, `tf.gfile`, `tf.python_io`, `tf.app.run`), all of which `tf.compat.v1`
still has, so it runs as written once `import tensorflow` inside it (and inside its `tokenization.py`) gives
`tensorflow.compat.v1`. Nothing of it is copied here: the benchmark takes the directory of a checkout
(`git clone https://github.com/google-research/bert`), since it cannot be fetched at run time.
"""

import os
import runpy
import sys


def script_path(checkout: str) -> str:
    """The checkout's create_pretraining_data.py, or one line saying what is missing."""
    path = os.path.join(checkout, "create_pretraining_data.py")
    if not os.path.isfile(path) or not os.path.isfile(os.path.join(checkout, "tokenization.py")):
        raise SystemExit(f"--original_dir={checkout}: no create_pretraining_data.py and tokenization.py there; give "
                         "the directory of a clone of https://github.com/google-research/bert")
    return path


def run(checkout: str, argv: list[str]) -> None:
    """Runs the script in this process with `argv` as its flags; returns when it has written its output."""
    path = script_path(checkout)
    import tensorflow.compat.v1 as tf1

    sys.modules["tensorflow"] = tf1  # what the script and its tokenization module import as `tensorflow`
    sys.path.insert(0, checkout)
    sys.argv = [path] + list(argv)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:  # tf.app.run ends the process through sys.exit(main(...))
        if e.code not in (None, 0):
            raise


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 1:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    run(args[0], [a for a in args[1:] if a != "--"])
