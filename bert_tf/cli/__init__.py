"""absl entry points. Thin shells: parse flags, call library functions, turn library errors into one-line messages."""

import atexit
import gc
import os
import re
import signal
import sys

from absl import app
from absl import flags as absl_flags

from bert_tf.config import ConfigError
from bert_tf.errors import CheckpointError, Preempted, TrainingError

USER_ERRORS = (CheckpointError, ConfigError, FileNotFoundError, TrainingError, Preempted)


_program = None


def program() -> str:
    """The running command's name: the one its entry point gave `start` (so that run_swag's errors say run_swag
    although run_classifier's code runs), else the script's file name."""
    return _program or os.path.splitext(os.path.basename(sys.argv[0]))[0]


def fail(error) -> None:
    """Exit with status 1 and one line on stderr: the program, then what is wrong and what to do."""
    print(f"{program()}: error: {error}", file=sys.stderr)
    sys.exit(1)


# What an output flag names: a directory, a file, either one (the command tells by the name), or a comma list of
# either.
DIRECTORY, FILE, PATH, PATHS = "directory", "file", "path", "paths"


def start(main, name: str, outputs: dict) -> None:
    """Runs `main` with absl's `app.run` as the command `name`, every failure a user can cause reported as one line
    by `fail`: a flag that does not parse or a required one missing; an output flag (`outputs`: flag name ->
    DIRECTORY, FILE, PATH or PATHS) naming a path that cannot be written, before any work; an OSError on a file, or
    TensorFlow's refusal to create or write an output, met later. A run that fails removes the directories it
    created for its outputs as long as they hold no file; an output directory that existed before is not touched.

    The command owns its process, so the objects its imports made go to the collector's permanent generation first
    (`bert_tf.heap`): the run's collections then never walk TensorFlow's modules."""
    global _program
    _program = name
    gc.freeze()
    atexit.register(_freeze_heap_at_exit)
    app.run(lambda argv: _run_writing(main, argv, outputs), flags_parser=_parse_flags)


def _freeze_heap_at_exit() -> None:
    """Moves every object to the collector's permanent generation once the exit handlers registered after `start`
    have run, so that the interpreter's teardown frees the heap by reference counts alone instead of also running
    full collections over the millions of objects TensorFlow's modules hold. Nothing is left to a finalizer by
    then: a command's files and checkpoints are closed and its summaries flushed, and the memory goes back to the
    system with the process."""
    gc.freeze()


def _parse_flags(argv):
    """absl's flag parsing, its errors (a bad value, an unknown flag, required flags missing) as one line; a flag
    given twice, which absl takes the last of without a word (a grid flag given twice trains one value), is said."""
    try:
        parsed = absl_flags.FLAGS(argv)
    except absl_flags.Error as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        missing = [m.group(1) for m in (re.fullmatch(r"flag --(\w+)=None: Flag --\1 must have a value other than "
                                                     r"None\.", line) for line in lines) if m]
        if missing and len(missing) == len(lines):
            message = f"{', '.join('--' + name for name in missing)} {'is' if len(missing) == 1 else 'are'} required"
        else:
            message = "; ".join(lines)
        fail(f"{message} (--helpshort lists the flags)")
    given: dict = {}
    for arg in argv[1:argv.index("--") if "--" in argv else len(argv)]:
        name = arg.lstrip("-").split("=", 1)[0]
        if not arg.startswith("-") or not name:
            continue
        if name not in absl_flags.FLAGS and name.startswith("no") and name[2:] in absl_flags.FLAGS:
            name = name[2:]
        if name in absl_flags.FLAGS and not isinstance(absl_flags.FLAGS[name], absl_flags.MultiFlag):
            given.setdefault(name, []).append(arg)
    for name, args in given.items():
        if len(args) > 1:  # overriding an earlier flag is a shell script's idiom: said, not refused
            print(f"{_program}: warning: --{name} is given {len(args)} times; the last is used, {args[-1]} (a grid "
                  "flag takes a comma list)", file=sys.stderr, flush=True)
    return parsed


