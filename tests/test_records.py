"""bert_tf.records: the one definition of the pretraining record schema and its metadata file, which data_gen writes
and bert_tf.pretraining reads."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example(seq, preds, leave_out=()):
    import tensorflow as tf

    from bert_tf.records import FEATURES

    lengths = {"max_seq_length": seq, "max_predictions_per_seq": preds}
    feature = {}
    for name, (dtype, length) in FEATURES.items():
        if name in leave_out:
            continue
        values = np.arange(lengths.get(length, length))
        feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values)) if dtype == "float32" \
            else tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def test_the_spec_parses_a_record_of_the_schema_and_its_lengths_give_the_flags():
    import tensorflow as tf

    from bert_tf.records import DataError, feature_spec, record_lengths

    example = _example(12, 3)
    parsed = tf.io.parse_single_example(example.SerializeToString(), feature_spec(12, 3))
    assert {k: (v.dtype, tuple(v.shape)) for k, v in parsed.items()} == {
        "input_ids": (tf.int64, (12,)), "input_mask": (tf.int64, (12,)), "segment_ids": (tf.int64, (12,)),
        "masked_lm_positions": (tf.int64, (3,)), "masked_lm_ids": (tf.int64, (3,)),
        "masked_lm_weights": (tf.float32, (3,)), "next_sentence_labels": (tf.int64, (1,))}
    np.testing.assert_array_equal(parsed["masked_lm_weights"].numpy(), [0.0, 1.0, 2.0])
    assert record_lengths(example) == {"max_seq_length": 12, "max_predictions_per_seq": 3}
    with pytest.raises(DataError, match="not pretraining records .no masked_lm_positions feature.*"
                                        "create_pretraining_data"):
        record_lengths(_example(12, 3, leave_out=("masked_lm_positions",)))


def test_the_metadata_reader_names_the_file_it_refuses_and_lists_only_plain_shard_names(tmp_path):
    from bert_tf.records import METADATA_NAME, DataError, listed_shards, read_metadata

    path = tmp_path / METADATA_NAME
    path.write_text("{not json")
    with pytest.raises(DataError, match=f"{path}: not valid JSON"):
        listed_shards(str(path))
    path.write_text("[1, 2]")
    with pytest.raises(DataError, match=f"{path}: not a metadata object"):
        read_metadata(str(tmp_path))
    path.write_text(json.dumps({"shards": [{"path": "a.tfrecord"}, {"path": "../b.tfrecord"}, {"path": METADATA_NAME},
                                           {"instances": 3}, "c.tfrecord"]}))
    assert listed_shards(str(path)) == {"a.tfrecord"}
    path.write_text(json.dumps({"flags": {"max_seq_length": 8}}))  # not data_gen's: lists no shards
    assert listed_shards(str(path)) is None
    assert read_metadata(str(tmp_path)) == (str(path), {"flags": {"max_seq_length": 8}})
    assert read_metadata(str(tmp_path / "other")) is None


def test_data_gen_takes_the_schema_from_the_bottom_module_and_not_from_the_training_code():
    probe = ("import sys, data_gen.generate, data_gen.writer, data_gen.vocab, data_gen.beam; "
             "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['bert_tf', 'pretraining'], "
             "['bert_tf', 'training'], ['bert_tf', 'checkpoints'], ['bert_tf', 'tasks']) or m == 'bert_tf.records'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['bert_tf.records']"
