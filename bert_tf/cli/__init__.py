"""absl entry points. Thin shells: parse flags, call library functions, turn library errors into one-line messages."""

import sys

from bert_tf.checkpoints import CheckpointError
from bert_tf.config import ConfigError

USER_ERRORS = (CheckpointError, ConfigError, FileNotFoundError)


def fail(program: str, error: Exception) -> None:
    """Exit with status 1 and one line on stderr: the program, then what is wrong and what to do."""
    print(f"{program}: error: {error}", file=sys.stderr)
    sys.exit(1)


def define_distribution_flags() -> None:
    """The strategy flags every training CLI shares, including the original's TPU flags."""
    from absl import flags

    flags.DEFINE_enum("strategy", None, ["default", "one_device", "mirrored", "multi_worker", "tpu"],
                      "Distribution strategy (default: mirrored on several GPUs, else none).")
    flags.DEFINE_integer("num_gpus", None, "GPUs for --strategy=mirrored (default: all).")
    flags.DEFINE_string("tpu", None, "TPU name or address, or 'local' on a TPU VM; implies --strategy=tpu.")
    flags.DEFINE_bool("use_tpu", False, "Original flag: run on the TPU named by --tpu_name.")
    flags.DEFINE_string("tpu_name", None, "Original flag: the TPU to use with --use_tpu.")
    flags.DEFINE_string("tpu_zone", None, "Original flag, accepted for compatibility (the name resolves the zone).")
    flags.DEFINE_string("gcp_project", None, "Original flag, accepted for compatibility.")
    flags.DEFINE_string("master", None, "Original flag, accepted for compatibility.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Original flag, accepted for compatibility (the TPU reports its cores).")
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per call of the compiled training loop (also the "
                         "logging interval).")


def strategy_from_flags(f):
    """`bert_tf.distribute.get_strategy` for the flags of `define_distribution_flags`."""
    from bert_tf.distribute import get_strategy

    return get_strategy(f.strategy, tpu=f.tpu or ((f.tpu_name or "local") if f.use_tpu else None),
                        num_gpus=f.num_gpus)


def define_optimizer_flags() -> None:
    """--optimizer and --weight_decay, shared by every training CLI."""
    from absl import flags

    from bert_tf.optimization import OPTIMIZERS

    flags.DEFINE_enum("optimizer", "original_adamw", list(OPTIMIZERS),
                      "original_adamw: the original BERT optimizer the paper used (Adam without bias correction); "
                      "adamw: Keras's bias-corrected AdamW; lamb: LAMB, for large batches.")
    flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay (not on LayerNorm and biases).")


def define_finetuning_flags(max_seq_length: int = 128, dev: str = "dev", evaluates: bool = True,
                            dropout_rate: float = 0.1) -> None:
    """The flags every fine-tuning CLI shares (the original run_classifier/run_squad names), plus the strategy
    flags. `dev` names what chooses among learning rates; `evaluates=False` leaves out --do_eval (run_squad
    evaluates on the predict file)."""
    from absl import flags

    flags.DEFINE_string("bert_config_file", None, "bert_config.json (or HF config.json) of the pretrained model.")
    flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with.")
    flags.DEFINE_string("output_dir", None, "Where the fine-tuned model, results and predictions are written.")
    flags.DEFINE_string("init_checkpoint", None, "Pretrained weights: an original TF1 checkpoint, an HF directory "
                        "or one of ours.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models; --nodo_lower_case for cased).")
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Maximum length in word pieces of one input.")
    flags.DEFINE_bool("do_train", False, "Whether to fine-tune.")
    if evaluates:
        flags.DEFINE_bool("do_eval", False, f"Whether to evaluate on {dev} (writes eval_results.txt).")
        flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
    flags.DEFINE_bool("do_predict", False, "Whether to predict on the test data.")
    flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
    flags.DEFINE_list("learning_rate", ["5e-5"], f"Peak learning rate, or a comma list to choose from on {dev}.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps with linear warmup.")
    flags.DEFINE_integer("num_restarts", 1, f"Restarts per learning rate (other seeds), the best kept on {dev}.")
    flags.DEFINE_float("dropout_rate", dropout_rate, "Dropout on the head's input.")
    flags.DEFINE_integer("random_seed", 12345, "Seed of the head's initialisation, dropout and data order.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Original flag, accepted (the best model is saved at the "
                         "end).")
    define_optimizer_flags()
    define_distribution_flags()
    flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])


def options_from_flags(f, cls):
    """An options dataclass filled from the flags of the same names (`--learning_rate` gives `learning_rates`,
    the comma list as floats); fields without a flag keep their defaults."""
    import dataclasses

    values = {}
    for field in dataclasses.fields(cls):
        if field.name == "learning_rates" and "learning_rate" in f:
            values[field.name] = tuple(float(rate) for rate in f.learning_rate)
        elif field.name in f:
            values[field.name] = getattr(f, field.name)
    return cls(**values)
