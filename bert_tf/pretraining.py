"""Pretraining input: records of the schema in `bert_tf.records` read from TFRecord globs, checked against the
data's metadata.

`pretraining_dataset` yields `(inputs, labels)` batches for `BertPretrainer`: inputs `input_word_ids`,
`input_mask`, `input_type_ids`, `masked_lm_positions`; labels `masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`. For the left-to-right objective it puts the masked tokens back (the records keep every
original piece at its masked position) and yields the text itself with next-token labels `lm_ids`, `lm_weights`.

Before any step runs, `check_records` compares the flags with the `metadata.json` that `data_gen` writes beside
the shards (sequence length, predictions per sequence, vocabulary hash) and with the lengths in the first record,
in every directory the records come from (records without metadata are the original generator's), so a mismatch
is one clear error instead of a shape failure deep inside TensorFlow or a silent mix of record sets.

A truncated or corrupt shard is found when it is read (a scan of every record up front would cost as much as an
epoch of input): TensorFlow's error then names neither the file nor the record, so `run_pretraining` reads the
shards again, one at a time, and stops with a `DataError` naming the damaged file, its first unreadable record
and the command that regenerates it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import re
import warnings
import zlib

import tensorflow as tf
from absl import logging

from bert_tf import fileio, staging
from bert_tf.config import check_fits
from bert_tf.cpu_precision import warn_if_emulated
from bert_tf.tf_data import without_autotuning
from bert_tf.tf_log import python_logger_at
from bert_tf.training import DTYPES
from bert_tf.records import (METADATA_NAME, DataError, feature_spec, file_sha256, listed_shards, read_metadata,
                             record_lengths)

_GZIP_MAGIC = b"\x1f\x8b"


def expand_files(patterns) -> list[str]:
    """Comma-separated (or listed) files and globs -> the list of files: in the order given, each glob's matches
    sorted, and a file named twice listed twice, as the original's `extend(tf.gfile.Glob(pattern))` (the order is
    what `--do_eval` reads; a repeat is read that many times as often).

    Where a `metadata.json` lies beside matched files, it lists the one record set that its run wrote there, and
    any other matched file in that directory (a shard left by an earlier run, a stray copy) is refused by name
    rather than trained on.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise DataError(f"--input_file: {pattern} matches no file")
        files += sorted(m for m in matched
                        if not (m.endswith((".tmp", METADATA_NAME)) or staging.is_staging_name(m)))
    if not files:
        raise DataError("--input_file names no file; give TFRecord files or globs, comma-separated")
    _refuse_unlisted(files)
    return files


def _refuse_unlisted(files: list[str]) -> None:
    for directory in dict.fromkeys(os.path.dirname(f) for f in files):
        path = os.path.join(directory, METADATA_NAME)
        listed = listed_shards(path) if fileio.exists(path) else None
        if listed is None:
            continue
        unlisted = [os.path.basename(f) for f in files if os.path.dirname(f) == directory
                    and os.path.basename(f) not in listed]
        if unlisted:
            names = ", ".join(unlisted[:10]) + (f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else "")
            raise DataError(f"--input_file matches {len(unlisted)} file(s) in {directory} that its {METADATA_NAME} "
                            f"does not list among the {len(listed)} shard(s) of the run that wrote it: {names}; "
                            "delete them (left by another run?) or narrow --input_file to the listed shards")


def compression_of(path: str) -> str | None:
    """"GZIP" when the file starts with the gzip magic bytes, "" for plain TFRecords, None for an empty file (either
    kind: data_gen's empty shards, gzip or not, have no bytes, and TensorFlow reads no record from them either way)."""
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(2)
    return None if not head else "GZIP" if head == _GZIP_MAGIC else ""


def records_compression(files: list[str]) -> str:
    """The compression of a set of record files (`check_records` refuses a mix): that of the first with bytes."""
    return next((c for c in map(compression_of, files) if c is not None), "")


