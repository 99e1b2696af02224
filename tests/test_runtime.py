"""What importing `bert_tf` sets for the process: TensorFlow's oneDNN CPU kernels on, unless the user said otherwise."""

import os
import subprocess
import sys

import pytest

PROBE = ("import bert_tf\n"
         "from tensorflow.python.util import _pywrap_util_port\n"
         "print('onednn', _pywrap_util_port.IsMklEnabled())\n")


@pytest.mark.parametrize("setting, expected", [(None, True), ("0", False)])
def test_importing_bert_tf_first_turns_on_onednn_unless_the_variable_is_set(setting, expected):
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if setting is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = setting
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"onednn {expected}" in out.stdout
