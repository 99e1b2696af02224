r"""Export SavedModels for TF Serving that take raw strings (tensorflow-text preprocessing in the graph).

  python -m export.export_saved_model --kind=classifier --model_dir=runs/mrpc --export_dir=exports/mrpc/1
  python -m export.export_saved_model --kind=span_qa --model_dir=runs/squad --export_dir=exports/squad/1
  (likewise --kind=tagger for run_ner's output, --kind=multiple_choice for run_swag's)
  python -m export.export_saved_model --kind=mlm --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --vocab_file=vocab.txt --export_dir=exports/mlm/1
  python -m export.export_saved_model --kind=preprocessor --vocab_file=vocab.txt --export_dir=exports/pre/1
  python -m export.export_saved_model --kind=encoder --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --export_dir=exports/encoder/1

The export is written next to --export_dir and swapped into place when complete (an existing export keeps loading
until then); its op audit (the first TensorFlow and tensorflow-text releases each op needs, and the oldest TF
Serving release that loads it) is printed and saved in `assets.extra/ops.json`.
"""

from absl import flags

from bert_tf import tasks
from export.exporting import DTYPES, KINDS, export

flags.DEFINE_enum("kind", None, list(KINDS), "What to export.")
flags.DEFINE_string("export_dir", None, "Output directory (e.g. exports/model/1 for TF Serving's version dirs).")
flags.DEFINE_string("model_dir", None, "Task kinds: the output_dir of run_classifier / run_squad / run_ner / run_swag.")
flags.DEFINE_string("vocab_file", None, "--kind=preprocessor|mlm: the vocabulary.")
flags.DEFINE_bool("do_lower_case", None, "--kind=preprocessor|mlm: lower-case the input (default true); task kinds "
                  "use the model's setting.")
flags.DEFINE_integer("seq_length", None, "Packed sequence length (default: the model's max_seq_length, or 128).")
flags.DEFINE_integer("doc_stride", None, "span_qa / tagger: window stride for long inputs (default: the model's, or "
                     "half a window).")
flags.DEFINE_integer("top_k", 5, "--kind=mlm: fill-ins returned per [MASK].")
flags.DEFINE_string("bert_config_file", None, "--kind=encoder|mlm: bert_config.json.")
flags.DEFINE_string("init_checkpoint", None, "--kind=encoder|mlm: weights (original TF1, HF directory or ours).")
flags.DEFINE_string("serving_version", None, "A TF Serving release (e.g. 2.15.1): refuse an export that it cannot "
                    "load (the TensorFlow and tensorflow-text each release links are in export/ops.py).")
flags.DEFINE_enum("dtype", None, list(DTYPES), "Task kinds, encoder, mlm: the encoder's precision (default: "
                  "float32). bfloat16 stores the dense weights in bfloat16 (the mixed_bfloat16 outputs, faster on "
                  "servers with bfloat16 arithmetic: AVX512_BF16, AMX, GPUs); not for --kind=encoder.")
flags.DEFINE_string("serving_tf_text", None, "For a custom model server build: the tensorflow-text version it links "
                    "(e.g. 2.12.1); refuse an export whose tensorflow-text ops are newer.")


# The flags each kind reads besides --kind, --export_dir and the serving checks; another one given is an error.
READS = {"preprocessor": {"vocab_file", "do_lower_case", "seq_length"},
         "encoder": {"bert_config_file", "init_checkpoint", "dtype"},
         "mlm": {"bert_config_file", "init_checkpoint", "vocab_file", "do_lower_case", "seq_length", "top_k", "dtype"},
         **{family.export_kind: {"model_dir", "seq_length", "dtype", *family.export_flags}
            for family in tasks.FAMILIES}}


def main(argv):
    del argv
    f = flags.FLAGS
    from bert_tf.cli import USER_ERRORS, fail

    if not f.kind or not f.export_dir:
        fail("--kind and --export_dir are required")
    unread = sorted(name for name in set().union(*READS.values()) - READS[f.kind] if f[name].present)
    if unread:
        fail(f"--kind={f.kind} does not read {', '.join('--' + n for n in unread)} (see --helpfull for what each "
             "kind takes); drop it")
    try:
        report = export(f.kind, f.export_dir, model_dir=f.model_dir, vocab_file=f.vocab_file,
                        do_lower_case=f.do_lower_case, seq_length=f.seq_length, bert_config_file=f.bert_config_file,
                        init_checkpoint=f.init_checkpoint, doc_stride=f.doc_stride, top_k=f.top_k,
                        serving_tf_text=f.serving_tf_text, serving_version=f.serving_version, dtype=f.dtype)
    except USER_ERRORS + (ValueError,) as e:
        fail(e)
    needs = report["min_tensorflow_text"]
    print(f"export_saved_model: wrote {f.export_dir}; ops beyond core TensorFlow: "
          + (", ".join(f"{op} (tensorflow-text >= {v})" for op, v in sorted(needs.items())) or "none")
          + f"; needs TensorFlow >= {report['min_tensorflow_overall']} in the server; loads in TF Serving "
          + (f"{report['min_serving']} and newer" if report["min_serving"]
             else "releases newer than export/ops.py lists")
          + (f" (ops not in export/ops.py's tables, assumed to need the versions running here: "
             f"{', '.join(report['unlisted'])})" if report["unlisted"] else ""))


def run():
    from bert_tf.cli import DIRECTORY, start

    start(main, "export_saved_model", {"export_dir": DIRECTORY})


if __name__ == "__main__":
    run()
