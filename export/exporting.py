"""Writing the SavedModels: one function per the CLI's `--kind`, shared by the CLI and user code."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import tensorflow as tf

KINDS = ("preprocessor", "encoder", "classifier")


def export(kind: str, export_dir: str, *, model_dir: str | None = None, vocab_file: str | None = None,
           do_lower_case: bool = True, seq_length: int | None = None, bert_config_file: str | None = None,
           init_checkpoint: str | None = None) -> dict:
    """Writes the SavedModel of `kind` to `export_dir`; returns its op audit."""
    from bert_tf.finetuning import MODEL_FILE, TASK_FILE, load_finetuned
    from export import ops
    from export.modules import ClassifierModule, EncoderModule, Preprocessor

    if kind not in KINDS:
        raise ValueError(f"--kind={kind!r}: expected one of {', '.join(KINDS)}")
    if kind == "classifier":
        if not model_dir or not os.path.exists(os.path.join(model_dir, MODEL_FILE)):
            raise FileNotFoundError(f"--model_dir={model_dir}: no fine-tuned model ({MODEL_FILE}, {TASK_FILE}); "
                                    "train one with run_classifier")
        with open(os.path.join(model_dir, TASK_FILE), encoding="utf-8") as f:
            info = json.load(f)
        if info["kind"] not in ("classification", "regression"):
            raise ValueError(f"--model_dir={model_dir} holds a {info['kind']} model; --kind=classifier exports "
                             "classification and regression models")
        preprocessor = Preprocessor(os.path.join(model_dir, "vocab.txt"), info["do_lower_case"],
                                    seq_length or info["max_seq_length"])
        labels_file = os.path.join(tempfile.mkdtemp(prefix="bert_tf_export_"), "labels.txt")
        with open(labels_file, "w", encoding="utf-8") as f:
            f.write("".join(f"{label}\n" for label in info["labels"]))
        module = ClassifierModule(load_finetuned(model_dir), preprocessor, info["labels"], pairs=info["pairs"],
                                  regression=info["kind"] == "regression", labels_file=labels_file)
    elif kind == "preprocessor":
        if not vocab_file:
            raise ValueError("--kind=preprocessor needs --vocab_file")
        module = Preprocessor(vocab_file, do_lower_case, seq_length or 128)
    else:
        from bert_tf.config import BertConfig
        from bert_tf.models import BertEncoder
        from bert_tf.training import restore_weights

        if not bert_config_file:
            raise ValueError("--kind=encoder needs --bert_config_file (and --init_checkpoint)")
        encoder = BertEncoder(BertConfig.from_json_file(bert_config_file))
        if init_checkpoint:
            restore_weights(encoder, init_checkpoint)
        module = EncoderModule(encoder)
    tmp = f"{export_dir.rstrip('/')}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tf.saved_model.save(module, tmp, signatures=module.signatures())
    report = ops.check(tmp)
    os.makedirs(os.path.join(tmp, "assets.extra"), exist_ok=True)
    with open(os.path.join(tmp, "assets.extra", "ops.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    if os.path.exists(export_dir):
        shutil.rmtree(export_dir)
    os.makedirs(os.path.dirname(os.path.abspath(export_dir)), exist_ok=True)
    os.replace(tmp, export_dir)
    return report
