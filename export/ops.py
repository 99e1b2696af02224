"""Op audit of a SavedModel: which TF Serving releases can load it, from facts about what each release links.

A model server loads a SavedModel only if every op in its graphs is registered in the server binary, with every
attribute the graph sets. Core ops come from the TensorFlow the release is built against; tensorflow-text ops from
the tensorflow-text it links. `audit` lists the graph's ops with the first release of TensorFlow or tensorflow-text
that registers each, and answers with the oldest TF Serving release from which every release loads the export;
`check` refuses an export that a given server (a release, or a custom build's tensorflow-text version) could not
load, and an op that nothing registers here.
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

# TF Serving release -> (TensorFlow it is built against, tensorflow-text it links). Read from github.com/tensorflow/
# serving at each release tag: `git show <tag>:tensorflow_serving/workspace.bzl` (the `org_tensorflow_text`
# http_archive url, .../tensorflow/text/archive/v<version>.zip) and `git show
# <tag>:tensorflow_serving/tools/pip_package/setup.py` (`_TF_VERSION`, whose lower bound is the TensorFlow of the
# release; the release commit also moves WORKSPACE's org_tensorflow to it). From 2.2.0 on the server links
# tensorflow-text's whole `ops_lib`; 2.0.0 to 2.1.4 link commit a2f2ad05 (older than tensorflow-text 1.15.0) and
# only five of its op libraries (tensorflow_serving/model_servers/BUILD), listed in EARLY_TF_TEXT_OPS.
SERVING_RELEASES = {
    "2.0.0": ("2.0", None), "2.1.0": ("2.1", None), "2.1.4": ("2.1", None),
    "2.2.0": ("2.2", "2.2.0"), "2.2.2": ("2.2", "2.2.0"), "2.2.3": ("2.2", "2.2.0"),
    "2.3.0": ("2.3", "2.2.0"), "2.3.3": ("2.3", "2.2.0"), "2.3.4": ("2.3", "2.2.0"),
    "2.4.0": ("2.4", "2.3.0"), "2.4.1": ("2.4", "2.3.0"), "2.4.2": ("2.4", "2.3.0"), "2.4.3": ("2.4", "2.4.3"),
    "2.4.4": ("2.4", "2.4.3"),
    "2.5.1": ("2.5", "2.4.3"), "2.5.2": ("2.5", "2.4.3"), "2.5.3": ("2.5", "2.4.3"), "2.5.4": ("2.5", "2.4.3"),
    "2.6.0": ("2.6", "2.5.0"), "2.6.1": ("2.6", "2.5.0"), "2.6.2": ("2.6", "2.5.0"), "2.6.3": ("2.6", "2.5.0"),
    "2.6.5": ("2.6", "2.5.0"),
    "2.7.0": ("2.7", "2.6.0"), "2.7.3": ("2.7", "2.7.3"), "2.7.4": ("2.7", "2.7.3"),
    "2.8.0": ("2.8", "2.6.0"), "2.8.2": ("2.8", "2.6.0"), "2.8.3": ("2.8", "2.6.0"), "2.8.4": ("2.8", "2.6.0"),
    "2.9.0": ("2.9", "2.6.0"), "2.9.1": ("2.9", "2.6.0"), "2.9.2": ("2.9", "2.6.0"), "2.9.3": ("2.9", "2.6.0"),
    "2.10.0": ("2.10", "2.7.3"), "2.10.1": ("2.10", "2.7.3"),
    "2.11.0": ("2.11", "2.8.2"), "2.11.1": ("2.11", "2.8.2"),
    "2.12.0": ("2.12", "2.12.1"), "2.12.1": ("2.12", "2.12.1"), "2.12.2": ("2.12", "2.12.1"),
    "2.13.0": ("2.13", "2.12.1"), "2.13.1": ("2.13", "2.12.1"),
    "2.14.0": ("2.14", "2.12.1"), "2.14.1": ("2.14", "2.12.1"),
    "2.15.1": ("2.15", "2.12.1"), "2.16.1": ("2.16", "2.12.1"), "2.17.0": ("2.17", "2.12.1"),
    "2.17.1": ("2.17", "2.12.1"), "2.18.0": ("2.18", "2.12.1"), "2.18.1": ("2.18", "2.12.1"),
    "2.19.0": ("2.19", "2.12.1"), "2.19.1": ("2.19", "2.12.1"), "2.20.0": ("2.20", "2.20.0"),
}
EARLY_TF_TEXT_OPS = frozenset({"ConstrainedSequence", "SentenceFragments", "UnicodeScriptTokenizeWithOffsets",
                               "WhitespaceTokenizeWithOffsets", "WordpieceTokenizeWithOffsets"})

# The first tensorflow-text release that registers each op our exports can use: the oldest tag of
# github.com/tensorflow/text whose tensorflow_text/core/ops/*.cc registers it (REGISTER_OP, or REGISTER_TF_OP_SHIM
# for the fast tokenizers).
MIN_TF_TEXT = {
    "NormalizeUTF8": "0.1.0",
    "WordpieceTokenizeWithOffsets": "0.1.0",
    "CaseFoldUTF8": "0.1.0",
    "RegexSplitWithOffsets": "1.15.0",
    "FastWordpieceTokenizeWithOffsets": "2.7.0",
}

# The first TensorFlow release that registers each core op our exports use. Read from github.com/tensorflow/java,
# which commits the op list of the TensorFlow it builds against: the full OpList (src/gen/resources/ops.pbtxt, or
# tensorflow-core-native/.../ops.pbtxt) from TF 2.5 on, one api_def_<Op>.pbtxt per op before; a version is the
# first of its snapshots (TF 2.0, 2.1, 2.2, 2.3.1, 2.4.1, 2.5, 2.6, 2.7, 2.8, 2.9.1, 2.10.1, 2.12, 2.14, 2.15, ...)
# that has the op. Before TF 2.5 that list lags TensorFlow, so an early entry can be later than the op's true
# first release, never earlier; no TF Serving release older than 2.7.3 links the tensorflow-text our graphs need,
# so none of those entries changes an answer. DisableCopyOnRead: absent from TF 2.9.1's OpList, present in 2.10.1's;
# the stateless random ops of the encoder's training endpoint (dropout): first in tf-java's TF 2.4.1 snapshot.
# PartitionedCall (a call of a function without stateful ops) is taken from the r2.4 API reference instead.
MIN_TF = {
    **dict.fromkeys((
        "AddV2", "All", "Any", "ArgMax", "Assert", "AssignVariableOp", "BiasAdd", "BitwiseOr", "BroadcastTo", "Cast",
        "ConcatV2", "Const", "Cumsum", "Equal", "Erfc", "ExpandDims", "Fill", "FloorDiv", "FloorMod", "GatherNd",
        "GatherV2", "Greater", "GreaterEqual", "Identity", "If", "InvertPermutation", "LeftShift", "Less", "LessEqual",
        "LogicalAnd", "LogicalNot", "LogicalOr", "LowerBound", "MatMul", "Max", "Maximum", "Mean", "MergeV2Checkpoints",
        "Min", "Minimum", "Mul", "Neg", "NoOp", "NotEqual", "OnesLike", "Pack", "Placeholder", "Pow", "Prod",
        "RaggedGather", "RaggedRange", "Range", "ReadVariableOp", "Reshape", "RestoreV2", "ReverseV2", "Rsqrt",
        "SaveV2", "ScatterNd", "Select", "Shape", "ShardedFilename", "Sigmoid", "Size", "Softmax", "Split",
        "SquaredDifference", "Squeeze", "StatefulPartitionedCall", "StatelessIf", "StatelessWhile",
        "StaticRegexFullMatch", "StaticRegexReplace", "StopGradient", "StridedSlice", "StringJoin", "StringLength",
        "StringSplitV2", "Sub", "Substr", "Sum", "Tanh", "TensorListFromTensor", "TensorListGetItem",
        "TensorListReserve", "TensorListSetItem", "TensorListStack", "Tile", "TopKV2", "Transpose",
        "UnicodeDecodeWithOffsets", "UnicodeTranscode", "Unique", "UnsortedSegmentMax", "UnsortedSegmentMin",
        "UnsortedSegmentSum", "UpperBound", "VarHandleOp", "VarIsInitializedOp", "Where", "While", "ZerosLike"), "2.0"),
    **dict.fromkeys(("BatchMatMulV2", "RaggedTensorToTensor", "SelectV2", "StringLower", "UnicodeDecode",
                     "UnicodeEncode"), "2.1"),
    "DenseBincount": "2.3",
    **dict.fromkeys(("PartitionedCall", "StatelessRandomUniformFullIntV2", "StatelessRandomUniformV2"), "2.4"),
    "DisableCopyOnRead": "2.10",
}

# Attributes added to a core op after its first release, which a graph that sets them needs (an older runtime fails
# with "NodeDef mentions attr ... not in Op"). VarHandleOp's debug_name: absent from tf-java's TF 2.10.1 OpList and
# from the r2.13 API reference of tf.raw_ops.VarHandleOp, present in tf-java's TF 2.15.0 OpList; 2.14 is not
# established either way, so 2.15 is listed (errs toward refusing 2.14).
MIN_TF_ATTR = {("VarHandleOp", "debug_name"): "2.15"}


def version(text: str, what: str = "version") -> tuple[int, int, int]:
    """(major, minor, patch) of "2.7" or "2.7.0" (equal: a missing part is 0), so versions compare as versions."""
    parts = str(text).strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"{what}={text!r}: not a version number (expected e.g. 2.11 or 2.11.0)")
    return tuple(int(part) for part in parts) + (0,) * (3 - len(parts))


def serving_release(text: str) -> str:
    """The SERVING_RELEASES key for a release given as "2.11" or "2.11.0"; a release not in the table is an error."""
    wanted = version(text, "--serving_version")
    for release in SERVING_RELEASES:
        if version(release) == wanted:
            return release
    known = list(SERVING_RELEASES)
    same_minor = [release for release in known if version(release)[:2] == wanted[:2]]
    raise ValueError(f"--serving_version={text}: not a TF Serving release in export/ops.py's table ("
                     + (f"its {wanted[0]}.{wanted[1]} releases: {', '.join(same_minor)}" if same_minor else
                        f"{known[0]} to {known[-1]}, final releases only")
                     + "); for another build of the model server give the tensorflow-text version it links with "
                     "--serving_tf_text")


def graph_attrs(export_dir: str) -> dict[str, set[str]]:
    """{op type: attributes set on its nodes} over the SavedModel's graphs and functions (function calls excluded,
    internal `_` attributes left out)."""
    saved = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops, functions = {}, set()
    for meta_graph in saved.meta_graphs:
        nodes = list(meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            functions.add(function.signature.name)
            nodes += function.node_def
        for node in nodes:
            ops.setdefault(node.op, set()).update(a for a in node.attr if not a.startswith("_"))
    return {op: attrs for op, attrs in ops.items() if op not in functions}


def graph_ops(export_dir: str) -> set[str]:
    """Every op type used by the SavedModel's graphs and functions (function calls excluded)."""
    return set(graph_attrs(export_dir))