def _first_record_lengths(path: str, compression: str) -> dict[str, int] | None:
    """The lengths in the file's first record; None for a file without records (data_gen writes empty shards
    when the corpus fills fewer windows than there are shards)."""
    try:
        record = next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)), None)
    except tf.errors.OpError as e:
        raise DataError(damage_message([(path, 0, e.message)])) from None
    if record is None:
        return None
    try:
        return record_lengths(tf.train.Example.FromString(record.numpy()))
    except DataError as e:
        raise DataError(f"{path}: {e}") from None


def check_records(files: list[str], max_seq_length: int, max_predictions_per_seq: int,
                  vocab_file: str | None = None, objective: str = "mlm") -> None:
    """Refuses records that were generated with other lengths (or another vocabulary) than the flags; for the
    `mlm_nsp` objective, records whose B is never a random sentence (nothing for the NSP head to learn); for `ltr`,
    records whose B may be a random sentence (a left-to-right LM would learn to read across that seam).

    Each directory of `files` is checked on its own: its metadata (one run's record set), and the first record of
    its files, which also covers records without metadata. The files must agree on compression (the input reads
    them all one way)."""
    expected = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    vocab_sha256 = file_sha256(vocab_file) if vocab_file else None
    unique = list(dict.fromkeys(files))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:  # 2 bytes of each: on a remote filesystem, in parallel
        compressions = dict(zip(unique, pool.map(compression_of, unique)))
    if len(set(compressions.values()) - {None}) > 1:
        gzip = next(f for f, c in compressions.items() if c)
        plain = next(f for f, c in compressions.items() if c == "")
        raise DataError(f"--input_file mixes gzip-compressed records ({gzip}) with plain ones ({plain}); give "
                        "records of one kind (compress or decompress one set)")
    by_directory: dict[str, list[str]] = {}
    for f in unique:
        by_directory.setdefault(os.path.dirname(f), []).append(f)
    any_record = False
    for directory, listed in by_directory.items():
        first = listed[0]
        found = read_metadata(directory)
        if found:
            path, metadata = found
            flags = metadata.get("flags", {})
            for key, value in expected.items():
                if key in flags and flags[key] != value:
                    raise DataError(f"{path}: the records were generated with --{key}={flags[key]}, but training "
                                    f"was given --{key}={value}; pass --{key}={flags[key]} or regenerate the data")
            if objective == "mlm_nsp" and flags.get("random_next_sentence") is False:
                raise DataError(f"{path}: the records were generated with --random_next_sentence=false (B always "
                                "follows A), which leaves next-sentence prediction nothing to learn; pretrain them "
                                "with --objective=mlm, or regenerate them without that flag")
            if vocab_sha256 and metadata.get("vocab_sha256") and vocab_sha256 != metadata["vocab_sha256"]:
                raise DataError(f"{path}: the records were made with another vocabulary than --vocab_file="
                                f"{vocab_file} (sha256 differs); train with the generator's vocabulary "
                                f"{metadata.get('vocab_file')} or regenerate the data")
        if vocab_sha256 and not (found and found[1].get("vocab_sha256")):
            logging.warning("%s: records without metadata.json naming their vocabulary (the original generator's): "
                            "--vocab_file=%s is not checked against them", directory or ".", vocab_file)
        if objective == "ltr" and (not found or found[1].get("flags", {}).get("random_next_sentence") is not False):
            where = found[0] if found else f"{first}: records without metadata.json (the original generator's)"
            raise DataError(f"{where}: the records may pair A with a random B, which a left-to-right LM would learn "
                            "to read across; regenerate them with create_pretraining_data --random_next_sentence=false")
        for path in listed:
            actual = None if compressions[path] is None else _first_record_lengths(path, compressions[path])
            if actual is not None:
                break
        else:
            continue
        any_record = True
        for key, value in expected.items():
            if actual[key] != value:
                raise DataError(f"{path}: records hold {key}={actual[key]}, but training was given --{key}={value}; "
                                f"pass --{key}={actual[key]} or regenerate the data")
    if not any_record:
        raise DataError(f"{unique[0]}: contains no records" if len(unique) == 1 else
                        f"--input_file: none of its {len(unique)} files holds a record")