def _run_writing(main, argv, outputs: dict, flag_values=None):
    """`main(argv)` after checking the output paths, undoing the directories it made if it fails (see `start`).
    `flag_values`: where the output flags are (default: absl's global FLAGS)."""
    from bert_tf import staging

    paths = []
    for flag, kind in outputs.items():
        value = (absl_flags.FLAGS if flag_values is None else flag_values)[flag].value or ""
        for path in filter(None, (p.strip() for p in (value.split(",") if kind == PATHS else [value]))):
            problem = staging.output_problem(path, {DIRECTORY: True, FILE: False}.get(kind))
            if problem:
                fail(f"--{flag}={value}: {problem}; give another --{flag}")
            paths.append((flag, value, path))
    created = {staging.first_missing(path) for _, _, path in paths} - {None}
    try:
        return main(argv)
    except BaseException as e:
        if not (isinstance(e, SystemExit) and not e.code):
            for directory in created:
                staging.remove_if_empty(directory)
        if isinstance(e, KeyboardInterrupt):
            stopped_by_ctrl_c()
        message = None if isinstance(e, SystemExit) else _file_error(e, paths)
        if message is None:
            raise
        fail(message)


def stopped_by_ctrl_c() -> None:
    """Ends the command interrupted by Ctrl-C with one line instead of the interrupted frames of TensorFlow. What it
    wrote is whole: outputs are renamed into place when complete, and a training run's last checkpoint is where the
    same command resumes."""
    die_of(signal.SIGINT, f"{program()}: stopped by SIGINT (Ctrl-C)")


def die_of(signum, line: str) -> None:
    """Prints `line` on stderr, then ends the process by the signal `signum` itself, as an unhandled one ends it, so
    that a shell or scheduler sees which signal stopped it. Nothing is unloaded first: TensorFlow's teardown could
    take longer than a scheduler's grace period, and there is nothing left to clean up."""
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # where the signal cannot kill (it is blocked): the shell's status for it


def _file_error(error: BaseException, paths: list) -> str | None:
    """The one line for an OSError on a file, TensorFlow's refusal to create or write one of `paths`, or its failure
    to reach a URL; None for anything else."""
    import tensorflow as tf

    from bert_tf import fileio

    if isinstance(error, OSError) and error.filename:
        where = fileio.absolute(os.fsdecode(error.filename))
        text = f"{error.filename}{f' -> {error.filename2}' if error.filename2 else ''}: {error.strerror}"
    elif isinstance(error, (tf.errors.FailedPreconditionError, tf.errors.PermissionDeniedError,
                            tf.errors.AlreadyExistsError)):
        where, text = None, error.message.splitlines()[0]
    else:
        return fileio.url_failure(error)
    for flag, value, path in paths:
        path = fileio.absolute(path)
        if where is not None:  # the output, in it or above it
            local = not (fileio.is_url(path) or fileio.is_url(where))
            concerned = local and os.path.commonpath([where, path]) in (where, path)
        else:
            parents = [path]
            while fileio.dirname(parents[-1]) != parents[-1]:
                parents.append(fileio.dirname(parents[-1]))
            concerned = any(parent in text for parent in parents[:-1])  # not the root
        if concerned:
            return f"cannot write --{flag}={value}: {text}; give another --{flag}"
    return text if where is not None else fileio.url_failure(error)


