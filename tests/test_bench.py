"""The benchmark harness: the FLOP count behind every "fraction of the matmul floor" figure, and the results files."""

import pytest
import tensorflow as tf

from bench.common import encoder_flops
from bert_tf import BertConfig, BertEncoder


@pytest.mark.parametrize("preset,batch,seq", [("tiny", 2, 16), ("L2_H256", 3, 33)])
def test_encoder_flops_equal_tensorflows_own_count_of_the_encoder_graph(preset, batch, seq):
    """Reference: TF's v1 FLOP profiler over the traced encoder graph, summed over its MatMul/BatchMatMul nodes."""
    config = BertConfig.preset(preset, vocab_size=100)
    encoder = BertEncoder(config)
    spec = {name: tf.TensorSpec((batch, seq), tf.int32) for name in ("input_word_ids", "input_mask",
                                                                      "input_type_ids")}
    graph = tf.function(lambda x: encoder(x, training=False)).get_concrete_function(spec).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph, options=options)
    types = {op.name: op.type for op in graph.get_operations()}
    matmuls = [node for node in profile.children if types.get(node.name) in ("MatMul", "BatchMatMulV2")]
    assert len(matmuls) == config.num_hidden_layers * 8 + 1  # q, k, v, scores, context, out, ffn x2; pooler
    assert sum(node.float_ops for node in matmuls) == encoder_flops(config, batch, seq)


def test_report_keeps_old_rows_under_their_own_header_when_the_columns_change(tmp_path, monkeypatch):
    import csv

    from bench import common

    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    common.report("demo", [{"a": 1}], ["a"])
    common.report("demo", [{"a": 2}], ["a"])
    common.report("demo", [{"a": 3, "b": 4}], ["a", "b"])
    rotated = [p for p in tmp_path.iterdir() if p.name.startswith("demo-until-")]
    assert len(rotated) == 1
    with open(rotated[0], newline="") as f:
        old = list(csv.DictReader(f))
    with open(tmp_path / "demo.csv", newline="") as f:
        new = list(csv.DictReader(f))
    assert [r["a"] for r in old] == ["1", "2"] and "b" not in old[0]
    assert [(r["a"], r["b"]) for r in new] == [("3", "4")]
