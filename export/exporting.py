"""Writing the SavedModels: one function for every `--kind` of the CLI, shared by the CLI and user code.

Task kinds (`classifier`, `span_qa`, `tagger`, `multiple_choice`: each task family's `export_kind`, from the
task registry) read a model directory written by fine-tuning (`model.keras`, `task.json`, `vocab.txt`): the
family that wrote task.json says which export fits and builds the serving module, with the settings the model was
trained with (sequence length, casing, SQuAD's stride and null threshold, label names). `encoder` and `mlm` read a pretraining checkpoint (original TF1 names, an HF directory, or ours)
with its `bert_config.json` and `vocab.txt`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import bert_tf  # noqa: F401
import tensorflow as tf

from bert_tf import fileio, onednn, tasks
from bert_tf.config import check_fits
from bert_tf.tokenization import check_case
from bert_tf.layers.precision import INFERENCE_POLICY

TASK_KINDS = tasks.export_kinds()
KINDS = ("preprocessor", "encoder", "mlm", *TASK_KINDS)
DTYPES = ("float32", "mixed_bfloat16", INFERENCE_POLICY)


def export(kind: str, export_dir: str, *, model_dir: str | None = None, vocab_file: str | None = None,
           do_lower_case: bool | None = None, seq_length: int | None = None, bert_config_file: str | None = None,
           init_checkpoint: str | None = None, doc_stride: int | None = None, top_k: int = 5,
           serving_tf_text: str | None = None, serving_version: str | None = None, dtype: str | None = None) -> dict:
    """Writes the SavedModel of `kind` to `export_dir` and returns its op audit (`export.ops.check`, which refuses
    an export that TF Serving release `serving_version`, or a server linking tensorflow-text `serving_tf_text`,
    could not load). The export is written at `<export_dir>.tmp-<pid>` and swapped in by
    `bert_tf.staging.replace_dir`: an existing export keeps loading until the new one is complete and in place, and
    stays if anything fails. Staging directories of killed exports to the same `export_dir` are removed first.
    A 16-bit model's activations are cast to float32 in the exported graph whatever this CPU fuses
    (`onednn.traced_to_run_elsewhere`). `dtype`, one of `DTYPES`, runs the model's encoder under that Keras policy
    (`bert_tf.models.with_dtype`; default: the policy it was built under, Keras's global one): `bfloat16`, the
    inference policy, stores the dense weights in bfloat16, for servers whose CPU (AVX512_BF16, AMX) or GPU
    computes in bfloat16; not for the fine-tunable `encoder`."""
    from export import ops

    if kind not in KINDS:
        raise ValueError(f"--kind={kind!r}: expected one of {', '.join(KINDS)}")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"--dtype={dtype!r}: expected one of {', '.join(DTYPES)}")
    if seq_length is not None and seq_length < 1:
        raise ValueError(f"--seq_length={seq_length} must be at least 1 (leave it out for the model's own)")
    if doc_stride is not None and doc_stride < 1:
        raise ValueError(f"--doc_stride={doc_stride} must be at least 1 (leave it out for the model's own)")
    if top_k < 1:
        raise ValueError(f"--top_k={top_k} must be at least 1")
    if dtype is not None and kind == "preprocessor":
        raise ValueError("--kind=preprocessor has no model; drop --dtype")
    if dtype == INFERENCE_POLICY and kind == "encoder":
        raise ValueError(f"--kind=encoder exports a fine-tunable encoder, whose weights train in float32; "
                         f"--dtype={INFERENCE_POLICY} is for the task kinds and mlm (use mixed_bfloat16 here)")
    ops.check_targets(serving_tf_text, serving_version)
    scratch = tempfile.mkdtemp(prefix="bert_tf_export_")  # the label file, until the save copies it as an asset
    try:
        with onednn.traced_to_run_elsewhere():
            return _export(kind, export_dir, scratch, model_dir, vocab_file, do_lower_case, seq_length,
                           bert_config_file, init_checkpoint, doc_stride, top_k, serving_tf_text, serving_version,
                           dtype)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _export(kind, export_dir, scratch, model_dir, vocab_file, do_lower_case, seq_length, bert_config_file,
            init_checkpoint, doc_stride, top_k, serving_tf_text, serving_version, dtype):
    from bert_tf import staging
    from export import ops

    if kind in TASK_KINDS:
        module = _task_module(kind, model_dir, seq_length, doc_stride, scratch, dtype)
    elif kind == "preprocessor":
        from bert_tf.serving import Preprocessor

        if not vocab_file:
            raise ValueError("--kind=preprocessor needs --vocab_file")
        check_case(vocab_file, True if do_lower_case is None else do_lower_case)
        module = Preprocessor(vocab_file, do_lower_case=True if do_lower_case is None else do_lower_case,
                              seq_length=seq_length or 128)
    else:
        module = _pretrained_module(kind, bert_config_file, init_checkpoint, vocab_file, do_lower_case, seq_length,
                                    top_k, dtype)
    from bert_tf.serving import SAVE_OPTIONS, track_captured_variables

    signatures = module.signatures()
    if hasattr(module, "mlm"):
        track_captured_variables(module.mlm, [module.mlm.__call__])
    track_captured_variables(module, list(signatures.values()))
    staging.remove_stale(export_dir)
    tmp = staging.staging_name(export_dir)
    fileio.rmtree(tmp)
    try:
        tf.saved_model.save(module, tmp, signatures=signatures, options=SAVE_OPTIONS)
        report = ops.check(tmp, serving_tf_text, serving_version)
        fileio.makedirs(os.path.join(tmp, "assets.extra"))
        staging.write_text(os.path.join(tmp, "assets.extra", "ops.json"), json.dumps(report, indent=2))
        fileio.makedirs(fileio.dirname(fileio.absolute(export_dir)))
        staging.replace_dir(tmp, export_dir)
    except BaseException:
        fileio.rmtree(tmp)
        raise
    return report


def _task_module(kind, model_dir, seq_length, doc_stride, scratch, dtype):
    from bert_tf.finetuning import MODEL_FILE, load_finetuned
    from bert_tf.serving import Preprocessor
    from bert_tf.tasks import task_info

    family = tasks.family_for_export(kind)
    info = task_info.read(model_dir) if model_dir and fileio.exists(os.path.join(model_dir, MODEL_FILE)) else None
    if info is None:
        raise FileNotFoundError(f"--model_dir={model_dir}: no fine-tuned model ({MODEL_FILE}, {task_info.FILE}); "
                                f"train one with {family.program}")
    trained_by = tasks.family_of_kind(info.kind)
    if trained_by is not family:
        raise ValueError(f"--model_dir={model_dir} holds a {info.kind} model ({info.task}); --kind={kind} exports "
                         f"{' and '.join(family.kinds)} models; use --kind={trained_by.export_kind}")
    model = load_finetuned(model_dir)
    check_fits(model.encoder.bert_config, None, seq_length, "seq_length", source=f"the model in --model_dir={model_dir}")
    preprocessor = Preprocessor(os.path.join(model_dir, "vocab.txt"), do_lower_case=info.do_lower_case,
                                seq_length=seq_length or info.max_seq_length)
    return family.serving_module(_in_dtype(model, dtype), info, preprocessor, doc_stride=doc_stride,
                                 scratch=scratch)


def _in_dtype(model, dtype):
    from bert_tf.models import with_dtype

    return model if dtype is None else with_dtype(model, dtype)


def load_pretrainer(bert_config_file: str, init_checkpoint: str | None):
    """(BertPretrainer, whether the checkpoint had the MLM head) from any checkpoint `restore_weights` reads."""
    from bert_tf.checkpoints import restore_weights
    from bert_tf.config import BertConfig
    from bert_tf.models import BertEncoder, BertPretrainer

    pretrainer = BertPretrainer(BertEncoder(BertConfig.from_json_file(bert_config_file)))
    if not init_checkpoint:
        return pretrainer, False
    before = [v.numpy() for v in pretrainer.masked_lm.weights]
    restore_weights(pretrainer, init_checkpoint)
    after = [v.numpy() for v in pretrainer.masked_lm.weights]
    return pretrainer, any((a != b).any() for a, b in zip(before, after))


def _pretrained_module(kind, bert_config_file, init_checkpoint, vocab_file, do_lower_case, seq_length, top_k,
                       dtype):
    from bert_tf.serving import Preprocessor
    from export.modules import EncoderModule, MaskedLMModule, MaskedLMSubModule

    if not (bert_config_file and init_checkpoint):
        raise ValueError(f"--kind={kind} needs --bert_config_file and --init_checkpoint (an export of untrained "
                         "weights would serve random outputs)")
    pretrainer, has_mlm = load_pretrainer(bert_config_file, init_checkpoint)
    positions = pretrainer.encoder.bert_config.max_position_embeddings
    seq_length = seq_length or min(128, positions)  # the mlm kind's default length, within the model's
    check_fits(pretrainer.encoder.bert_config, vocab_file if kind == "mlm" else None,
               seq_length if kind == "mlm" else None, "seq_length",
               do_lower_case=True if do_lower_case is None else do_lower_case)
    pretrainer = _in_dtype(pretrainer, dtype)
    if kind == "encoder":
        module = EncoderModule(pretrainer.encoder)
        if has_mlm:
            module.mlm = MaskedLMSubModule(pretrainer)
        return module
    if not vocab_file:
        raise ValueError("--kind=mlm needs --vocab_file")
    if not has_mlm:
        raise ValueError(f"--init_checkpoint={init_checkpoint}: no masked-LM head (cls/predictions/*) in this "
                         "checkpoint; --kind=mlm needs a pretraining checkpoint (run_pretraining writes one)")
    vocab_size = pretrainer.encoder.bert_config.vocab_size
    if top_k > vocab_size:
        raise ValueError(f"--top_k={top_k} is more than the model's {vocab_size} word pieces")
    preprocessor = Preprocessor(vocab_file, do_lower_case=True if do_lower_case is None else do_lower_case,
                                seq_length=seq_length)
    if "[MASK]" not in preprocessor.tokenizer.vocab:
        raise ValueError(f"--vocab_file={vocab_file}: has no [MASK] token")
    return MaskedLMModule(pretrainer, preprocessor=preprocessor, top_k=top_k)