def audit(export_dir: str) -> dict:
    """What the export needs: `min_tensorflow` (core op, or "Op.attr" for a newer attribute -> first TensorFlow
    release), `min_tensorflow_text` (op -> first tensorflow-text release), `unregistered` (ops nothing here
    registers), `unlisted` (ops missing from the tables above, assumed to need the versions running here) and
    `min_serving`, the oldest TF Serving release from which every release in SERVING_RELEASES loads it (None if
    none does)."""
    from bert_tf.tokenization import load_tensorflow_text

    tensorflow_text = load_tensorflow_text()  # registers its ops, as the model server links them

    attrs = graph_attrs(export_dir)
    core = sorted(op for op in attrs if hasattr(tf.raw_ops, op))
    non_core = sorted(op for op in attrs if op not in core)
    text = [op for op in non_core if op_def_registry.get(op) is not None]
    running_tf = ".".join(tf.__version__.split(".")[:2])
    needs_tf = {op: MIN_TF.get(op, running_tf) for op in core}
    needs_tf.update({f"{op}.{attr}": v for (op, attr), v in MIN_TF_ATTR.items() if attr in attrs.get(op, ())})
    needs_text = {op: MIN_TF_TEXT.get(op, tensorflow_text.__version__) for op in text}
    report = {"tensorflow_text": text, "unregistered": [op for op in non_core if op not in text],
              "unlisted": [op for op in core if op not in MIN_TF] + [op for op in text if op not in MIN_TF_TEXT],
              "tensorflow_version": tf.__version__, "tensorflow_text_version": tensorflow_text.__version__,
              "min_tensorflow": needs_tf, "min_tensorflow_overall": max(needs_tf.values(), key=version, default=None),
              "min_tensorflow_text": needs_text,
              "min_tensorflow_text_overall": max(needs_text.values(), key=version, default=None)}
    loading = [not serving_problems(report, release) for release in SERVING_RELEASES]
    first = next((i for i in range(len(loading)) if all(loading[i:])), None)
    report["min_serving"] = list(SERVING_RELEASES)[first] if first is not None else None
    return report