def damaged_files(files: list[str]) -> list[tuple[str, int, str]]:
    """(file, how many records read well before the damage, TensorFlow's message) for every file among `files`
    that cannot be read to its end: a truncated file, or one whose length or data checksum fails."""
    damaged = []
    with python_logger_at("ERROR"):  # tf_record_iterator's deprecation notice; it is the reader that counts records
        for path in files:
            options = tf.io.TFRecordOptions(compression_of(path) or "")
            good = size = 0
            try:
                for record in tf.compat.v1.io.tf_record_iterator(path, options):
                    good += 1
                    size += len(record) + 16  # length, its CRC, the data, its CRC
            except tf.errors.OpError as e:
                damaged.append((path, good, e.message))
                continue
            if options.compression_type == "GZIP" and not _gzip_complete(path):
                damaged.append((path, good, _GZIP_CUT))
            elif not options.compression_type and size != tf.io.gfile.stat(path).length:
                # a file cut inside a record's 12-byte header reads as if it ended before that record
                damaged.append((path, good, f"truncated record at {size}"))
    return damaged


_GZIP_CUT = "the gzip stream ends before its end marker"


def _gzip_complete(path: str) -> bool:
    """Whether the gzip stream runs to its end marker: TensorFlow reads a stream cut where a record ends as if it
    ended there, without an error."""
    stream = zlib.decompressobj(wbits=31)
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            if stream.eof:
                break
            try:
                stream.decompress(block, 1 << 20)
                while stream.unconsumed_tail:
                    stream.decompress(stream.unconsumed_tail, 1 << 20)
            except zlib.error:
                return False
    return stream.eof


def damage_message(damaged: list[tuple[str, int, str]]) -> str:
    """One line for `damaged_files`' findings: the first damaged file, where, and what to do."""
    path, good, message = damaged[0]
    found = re.search(r"(truncated|corrupted) record at (\d+)", message)
    stream = " of the decompressed data" if found and compression_of(path) else ""
    if message == _GZIP_CUT:
        what = f"is cut short: its gzip stream stops after record {good}, before the end of the stream"
    elif found and found.group(1) == "truncated":
        what = f"is cut short: record {good + 1} (at byte {found.group(2)}{stream}) is incomplete"
    elif found:
        what = f"is corrupt: record {good + 1} (at byte {found.group(2)}{stream}) fails its checksum"
    else:
        what = f"is damaged: record {good + 1} cannot be read ({message.splitlines()[0][:200]})"
    others = [d[0] for d in damaged[1:]]
    more = f"; {len(others)} more damaged: {', '.join(others[:5])}{' ...' if len(others) > 5 else ''}" \
        if others else ""
    return (f"{path}: TFRecord file {what} (an interrupted write or copy?); regenerate it with "
            f"create_pretraining_data, or copy it again, then rerun{more}")


@contextlib.contextmanager
def _naming_damaged_files(files: list[str]):
    """Turns TensorFlow's DataLossError, which names no file, into a `DataError` naming the damaged shard; a
    DataLossError that no shard explains (a damaged checkpoint) goes on unchanged."""
    try:
        yield
        return
    except tf.errors.DataLossError as e:
        error = e
    logging.info("a TFRecord could not be read; reading the %d input file(s) to find which", len(files))
    damaged = damaged_files(files)
    if not damaged:
        raise error
    raise DataError(damage_message(damaged))


def _parse(max_seq_length: int, max_predictions_per_seq: int, objective: str = "mlm_nsp"):
    spec = feature_spec(max_seq_length, max_predictions_per_seq)

    def parse(serialized):
        f = tf.io.parse_example(serialized, spec)
        i32 = lambda name: tf.cast(f[name], tf.int32)  # noqa: E731
        inputs = {"input_word_ids": i32("input_ids"), "input_mask": i32("input_mask"),
                  "input_type_ids": i32("segment_ids"), "masked_lm_positions": i32("masked_lm_positions")}
        labels = {"masked_lm_ids": i32("masked_lm_ids"), "masked_lm_weights": f["masked_lm_weights"],
                  "next_sentence_labels": i32("next_sentence_labels")[:, 0]}
        if objective == "ltr":
            return _left_to_right(inputs, labels)
        return inputs, labels

    return parse