def define_distribution_flags(flag_values=None) -> None:
    """The strategy flags every training CLI shares, including the original's TPU flags and
    `--iterations_per_loop`. `flag_values`: where to define them (default: absl's global FLAGS)."""
    from absl import flags

    fv = dict(flag_values=flags.FLAGS if flag_values is None else flag_values)
    flags.DEFINE_enum("strategy", None, ["default", "one_device", "mirrored", "multi_worker", "tpu"],
                      "Distribution strategy (default: mirrored on several GPUs, else none).", **fv)
    flags.DEFINE_integer("num_gpus", None, "GPUs for --strategy=mirrored (default: all; 0: the CPU).", **fv)
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address, or 'local' on a TPU VM; implies --strategy=tpu.",
                        **fv)
    flags.DEFINE_bool("use_tpu", False, "Original flag: run on the TPU named by --tpu_name (or at --master; "
                      "default: the local TPU).", **fv)
    flags.DEFINE_string("tpu_name", None, "Original flag: the TPU to use with --use_tpu.", **fv)
    flags.DEFINE_string("tpu_zone", None, "Original flag: the GCE zone in which to look up --tpu_name.", **fv)
    flags.DEFINE_string("gcp_project", None, "Original flag: the GCP project in which to look up --tpu_name.", **fv)
    flags.DEFINE_string("master", None, "Original flag: the TPU's grpc:// address, with --use_tpu and no --tpu_name.",
                        **fv)
    flags.DEFINE_integer("num_tpu_cores", None, "Original flag: the TPU's core count; checked against the cores the "
                         "TPU reports (default: whatever it reports).", **fv)
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per call of the compiled training loop (also the "
                         "logging interval).", **fv)


def define_precision_flags(dtype: str) -> None:
    """--dtype (default `dtype`), --jit_compile and --gradient_accumulation_steps, shared by every training CLI."""
    from absl import flags

    from bert_tf.training import DTYPES

    flags.DEFINE_enum("dtype", dtype, list(DTYPES), "Compute precision: float32, mixed_bfloat16, or mixed_float16 "
                      "with dynamic loss scaling (fp32, bf16, fp16 name the same). Variables, logits and losses stay "
                      "float32.")
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA: on a GPU by far the faster way "
                      "to train, on the CPUs measured no faster (docs/pretraining.md).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches per update: each batch of "
                         "--train_batch_size is split into this many, their gradients summed into one update.")


class _NumberListParser(absl_flags.ListParser):
    """A comma list of numbers of one type (int or float)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def parse(self, argument):
        values = super().parse(argument)
        try:
            return [self.kind(value) for value in values]
        except (TypeError, ValueError):
            raise ValueError(f"expected a comma list of {'integers' if self.kind is int else 'numbers'}") from None

    def flag_type(self):
        return f"comma separated list of {'integers' if self.kind is int else 'numbers'}"


def define_number_list(name: str, default: str, kind, help: str) -> None:  # noqa: A002 (absl's argument name)
    absl_flags.DEFINE(_NumberListParser(kind), name, default, help, serializer=absl_flags.CsvListSerializer(","))


def strategy_from_flags(f):
    """`bert_tf.distribute.get_strategy` for the flags of `define_distribution_flags`, the original's TPU flags
    resolved as the original resolves them: `--use_tpu` with `--tpu_name` (looked up in `--tpu_zone` of
    `--gcp_project`), else with `--master` as the TPU's address, else the local TPU. A TPU flag without a TPU is a
    ValueError naming it."""
    from bert_tf.distribute import get_strategy

    tpu = f.tpu
    if f.use_tpu:
        named = [value for value in (f.tpu, f.tpu_name, f.master) if value]
        if len(set(named)) > 1:
            raise ValueError(f"--tpu, --tpu_name and --master name different TPUs ({', '.join(named)}); give one")
        tpu = named[0] if named else "local"
    else:
        for name in ("tpu_name", "master"):
            if f[name].value:
                raise ValueError(f"--{name}={f[name].value} is only read with --use_tpu: add --use_tpu (or pass "
                                 f"--tpu={f[name].value}), or drop it")
    return get_strategy(f.strategy, tpu=tpu, num_gpus=f.num_gpus, tpu_zone=f.tpu_zone, gcp_project=f.gcp_project,
                        num_tpu_cores=f.num_tpu_cores)


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
    define_number_list("train_batch_size", "32", int, f"Training batch size (global), or a comma list to choose "
                       f"from on {dev}.")
    flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
    define_number_list("learning_rate", "5e-5", float, f"Peak learning rate, or a comma list to choose from on {dev}.")
    define_number_list("num_train_epochs", "3.0", float, f"Training epochs, or a comma list to choose from on {dev}.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps with linear warmup.")
    flags.DEFINE_integer("num_restarts", 1, f"Restarts per grid cell (other seeds), the best kept on {dev}.")
    flags.DEFINE_float("dropout_rate", dropout_rate, "Dropout on the head's input.")
    flags.DEFINE_integer("random_seed", 12345, "Seed of the head's initialisation, dropout and data order.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many updates; rerunning the same "
                         "command resumes from the last checkpoint (and skips finished grid cells).")
    define_optimizer_flags()
    define_precision_flags("float32")
    define_distribution_flags()
    flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])


def print_best(results: dict) -> None:
    """The grid's winner, when fine-tuning chose among several cells."""
    if len(results.get("grid", ())) > 1:
        print(f"{program()}: best of {len(results['grid'])} grid cells: {results['best']} (all in "
              "grid_results.tsv)")