def serving_problems(report: dict, release: str) -> list[str]:
    """Why TF Serving `release` (a SERVING_RELEASES key) cannot load an export with this `audit` report; [] if it
    can."""
    tf_version, text_version = SERVING_RELEASES[release]
    problems = [f"{op} needs TensorFlow >= {v}" for op, v in sorted(report["min_tensorflow"].items())
                if version(v) > version(tf_version)]
    for op, v in sorted(report["min_tensorflow_text"].items()):
        if text_version is None and op not in EARLY_TF_TEXT_OPS:
            problems.append(f"{op} is not among the tensorflow-text ops it links")
        elif text_version is not None and version(v) > version(text_version):
            problems.append(f"{op} needs tensorflow-text >= {v}")
    return problems


def check_targets(serving_tf_text: str | None = None, serving_version: str | None = None) -> None:
    """Refuses a malformed --serving_tf_text or an unknown --serving_version before any work is done."""
    if serving_tf_text:
        version(serving_tf_text, "--serving_tf_text")
    if serving_version:
        serving_release(serving_version)


def check(export_dir: str, serving_tf_text: str | None = None, serving_version: str | None = None) -> dict:
    """`audit`, refusing an export that would not load: one with ops that nothing registers; with `serving_version`
    (a TF Serving release) one that release cannot load; with `serving_tf_text` (the tensorflow-text version a
    custom model server links) one with tensorflow-text ops newer than that."""
    check_targets(serving_tf_text, serving_version)
    report = audit(export_dir)
    if report["unregistered"]:
        raise ValueError(f"{export_dir}: the graph uses ops that neither TensorFlow nor tensorflow-text register: "
                         f"{', '.join(report['unregistered'])}; TF Serving would fail with 'Op type not registered'")
    if serving_version:
        release = serving_release(serving_version)
        problems = serving_problems(report, release)
        if problems:
            tf_version, text_version = SERVING_RELEASES[release]
            raise ValueError(f"--serving_version={serving_version}: TF Serving {release} (TensorFlow {tf_version}, "
                             f"tensorflow-text {text_version or 'a2f2ad05, five op libraries'}) cannot load this "
                             f"export: {'; '.join(problems)}; the oldest release that loads it is "
                             f"{report['min_serving']}")
    if serving_tf_text:
        too_new = {op: v for op, v in report["min_tensorflow_text"].items()
                   if version(v) > version(serving_tf_text)}
        if too_new:
            raise ValueError(f"--serving_tf_text={serving_tf_text}: the export needs "
                             + ", ".join(f"{op} (tensorflow-text >= {v})" for op, v in sorted(too_new.items()))
                             + f"; serve it with TF Serving {report['min_serving']} or newer")
    return report
