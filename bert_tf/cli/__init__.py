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