def options_from_flags(f, cls):
    """An options dataclass filled from the flags of the same names (the grid's comma lists `--learning_rate` and
    `--train_batch_size` give `learning_rates` and `train_batch_sizes`); fields without a flag keep their
    defaults."""
    import dataclasses

    lists = {"learning_rates": "learning_rate", "train_batch_sizes": "train_batch_size"}
    values = {}
    for field in dataclasses.fields(cls):
        flag = lists.get(field.name, field.name)
        if flag in f:
            value = getattr(f, flag)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def _command_module():
    """The running command's module and the name its flags are registered under: the module whose `run` a console
    script calls (the script imports it into __main__), or __main__ itself (`python -m`), whose flags absl files
    under the script's path."""
    main = sys.modules["__main__"]
    module = sys.modules.get(getattr(getattr(main, "run", None), "__module__", None), main)
    return module, sys.argv[0] if module is main else module.__name__


def help_text(full: bool = False) -> str:
    """The command's help: its docstring, then its own flags (those it defines and the shared ones it adopts);
    `full` adds every other flag, absl's last among them, grouped by the module that defines it."""
    module, key = _command_module()
    f = absl_flags.FLAGS
    text = (module.__doc__ or f"{os.path.basename(sys.argv[0])} [flags]\n").rstrip("\n") + "\n\nflags:\n"
    text += f.module_help(key) + "\n"
    if not full:
        return text + "\nTry --helpfull to get a list of all flags.\n"
    own = {flag.name for flag in f.get_key_flags_for_module(key)}
    rest = absl_flags.FlagValues()
    for name, flags in f.flags_by_module_dict().items():
        for flag in flags:
            if flag.name not in own and flag.name not in rest and flag.name in f and f[flag.name] is flag:
                rest[flag.name] = flag
                rest.register_flag_by_module(name, flag)
    return text + "\nOther flags:\n" + rest.get_help() + "\n"


class _HelpFlag(absl_flags.BooleanFlag):
    """absl's --help, --helpshort and --helpfull, printing `help_text` and exiting 0: absl's own print the usage of
    the script the console-script launcher is (not the command's flags) and exit 1."""

    def __init__(self, name: str, short_name: str | None, full: bool, text: str):
        super().__init__(name, False, text, short_name=short_name, allow_hide_cpp=True)
        self.full = full

    def parse(self, argument):
        if self._parse(argument):
            sys.stdout.write(help_text(self.full))
            sys.stdout.flush()
            sys.exit(0)


def _define_help_flags():
    from absl import app

    app.define_help_flags()
    for name, short_name, full, text in (("help", "?", False, "show this help"),
                                         ("helpshort", None, False, "show this help (the same as --help)"),
                                         ("helpfull", None, True, "show the command's flags, then every other flag")):
        for old in {name, short_name} - {None}:
            delattr(absl_flags.FLAGS, old)
        absl_flags.DEFINE_flag(_HelpFlag(name, short_name, full, text), module_name="absl.app")


_define_help_flags()
