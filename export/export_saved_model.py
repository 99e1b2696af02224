"""Export SavedModels for TF Serving that take raw strings (tensorflow-text preprocessing in the graph).

  python -m export.export_saved_model --kind=classifier --model_dir=runs/mrpc --export_dir=exports/mrpc/1
  python -m export.export_saved_model --kind=preprocessor --vocab_file=vocab.txt --export_dir=exports/pre/1
  python -m export.export_saved_model --kind=encoder --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --export_dir=exports/encoder/1

The export is written next to --export_dir and renamed into place when complete; its op audit (ops beyond core
TensorFlow, all from tensorflow-text) is printed and saved in `assets.extra/ops.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import tensorflow as tf
from absl import app, flags

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


flags.DEFINE_enum("kind", None, list(KINDS), "What to export.")
flags.DEFINE_string("export_dir", None, "Output directory (e.g. exports/model/1 for TF Serving's version dirs).")
flags.DEFINE_string("model_dir", None, "--kind=classifier: the output_dir of run_classifier.")
flags.DEFINE_string("vocab_file", None, "--kind=preprocessor: the vocabulary.")
flags.DEFINE_bool("do_lower_case", True, "--kind=preprocessor: lower-case the input.")
flags.DEFINE_integer("seq_length", None, "Packed sequence length (default: the model's max_seq_length, or 128).")
flags.DEFINE_string("bert_config_file", None, "--kind=encoder: bert_config.json.")
flags.DEFINE_string("init_checkpoint", None, "--kind=encoder: weights (original TF1, HF directory or ours).")


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.cli import USER_ERRORS, fail

    if not f.kind or not f.export_dir:
        fail("export_saved_model", ValueError("--kind and --export_dir are required"))
    try:
        report = export(f.kind, f.export_dir, model_dir=f.model_dir, vocab_file=f.vocab_file,
                        do_lower_case=f.do_lower_case, seq_length=f.seq_length, bert_config_file=f.bert_config_file,
                        init_checkpoint=f.init_checkpoint)
    except USER_ERRORS + (ValueError,) as e:
        fail("export_saved_model", e)
    print(f"export_saved_model: wrote {f.export_dir}; ops beyond core TensorFlow (tensorflow-text "
          f"{report['tensorflow_text_version']}): {', '.join(report['tensorflow_text']) or 'none'}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
