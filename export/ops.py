"""Op audit of a SavedModel: which ops the graph needs beyond core TensorFlow, and whether they are registered.

TF Serving loads a model only if every op in its graph is linked into the model server. Core TensorFlow ops are
always there; tensorflow-text ops are there when the server links tensorflow-text (the standard TF Serving builds
do, at the tensorflow-text version of their release). `audit` lists the non-core ops, says which library
registers each, and `check` refuses an op that no loaded library registers.
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry


def graph_ops(export_dir: str) -> set[str]:
    """Every op type used by the SavedModel's graphs and functions (function calls excluded)."""
    saved = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops, functions = set(), set()
    for meta_graph in saved.meta_graphs:
        ops |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            functions.add(function.signature.name)
            ops |= {node.op for node in function.node_def}
    return ops - functions


def audit(export_dir: str) -> dict:
    """{"tensorflow_text": [ops], "unregistered": [ops]}: the non-core ops by where they come from."""
    import tensorflow_text  # noqa: F401  (registers its ops, as the model server links them)

    non_core = sorted(op for op in graph_ops(export_dir) if not hasattr(tf.raw_ops, op))
    registered = [op for op in non_core if op_def_registry.get(op) is not None]
    return {"tensorflow_text": registered, "unregistered": [op for op in non_core if op not in registered],
            "tensorflow_text_version": tensorflow_text.__version__}


def check(export_dir: str) -> dict:
    report = audit(export_dir)
    if report["unregistered"]:
        raise ValueError(f"{export_dir}: the graph uses ops that neither TensorFlow nor tensorflow-text register: "
                         f"{', '.join(report['unregistered'])}; TF Serving would fail with 'Op type not registered'")
    return report
