"""Fine-tuning as long runs need it: a run killed with SIGKILL and rerun with the same command ends with the weights,
optimizer state and input position of an uninterrupted run (mixed bfloat16, gradient accumulation); the paper's
grid over batch sizes, learning rates and epochs keeps the best cell and skips finished cells on a rerun; float16
trains with a moving loss scale; `--jit_compile` trains each task family to the plain graph's weights."""

import json
import os

import numpy as np
import pytest

from tests import forking
from tests.tasks.test_finetuning import _pair_task, _swag_task
from tests.tasks.test_squad import _year_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs a CLI module as `python -m` would, after wrapping `target` (module:function) so that the process kills
# itself with SIGKILL right after the function's `after`-th call returns: a crash at a known point of the run.
_KILLER = r"""
import importlib, os, runpy, signal, sys
import bert_tf  # noqa: F401  (before TensorFlow, as the CLIs)
target, after, module = sys.argv[1], int(sys.argv[2]), sys.argv[3]
owner, name = target.rsplit(":", 1)
owner, _, path = owner.partition("#")
holder = importlib.import_module(owner)
for attribute in filter(None, path.split(".")):
    holder = getattr(holder, attribute)
original, calls = getattr(holder, name), []

def wrapped(*args, **kwargs):
    result = original(*args, **kwargs)
    calls.append(1)
    if len(calls) == after:
        os.kill(os.getpid(), signal.SIGKILL)
    return result

setattr(holder, name, wrapped)
sys.argv = [module, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _run(module, args, kill=None):
    """The CLI `module` with `args`; `kill`: (module:function, n) to SIGKILL it after the n-th call."""
    command = ["-m", module, *args] if kill is None else ["-c", _KILLER, kill[0], str(kill[1]), module, *args]
    return forking.python(command, cwd=ROOT, timeout=600, env=ENV)


def _tiny_config(path, vocab_size=30522):
    from bert_tf import BertConfig

    BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64).to_json_file(path)
    return str(path)


def _checkpoint_tensors(directory):
    """Every tensor of the latest checkpoint in `directory` (model, optimizer slots, step, dropout seeds), and the
    names of the input position's (a variant, which has no numpy value: the weights tell whether it was right)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory))
    return {name: None if dtype == tf.variant else reader.get_tensor(name)
            for name, dtype in reader.get_variable_to_dtype_map().items()}


def _assert_same_run(a, b):
    """Two output directories of one single-cell run: the saved models' weights and the final checkpoints agree
    bit for bit."""
    from bert_tf.finetuning import load_finetuned

    (cell,) = os.listdir(a / "grid")
    first, second = _checkpoint_tensors(a / "grid" / cell), _checkpoint_tensors(b / "grid" / cell)
    assert set(first) == set(second)
    assert any("optimizer" in name for name in first) and any("data" in name for name in first)
    for name in first:
        assert (first[name] is None and second[name] is None) or np.array_equal(first[name], second[name]), name
    for x, y in zip(load_finetuned(str(a)).weights, load_finetuned(str(b)).weights, strict=True):
        assert np.array_equal(x.numpy(), y.numpy()), x.path


SAVE = "tensorflow#train.CheckpointManager:save"