def _left_to_right(inputs, labels):
    """A masked-LM batch -> the left-to-right LM's: the original pieces back at the masked positions (a position
    with weight 0 is padding of the predictions list, not a masked token), and as labels each position's next
    piece, weighted where that piece is real."""
    ids, mask = inputs["input_word_ids"], inputs["input_mask"]
    masked = tf.one_hot(inputs["masked_lm_positions"], tf.shape(ids)[1], dtype=tf.int32) * \
        tf.cast(labels["masked_lm_weights"] > 0, tf.int32)[:, :, None]  # [batch, predictions, seq]
    original = tf.reduce_sum(masked * labels["masked_lm_ids"][:, :, None], axis=1)
    ids = tf.where(tf.reduce_sum(masked, axis=1) > 0, original, ids)
    following = lambda t: tf.pad(t[:, 1:], [[0, 0], [0, 1]])  # noqa: E731
    return ({"input_word_ids": ids, "input_mask": mask, "input_type_ids": inputs["input_type_ids"]},
            {"lm_ids": following(ids), "lm_weights": tf.cast(following(mask), tf.float32)})


def pretraining_dataset(files, max_seq_length: int, max_predictions_per_seq: int, batch_size: int, *,
                        is_training: bool = True, input_context: tf.distribute.InputContext | None = None,
                        seed: int | None = None, shuffle_buffer: int = 1000, cycle_length: int = 8,
                        objective: str = "mlm_nsp", repeat_eval: bool = False):
    """Batches of `(inputs, labels)` from TFRecord files of the original schema (plain or gzip), for `objective`
    (`ltr`: the text with next-token labels, see the module docstring).

    `batch_size` is per input pipeline: the global batch divided by the replicas when called from
    `strategy.distribute_datasets_from_function` (pass its `input_context`), which also shards the input: by file
    when there are at least as many files as pipelines, else by record (with a warning; every pipeline then reads
    every file). Training data is shuffled (files, then records in a buffer), repeated and batched with
    `drop_remainder`; the order is a function of `seed`, and the iterator can be saved in a `tf.train.Checkpoint`, so
    an interrupted run resumes at the same record. Evaluation data is read file after file, in order, once; with
    `repeat_eval` (`run_pretraining --do_eval`) it is the original's evaluation input: repeated and batched with
    `drop_remainder`, so that `--max_eval_steps` scores that many full batches, the first records going round again
    where the files hold fewer. Either has tf.data's autotuning off (`bert_tf.tf_data`).
    """
    files = expand_files(files)
    compression = records_compression(files)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    pipelines, index = (input_context.num_input_pipelines, input_context.input_pipeline_id) if input_context \
        else (1, 0)
    by_record = False
    if pipelines > 1:
        if len(files) >= pipelines:
            dataset = dataset.shard(pipelines, index)
        else:
            by_record = True
            logging.warning("%d input file(s) for %d input pipelines: sharding by record, so every pipeline reads "
                            "every file; write at least %d shards to shard by file", len(files), pipelines,
                            pipelines)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    else:
        cycle_length = 1  # file after file
    dataset = dataset.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
                                 cycle_length=max(1, min(cycle_length, len(files))),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if by_record:
        dataset = dataset.shard(pipelines, index)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    elif repeat_eval:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=is_training or repeat_eval)
    dataset = dataset.map(_parse(max_seq_length, max_predictions_per_seq, objective),
                          num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    return without_autotuning(dataset.prefetch(tf.data.AUTOTUNE))


# ------------------------------------------------------------------------------------------- the whole run
# The paper's Table 5 objectives (bert_tf.models.OBJECTIVES), as `run_pretraining --objective` describes them.
OBJECTIVES = {"mlm_nsp": "masked LM and next-sentence prediction (the paper's BERT)",
              "mlm": "masked LM only, no next-sentence head or loss (the paper's No NSP ablation)",
              "ltr": "left-to-right LM on a causal encoder, no masking, no next-sentence prediction (the paper's "
                     "LTR & No NSP ablation)"}
EXPORT_DIR = "bert_model"  # bert_config.json + bert_model.ckpt (original names) [+ vocab.txt] after training


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """What `run_pretraining` does; the defaults are the original run_pretraining.py's flags.

    `train_batch_size` and `eval_batch_size` are global (all replicas together); with
    `gradient_accumulation_steps` = N each update averages N micro-batches of `train_batch_size / N`.
    `max_eval_steps` None (no flag gives it) evaluates every record once, the last batch as short as the data
    leaves it, instead of the original's `max_eval_steps` full batches going round the data.
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    do_train: bool = True
    do_eval: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    max_eval_steps: int | None = 100
    optimizer: str = "original_adamw"
    weight_decay: float = 0.01
    gradient_accumulation_steps: int = 1
    dtype: str = "fp32"
    jit_compile: bool = False
    random_seed: int = 12345
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    objective: str = "mlm_nsp"

    def check(self, replicas: int) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype={self.dtype!r}: expected one of {', '.join(DTYPES)}")
        warn_if_emulated(self.dtype, DTYPES[self.dtype], self.jit_compile)
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective={self.objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if not (self.do_train or self.do_eval):
            raise ValueError("at least one of --do_train and --do_eval must be set")
        for flag in ("train_batch_size", "eval_batch_size", "max_eval_steps"):
            if getattr(self, flag) is not None and getattr(self, flag) < 1:
                raise ValueError(f"--{flag}={getattr(self, flag)} must be at least 1")
        per_update = replicas * self.gradient_accumulation_steps
        if self.train_batch_size % per_update:
            raise ValueError(f"--train_batch_size={self.train_batch_size} must be a multiple of replicas x "
                             f"--gradient_accumulation_steps = {replicas} x {self.gradient_accumulation_steps}")
        if self.eval_batch_size % replicas:
            raise ValueError(f"--eval_batch_size={self.eval_batch_size} must be a multiple of the {replicas} "
                             "replicas")


def checkpoint_step(path: str) -> int | None:
    """The training step a checkpoint records: `global_step` of our checkpoints and of original TF1 ones; None for
    weights that record none (an HF directory, a checkpoint saved without it)."""
    if fileio.isdir(path):  # an HF directory (a checkpoint directory was resolved to its prefix before)
        return None
    reader = fileio.load_checkpoint(path)
    for name in ("global_step/.ATTRIBUTES/VARIABLE_VALUE", "global_step"):
        if reader.has_tensor(name):
            return int(reader.get_tensor(name))
    return None


def objective_config(config, objective: str):
    """`config` with the attention `objective` needs: causal for `ltr` (set here, so a bert_config.json of a
    bidirectional model serves); a causal config for a masked-LM objective is refused (each position would be
    predicted from its left context only, without the token that is masked)."""
    if objective == "ltr":
        return dataclasses.replace(config, causal_attention=True)
    if config.causal_attention:
        raise ValueError(f"--objective={objective}: the config has causal_attention=true (a left-to-right model); "
                         "pretrain it with --objective=ltr, or use a config without causal_attention")
    return config


def build_pretrainer(config, options: PretrainingOptions):
    """A compiled `BertPretrainer` with the paper's optimizer; call under `strategy.scope()`."""
    from bert_tf.models import BertEncoder, BertPretrainer
    from bert_tf.optimization import create_optimizer

    model = BertPretrainer(BertEncoder(objective_config(config, options.objective), dtype=DTYPES[options.dtype]),
                           objective=options.objective)
    model.gradient_accumulation_steps = options.gradient_accumulation_steps
    model.compile(optimizer=create_optimizer(options.learning_rate, options.num_train_steps,
                                             options.num_warmup_steps, optimizer=options.optimizer,
                                             weight_decay=options.weight_decay,
                                             loss_scale=DTYPES[options.dtype] == "mixed_float16"),
                  auto_scale_loss=False)
    return model


def run_pretraining(config, input_file, output_dir: str, options: PretrainingOptions, strategy=None,
                    progress=None) -> dict:
    """Trains and/or evaluates BERT on pretraining records as the original run_pretraining.py does.

    Checks the records against the flags first. Training resumes from `output_dir` when it holds checkpoints
    (`bert_tf.training.train`); at the end it writes `<output_dir>/bert_model/` laid out like a released model:
    `bert_config.json`, `bert_model.ckpt` (original TF1 names, for fine-tuning with any BERT code) and the
    vocabulary when given. Evaluation writes `eval_results.txt`. Returns the figures. `progress` as in
    `bert_tf.training.train`.
    """
    import keras

    from bert_tf import checkpoints, training

    strategy = strategy or tf.distribute.get_strategy()
    options.check(strategy.num_replicas_in_sync)
    check_fits(config, options.vocab_file, options.max_seq_length)
    if not options.do_train and not (options.init_checkpoint or tf.train.latest_checkpoint(output_dir)):
        raise ValueError(f"--do_eval alone evaluates a trained model, and there is none: --output_dir={output_dir} "
                         "holds no checkpoint and no --init_checkpoint is given; add --do_train, or give the "
                         "--output_dir of a pretraining run")
    files = expand_files(input_file)
    check_records(files, options.max_seq_length, options.max_predictions_per_seq, options.vocab_file,
                  objective=options.objective)
    config = objective_config(config, options.objective)
    tf.io.gfile.makedirs(output_dir)
    keras.utils.set_random_seed(options.random_seed)
    with strategy.scope():
        model = build_pretrainer(config, options)
    results: dict = {}
    if options.do_train:
        def dataset_fn(context):
            return pretraining_dataset(files, options.max_seq_length, options.max_predictions_per_seq,
                                       context.get_per_replica_batch_size(options.train_batch_size),
                                       input_context=context, seed=options.random_seed, objective=options.objective)

        with _naming_damaged_files(files):
            logs = training.train(model, strategy, dataset_fn, output_dir, num_train_steps=options.num_train_steps,
                                  global_batch_size=options.train_batch_size,
                                  steps_per_loop=options.iterations_per_loop,
                                  save_checkpoints_steps=options.save_checkpoints_steps,
                                  init_checkpoint=options.init_checkpoint, jit_compile=options.jit_compile,
                                  progress=progress)
        results["train"] = logs
        if training.is_chief(strategy):  # a released-model directory, in its own folder: it has its own index
            export = os.path.join(output_dir, EXPORT_DIR)
            tf.io.gfile.makedirs(export)
            config.to_json_file(os.path.join(export, "bert_config.json"))
            checkpoints.save_original(model, os.path.join(export, "bert_model.ckpt"), global_step=logs["step"])
            if options.vocab_file:
                staging.copy_file(options.vocab_file, os.path.join(export, "vocab.txt"))
            results["train"]["export"] = export
    else:  # evaluate what is there (checked above)
        latest = tf.train.latest_checkpoint(output_dir)
        if latest and options.init_checkpoint:  # as the original's Estimator, which evaluates its model_dir's
            logging.warning("--init_checkpoint=%s is not read: evaluating %s, the --output_dir's checkpoint",
                            options.init_checkpoint, latest)
        results["checkpoint"] = checkpoints.restore_weights(model, latest or options.init_checkpoint)
        results["step"] = checkpoint_step(results["checkpoint"])
    if options.do_eval:
        dataset = pretraining_dataset(files, options.max_seq_length, options.max_predictions_per_seq,
                                      options.eval_batch_size, is_training=False, objective=options.objective,
                                      repeat_eval=options.max_eval_steps is not None)
        with _naming_damaged_files(files), warnings.catch_warnings():
            if options.max_eval_steps is None:  # every record once: Keras warns whenever data of unknown length ends
                warnings.filterwarnings("ignore", message="Your input ran out of data")
            scores = model.evaluate(dataset, steps=options.max_eval_steps, return_dict=True, verbose=0)
        step = results["train"]["step"] if "train" in results else results["step"]
        scores = {k: float(v) for k, v in scores.items()}
        if step is None:
            logging.warning("%s records no global_step; eval_results.txt leaves it out", results["checkpoint"])
        else:
            scores["global_step"] = step
        training.write_results(os.path.join(output_dir, "eval_results.txt"), scores)
        results["eval"] = scores
    return results
