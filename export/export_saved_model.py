"""Export SavedModels for TF Serving that take raw strings (tensorflow-text preprocessing in the graph).

  python -m export.export_saved_model --kind=classifier --model_dir=runs/mrpc --export_dir=exports/mrpc/1
  python -m export.export_saved_model --kind=preprocessor --vocab_file=vocab.txt --export_dir=exports/pre/1
  python -m export.export_saved_model --kind=encoder --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --export_dir=exports/encoder/1

The export is written next to --export_dir and renamed into place when complete; its op audit (ops beyond core
TensorFlow, all from tensorflow-text) is printed and saved in `assets.extra/ops.json`.
"""

from absl import app, flags

from export.exporting import KINDS, export

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