@pytest.mark.parametrize("family", ["classification", "span_qa"])
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(family, minilm_dir, tmp_path):
    """SIGKILL right after the first checkpoint (step 4 of 12), then the same command again: every weight, slot,
    the step and the input position equal an uninterrupted run's, with mixed bfloat16 and two micro-batches."""
    config = _tiny_config(tmp_path / "bert_config.json")
    common = [f"--vocab_file={minilm_dir}/vocab.txt", f"--bert_config_file={config}", "--do_train",
              "--max_seq_length=32", "--train_batch_size=8", "--learning_rate=1e-3", "--save_checkpoints_steps=4",
              "--iterations_per_loop=2", "--dtype=mixed_bfloat16", "--gradient_accumulation_steps=2"]
    if family == "classification":
        module = "bert_tf.cli.run_classifier"
        common += ["--task_name=MRPC", f"--data_dir={_pair_task(tmp_path / 'mrpc', 48, 8, 0)}",
                   "--num_train_epochs=2"]
    else:
        module = "bert_tf.cli.run_squad"
        common += [f"--train_file={_year_task(tmp_path / 'train.json', 40, 0)}", "--doc_stride=16",
                   "--num_train_epochs=2"]  # 10 steps: counted from the 40 questions, as the original counts them
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    result = _run(module, common + [f"--output_dir={whole}"])
    assert result.returncode == 0, result.stderr[-3000:]
    killed = _run(module, common + [f"--output_dir={resumed}"], kill=(SAVE, 1))
    assert killed.returncode == -9, killed.stderr[-3000:]
    (cell,) = os.listdir(resumed / "grid")
    assert sorted(os.listdir(resumed / "grid" / cell)) == ["checkpoint", "ckpt-4.data-00000-of-00001",
                                                           "ckpt-4.index", "train"]
    assert not (resumed / "model.keras").exists()
    result = _run(module, common + [f"--output_dir={resumed}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming from" in result.stderr
    assert "Sharding callback duration" not in result.stderr  # the checkpoint saver's timing line, on every save
    steps = json.loads((whole / "task.json").read_text())["global_step"]
    assert steps == json.loads((resumed / "task.json").read_text())["global_step"] and steps >= 8
    _assert_same_run(whole, resumed)


def test_the_grid_keeps_the_best_cell_and_a_rerun_skips_finished_cells(minilm_dir, tmp_path):
    """2 batch sizes x 2 learning rates x 1 epoch count: four rows in grid_results.tsv, the best on dev saved. Killed
    after the first cell is recorded, the rerun trains only the other three, and ends as an uninterrupted grid."""
    config = _tiny_config(tmp_path / "bert_config.json")
    data = _pair_task(tmp_path / "mrpc", 48, 16, 0)
    common = ["--task_name=MRPC", f"--data_dir={data}", f"--vocab_file={minilm_dir}/vocab.txt",
              f"--bert_config_file={config}", "--do_train", "--do_eval", "--max_seq_length=32",
              "--train_batch_size=8,16", "--learning_rate=3e-3,1e-4", "--num_train_epochs=2"]
    out = tmp_path / "out"
    killed = _run("bert_tf.cli.run_classifier", common + [f"--output_dir={out}"],
                  kill=("bert_tf.finetuning:_write_state", 1))
    assert killed.returncode == -9, killed.stderr[-3000:]
    first = json.loads((out / "grid.json").read_text())["finished"]
    assert [row["cell"] for row in first] == ["batch8_lr0.003_epochs2_seed12345"]
    events = sorted(os.listdir(out / "grid" / first[0]["cell"] / "train"))
    result = _run("bert_tf.cli.run_classifier", common + [f"--output_dir={out}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"grid cell {first[0]['cell']} finished in an earlier run" in result.stderr
    assert sorted(os.listdir(out / "grid" / first[0]["cell"] / "train")) == events  # not trained again

    lines = (out / "grid_results.tsv").read_text().splitlines()
    header, rows = lines[0].split("\t"), [dict(zip(lines[0].split("\t"), line.split("\t"))) for line in lines[1:]]
    assert header[:7] == ["cell", "train_batch_size", "learning_rate", "num_train_epochs", "seed", "steps",
                          "seconds"] and "dev_accuracy" in header
    assert [(int(r["train_batch_size"]), float(r["learning_rate"])) for r in rows] == [
        (8, 3e-3), (8, 1e-4), (16, 3e-3), (16, 1e-4)]
    assert [int(r["steps"]) for r in rows] == [12, 12, 6, 6]
    best = max(rows, key=lambda r: float(r["dev_f1"]))  # by MRPC's main metric, F1, the first of equals
    assert [r["cell"] for r in rows if r["best"] == "*"] == [best["cell"]]
    assert f"best of 4 grid cells: {best['cell']}" in result.stdout
    info = json.loads((out / "task.json").read_text())
    assert (info["train_batch_size"], info["learning_rate"]) == (int(best["train_batch_size"]),
                                                                  float(best["learning_rate"]))
    scores = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert float(scores["eval_accuracy"]) == pytest.approx(float(best["dev_accuracy"]), abs=1e-6)
    # only the best cell keeps its checkpoint; every cell keeps its TensorBoard scalars, the dev figures included
    for row in rows:
        kept = os.listdir(out / "grid" / row["cell"])
        assert ("checkpoint" in kept) == (row is best) and {"train", "eval"} <= set(kept)

    # the same flags with another grid: refused before any work, naming what differs
    other = _run("bert_tf.cli.run_classifier", [a if not a.startswith("--learning_rate") else "--learning_rate=3e-3"
                                                for a in common] + [f"--output_dir={out}"])
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert "--learning_rate=0.003,0.0001 there, 0.003 here" in other.stderr.splitlines()[-1]
    # the same flags on other training data (a corrected train.tsv, another task's files): refused, not reused
    changed = _pair_task(tmp_path / "mrpc2", 48, 16, 0, seed=1)
    other = _run("bert_tf.cli.run_classifier", [a if not a.startswith("--data_dir") else f"--data_dir={changed}"
                                                for a in common] + [f"--output_dir={out}"])
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert "a fine-tuning grid trained on other data (the same task, but other training examples)" in \
        other.stderr.splitlines()[-1]


def test_float16_trains_200_steps_with_a_moving_loss_scale(tmp_path):
    """mixed_float16: dynamic loss scaling starts at 2^15, halves on overflowing steps (skipped) and the loss stays
    finite over 200 updates; variables stay float32."""
    import tensorflow as tf

    from bert_tf import BertConfig
    from bert_tf.finetuning import Cell, FinetuneOptions, fit
    from bert_tf.tasks import get_task

    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 128, (64, 16)).astype(np.int32)
    labels = (ids[:, 1] % 2).astype(np.int32)  # learnable from one token
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    options = FinetuneOptions(do_train=True, dtype="mixed_float16", iterations_per_loop=20, warmup_proportion=0.0)
    task = get_task("sst-2")
    scales, losses = [], []

    def progress(model, step, scalars):
        scales.append(float(model.optimizer.dynamic_scale.numpy()))
        losses.append(scalars["loss"])

    model, steps = fit(lambda: task.family.build_model(task, config, 0.1, options.policy), inputs,
                       {"logits": labels}, options, Cell(8, 1e-3, 25, 1), tf.distribute.get_strategy(),
                       str(tmp_path), progress=progress)
    assert steps == 200 and model.encoder.embeddings.compute_dtype == "float16"
    assert all(v.dtype == "float32" for v in model.weights)
    assert np.all(np.isfinite(losses)) and len(set(scales)) > 1 and scales[-1] != 2.0 ** 15
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("family", ["classification", "span_qa", "tagging", "multiple_choice"])
def test_jit_compile_trains_each_task_family_to_the_plain_graphs_weights(family, minilm_dir, tmp_path):
    """`--jit_compile`, which the docs advise on a GPU, compiles each family's training step with XLA, and the run
    ends with the plain graph's weights to float32 rounding (dropout off: XLA's Philox draws other masks); here with
    the CPU's XLA."""
    from bert_tf import BertConfig
    from bert_tf.finetuning import load_finetuned
    from tests.tasks.test_ner import _corpus

    config = tmp_path / "bert_config.json"
    BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0).to_json_file(str(config))
    module, *args = {
        "classification": ["bert_tf.cli.run_classifier", "--task_name=MRPC",
                           f"--data_dir={_pair_task(tmp_path / 'mrpc', 48, 8, 0)}"],
        "span_qa": ["bert_tf.cli.run_squad", f"--train_file={_year_task(tmp_path / 'train.json', 40, 0)}",
                    "--doc_stride=16"],
        "tagging": ["bert_tf.cli.run_ner", f"--data_dir={_corpus(tmp_path / 'conll', 0)}"],
        "multiple_choice": ["bert_tf.cli.run_swag", f"--data_dir={_swag_task(tmp_path / 'swag', 40, 8, 0)}"]}[family]
    args += [f"--vocab_file={minilm_dir}/vocab.txt", f"--bert_config_file={config}", "--do_train",
             "--max_seq_length=32", "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=1",
             "--dropout_rate=0"]
    weights = []
    for jit in ([], ["--jit_compile"]):
        out = tmp_path / ("xla" if jit else "graph")
        result = _run(module, args + jit + [f"--output_dir={out}"])
        assert result.returncode == 0, result.stderr[-3000:]
        weights.append([w.numpy() for w in load_finetuned(str(out)).weights])
    # XLA fuses and reorders float sums. Adam scales each update to about the learning rate for any gradient well
    # above its epsilon (1e-6), so where a gradient is small such rounding can move a weight by up to 1e-3 in a
    # step. 1e-4 is a tenth of that, and 20 times the largest difference seen (5e-6); a step computed wrongly
    # differs by ~1e-3. And the weights differ somewhere: XLA's own GEMMs sum in another order than oneDNN's, so
    # weights equal to the last bit everywhere would mean that --jit_compile compiled nothing.
    for plain, compiled in zip(*weights, strict=True):
        np.testing.assert_allclose(compiled, plain, rtol=1e-4, atol=1e-4)
    assert any(not np.array_equal(plain, compiled) for plain, compiled in zip(*weights))
    assert json.loads((out / "task.json").read_text())["global_step"] >= 5
