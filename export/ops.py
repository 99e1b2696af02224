"""Op audit of a SavedModel: which ops the graph needs beyond core TensorFlow, and whether they are registered.

TF Serving loads a model only if every op in its graph is linked into the model server. Core TensorFlow ops are
always there; tensorflow-text ops are there when the server links tensorflow-text (the standard TF Serving builds
do, at the tensorflow-text version of their release). `audit` lists the non-core ops, says which library
registers each with the oldest tensorflow-text release that has it (`MIN_TF_TEXT`), and `check` refuses an op
that no loaded library registers, or one newer than the tensorflow-text of the target server when that is given.
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry


# The first tensorflow-text release with each op our exports can use (from its release notes; where a note was
# unclear, the later release is listed, so a warning can be too cautious but not wrong). TF Serving X.Y links
# tensorflow-text X.Y, so this is also the oldest model server that loads the op.
MIN_TF_TEXT = {
    "NormalizeUTF8": "2.0.0",
    "RegexSplitWithOffsets": "2.2.0",
    "WordpieceTokenizeWithOffsets": "2.0.0",
    "FastWordpieceTokenizeWithOffsets": "2.7.0",
}


def _version(text: str) -> tuple:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


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
    needs = {op: MIN_TF_TEXT.get(op, tensorflow_text.__version__) for op in registered}
    return {"tensorflow_text": registered, "unregistered": [op for op in non_core if op not in registered],
            "tensorflow_text_version": tensorflow_text.__version__, "min_tensorflow_text": needs,
            "min_tensorflow_text_overall": max(needs.values(), key=_version, default=None)}


def check(export_dir: str, serving_tf_text: str | None = None) -> dict:
    """`audit`, refusing ops that would not load: unregistered ones, and with `serving_tf_text` (the
    tensorflow-text version of the target model server, e.g. "2.11") ops newer than it."""
    report = audit(export_dir)
    if report["unregistered"]:
        raise ValueError(f"{export_dir}: the graph uses ops that neither TensorFlow nor tensorflow-text register: "
                         f"{', '.join(report['unregistered'])}; TF Serving would fail with 'Op type not registered'")
    if serving_tf_text:
        too_new = {op: v for op, v in report["min_tensorflow_text"].items() if _version(v) > _version(serving_tf_text)}
        if too_new:
            raise ValueError(f"--serving_tf_text={serving_tf_text}: the export needs "
                             + ", ".join(f"{op} (tensorflow-text >= {v})" for op, v in sorted(too_new.items()))
                             + "; serve it with a newer TF Serving (its version = its tensorflow-text version)")
    return report
