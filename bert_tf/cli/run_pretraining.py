r"""Pretrain BERT (masked LM + next sentence) on records from create_pretraining_data; the original's flags.

  run_pretraining --bert_config_file=bert_config.json --input_file=data/*.tfrecord --output_dir=runs/pretrain \
      --do_train --do_eval --train_batch_size=256 --max_seq_length=128 --max_predictions_per_seq=20 \
      --num_train_steps=900000 --num_warmup_steps=10000 --learning_rate=1e-4 --tpu=my-tpu

Phase 2 of the paper's recipe (sequence length 512) is a second run initialised from the first:
  run_pretraining ... --max_seq_length=512 --max_predictions_per_seq=80 --init_checkpoint=runs/pretrain \
      --output_dir=runs/pretrain512 --num_train_steps=100000

A run restarted with the same --output_dir resumes from its last checkpoint (model, optimizer, step, input).
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import (DIRECTORY, USER_ERRORS, define_distribution_flags, define_optimizer_flags,
                         define_precision_flags, fail, options_from_flags, start, strategy_from_flags)

flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train (or a preset name such as "
                    "'base', 'large', 'tiny').")
flags.DEFINE_string("input_file", None, "Input TFRecord files: comma-separated list of files and globs.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, TensorBoard logs and results are written.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: an original TF1 checkpoint or one of ours (prefix or "
                    "directory). Weights only; resuming is automatic from --output_dir.")
flags.DEFINE_string("vocab_file", None, "Optional: checked against the vocabulary hash in the records' metadata "
                    "(records without one, the original generator's, are not checked: a warning says so).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence in the records.")
flags.DEFINE_bool("do_train", False, "Whether to train.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate (writes eval_results.txt).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of optimizer updates.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warmup updates.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many updates.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of evaluation batches.")
flags.DEFINE_integer("random_seed", 12345, "Seed of the initialisation, dropout and input order.")
flags.DEFINE_enum("objective", "mlm_nsp", ["mlm_nsp", "mlm", "ltr"], "mlm_nsp: masked LM and next-sentence "
                  "prediction (the paper's BERT); mlm: masked LM only, no next-sentence head or loss (No NSP); ltr: "
                  "left-to-right LM with a causal mask, no masking, no NSP (LTR & No NSP; records made with "
                  "create_pretraining_data --random_next_sentence=false).")
flags.DEFINE_bool("deterministic", False, "Make TensorFlow ops deterministic (bit-identical reruns; slower).")
define_optimizer_flags()
define_precision_flags("fp32")
define_distribution_flags()
flags.adopt_module_key_flags(cli)  # list the shared flags in --helpshort too
flags.mark_flags_as_required(["bert_config_file", "input_file", "output_dir"])


def main(argv):
    del argv
    f = flags.FLAGS
    import tensorflow as tf

    from bert_tf.config import BertConfig
    from bert_tf.pretraining import DataError, PretrainingOptions, run_pretraining

    if f.deterministic:
        tf.config.experimental.enable_op_determinism()
    options = options_from_flags(f, PretrainingOptions)
    try:
        strategy = strategy_from_flags(f)
        config = BertConfig.from_preset_or_file(f.bert_config_file)
        results = run_pretraining(config, f.input_file, f.output_dir, options, strategy)
    except USER_ERRORS + (DataError, ValueError) as e:
        fail(e)
    for section, figures in results.items():
        if isinstance(figures, dict):
            print(f"run_pretraining: {section}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                                for k, v in sorted(figures.items())))


def run():
    start(main, "run_pretraining", {"output_dir": DIRECTORY})


if __name__ == "__main__":
    run()
