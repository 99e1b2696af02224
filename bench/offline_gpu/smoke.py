"""Before any timing on a GPU machine set up by setup.sh: does TensorFlow run on the GPU, with and without XLA, and
compute what NumPy and the CPU compute? A GEMM with GELU in float32 (TF32 off), float16 and bfloat16 against
float64, then BERT-Base's float32 forward pass on the GPU against the same model on the CPU. The reference
multiplies the inputs as rounded to the type, so what is left is the rounding of the output (the type's unit
roundoff, 2^-24, 2^-11 or 2^-8, relative to the largest output) and of float32 sums over 512 terms: it stops with
one line where the error is over two unit roundoffs plus 1e-5, or where BERT's is over 1e-4, some 25 times what
float32's different summation orders on a CPU and a GPU give at BERT's outputs (BENCHMARKS.md, "The GPU plan")."""
import sys
import time

t0 = time.time()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

gpus = tf.config.list_physical_devices("GPU")
print(f"TensorFlow {tf.__version__}, GPUs {gpus} (import {time.time() - t0:.1f} s)", flush=True)
if not gpus:
    sys.exit("smoke: TensorFlow sees no GPU")
print(tf.config.experimental.get_device_details(gpus[0]), flush=True)
tf.config.experimental.set_memory_growth(gpus[0], True)
tf.config.experimental.enable_tensor_float_32_execution(False)
rng = np.random.default_rng(0)
a, b = rng.standard_normal((256, 512)), rng.standard_normal((512, 384))
for dtype, unit in (("float32", 2.0 ** -24), ("float16", 2.0 ** -11), ("bfloat16", 2.0 ** -8)):
    x, y = tf.cast(a, dtype), tf.cast(b, dtype)
    product = tf.cast(x, tf.float64).numpy() @ tf.cast(y, tf.float64).numpy()  # of the rounded inputs, exactly
    want = 0.5 * product * (1 + np.tanh(np.sqrt(2 / np.pi) * (product + 0.044715 * product ** 3)))
    for jit in (False, True):
        with tf.device("/GPU:0"):
            got = tf.function(lambda x, y: tf.nn.gelu(tf.matmul(x, y), approximate=True), jit_compile=jit)(x, y)
        error = np.abs(tf.cast(got, tf.float64).numpy() - want).max() / np.abs(want).max()
        print(f"GEMM + GELU, {dtype}, {'XLA' if jit else 'TF'}, on {got.device[-5:]}: relative error {error:.1e}",
              flush=True)
        if not error <= 2 * unit + 1e-5:
            sys.exit(f"smoke: {dtype} GEMM + GELU is off by {error:.1e}, over {2 * unit + 1e-5:.1e}")

from bert_tf import BertConfig, BertEncoder  # noqa: E402

ids = rng.integers(1000, 30522, (4, 128)).astype("int32")
inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
          "input_type_ids": (np.arange(128) >= 64)[None].repeat(4, 0).astype("int32")}
with tf.device("/CPU:0"):  # the variables stay here, so the model is not XLA-compiled on the GPU below
    model = BertEncoder(BertConfig.preset("base", vocab_size=30522))
    cpu = model(inputs)["sequence_output"].numpy()
with tf.device("/GPU:0"):
    gpu = tf.function(lambda x: model(x)["sequence_output"])(inputs)
difference = np.abs(gpu.numpy() - cpu).max()
print(f"BERT-Base float32 forward on {gpu.device[-5:]}: max |GPU - CPU| {difference:.1e}, max |output| "
      f"{np.abs(cpu).max():.1f}; smoke done in {time.time() - t0:.0f} s", flush=True)
if not difference <= 1e-4:
    sys.exit(f"smoke: BERT-Base on the GPU differs from the CPU by {difference:.1e}, over 1e-4")
