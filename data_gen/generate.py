"""Corpus -> masked-LM + next-sentence TFRecords: streaming, parallel and deterministic.

The corpus is read as a stream of documents grouped into windows of `window_size` documents. The main process
tokenizes each window with TensorFlow's ops (TensorFlow is loaded once, here) and hands the token ids to a worker
process, which runs `window.build_window` without TensorFlow: shuffle the documents, build pairs (`instances`)
`dupe_factor` times, mask them (`masking`), shuffle the instances, encode them and frame them as TFRecord file bytes
(`records`), then appends them to the window's shard itself (`appender`), in window order (window k to shard k mod
shards); only statistics come back. A window's generators are seeded by (random_seed, window index) alone, so its
bytes do not depend on which worker made it. Memory is bounded by the windows in flight (2 per worker), whatever the
corpus size. The random-next pool is the window.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.records import FEATURES, file_sha256
from bert_tf.tokenization import check_case, load_vocab
from data_gen import documents as documents_lib
from data_gen import workers
from data_gen.cpus import available_cpus
from data_gen.documents import CorpusError
from data_gen.stops import Stops
from data_gen.masking import MaskingVocab
from data_gen.window import (Options, append_window, build_window, worker_append_window, worker_init,
                             worker_ready)
from data_gen.writer import ShardWriter


# ----------------------------------------------------------------------------------------------- one window
_TOKENIZER: dict = {}


def _tokenizer_state(vocab_file: str, do_lower_case: bool):
    """Per process: the in-graph tokenizer and the masking vocabulary. The tokenizer runs eagerly: a window's lines
    are one batch of a few dozen ops, and tracing and optimizing them into a graph function before the first window
    costs more than it saves."""
    key = (vocab_file, do_lower_case)
    if _TOKENIZER.get("key") != key:
        import tensorflow as tf

        from bert_tf.tokenization import InGraphTokenizer

        tokenizer = InGraphTokenizer(vocab_file, do_lower_case=do_lower_case)
        _TOKENIZER.update(key=key, tokenize=lambda lines: tokenizer.tokenize(tf.constant(lines, tf.string)),
                          vocab=MaskingVocab.from_tokens(tokenizer.vocab),
                          cls=tokenizer.vocab.index("[CLS]"), sep=tokenizer.vocab.index("[SEP]"))
    return _TOKENIZER


def tokenize_window(window: list[list[str]], vocab_file: str, options: Options):
    """Documents (lists of lines) -> the arguments of `window.build_window` after the window index, and the text
    statistics (lines, bytes)."""
    state = _tokenizer_state(vocab_file, options.do_lower_case)
    lines = [line for document in window for line in document]
    ids = state["tokenize"](lines)
    values = ids.flat_values.numpy().astype(np.int32)  # half the bytes to send to a worker
    args = (values, ids.row_splits.numpy()[1:], [len(d) for d in window], state["vocab"],
            state["cls"], state["sep"], options, FEATURES)
    return args, {"lines": len(lines), "bytes": len("\n".join(lines).encode()) + 1}


def make_window(window_index: int, window: list[list[str]], vocab_file: str, options: Options):
    """One window of documents (lists of lines) -> (`records.Records`, statistics), in this process."""
    args, text_stats = tokenize_window(window, vocab_file, options)
    records, stats = build_window(window_index, *args)
    return records, dict(stats, **text_stats)


# ------------------------------------------------------------------------------------------------ the whole run
def default_num_workers(options: Options) -> int:
    """One worker per CPU this process may use (`cpus.available_cpus`; 1: no worker, all in this process), at most
    2 x dupe_factor. This process tokenizes for every worker, and a worker's share of the work grows with
    dupe_factor while the tokenizing does not, so beyond about one worker per dupe the rest would wait and hold their
    memory (BENCHMARKS.md, "Pretraining data generation", measures it)."""
    return min(available_cpus(), 2 * options.dupe_factor)


def output_paths(output_file: str, num_output_shards: int | None) -> list[str]:
    """`--output_file` as a comma list of files, or a directory (existing or ending in '/') with N shards."""
    if num_output_shards is not None and num_output_shards < 1:
        raise ValueError(f"--num_output_shards={num_output_shards} must be at least 1")
    if num_output_shards and "," in output_file:
        raise ValueError(f"--num_output_shards={num_output_shards} names the shards of one directory, but "
                         f"--output_file={output_file} lists files; give a directory, or leave out --num_output_shards")
    if num_output_shards or output_file.endswith("/") or fileio.isdir(output_file):
        shards = num_output_shards or 1
        return [os.path.join(output_file, f"pretraining-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    return [p.strip() for p in output_file.split(",") if p.strip()]


def check_vocab(vocab_file: str, do_lower_case: bool) -> None:
    """A clear error for a vocabulary that cannot make masked-LM data, or whose case contradicts `do_lower_case`
    (`tokenization.check_case`), before any work starts."""
    if "[MASK]" not in load_vocab(vocab_file):
        raise ValueError(f"{vocab_file}: the vocabulary has no [MASK] token, which masked-LM data needs")
    check_case(vocab_file, do_lower_case)


def generate(input_files, output_files: list[str], vocab_file: str, options: Options = Options(), num_workers=1,
             gzip=False, progress=True, global_shuffle=False) -> dict:
    """Runs the whole generation; returns the metadata written beside the shards (`metadata.json`). `input_files`:
    `--input_file`'s files and globs, or a corpus (`documents.as_corpus`: a TFDS dataset, `tfds_corpus`).

    The output is one record set in one directory: on success the shards listed in the metadata replace those of
    the run that wrote the directory before (`writer.ShardWriter.commit`); a run that fails or is stopped leaves
    the earlier set and its metadata as they were. SIGTERM stops the run like Ctrl-C (`stops.Terminated`), held
    while TensorFlow tokenizes and dropped once the commit has begun (`stops.Stops`), and the workers end with this
    process however it ends (`window.exit_with_parent`).

    With `global_shuffle` the records are then shuffled across all windows and shards (`shuffle`), as the
    original shuffles all of its instances; without, each window's are shuffled among themselves.

    With `num_workers` > 1 the workers are new processes, not forks of this one (`data_gen.workers`: TensorFlow is
    not fork-safe), which re-import the calling script: call this under `if __name__ == "__main__":` and keep
    TensorFlow imports out of the script's top level, or every worker loads TensorFlow too.
    """
    options.check()
    corpus = documents_lib.as_corpus(input_files)
    parts = corpus.parts()
    check_vocab(vocab_file, options.do_lower_case)
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be at least 1")
    if not output_files:
        raise ValueError("--output_file names no file; give files (comma-separated) or a directory")
    writer = ShardWriter(output_files, gzip=gzip, global_shuffle=global_shuffle)
    totals: dict = {}
    started = time.time()
    bar = _progress(progress)
    stream = enumerate(documents_lib.windows(documents_lib.corpus_documents(corpus, parts), options.window_size))
    stops = Stops()
    runs = _run(stream, vocab_file, options, num_workers, writer.appender, stops)
    with stops.catching():
        try:
            for index, stats in runs:
                writer.count(index, stats["instances"])
                for key, value in stats.items():
                    totals[key] = totals.get(key, 0) + value
                bar.update(stats, totals, time.time() - started)
            if not totals.get("instances"):
                raise CorpusError(f"{corpus.describe(parts)}: no instances; the corpus needs at least two non-empty "
                                  "documents separated by a blank line")
            if global_shuffle:
                logging.info("shuffling %d instances across windows and shards", totals["instances"])
                writer.shuffle(options.random_seed)
            metadata = describe_run(corpus.source(parts), output_files, vocab_file, options, gzip, totals,
                                    writer.counts, global_shuffle)
            with stops.finishing():
                writer.commit(metadata)
        except BaseException:
            writer.appender.fail()
            runs.close()  # the workers are shut down: nothing appends after this
            writer.abort()
            bar.close(erase=True)  # the error is the last word
            raise
        bar.close()
    empty = sum(count == 0 for count in writer.counts)
    if empty and global_shuffle:
        logging.warning("%d of %d shards hold no record: the run made only %d records; write fewer shards", empty,
                        len(output_files), totals["instances"])
    elif empty:
        logging.warning("%d of %d shards hold no record: each takes whole windows of --window_size=%d documents, "
                        "and the corpus filled fewer windows than there are shards; a replica given only empty "
                        "shards has nothing to train on, so write fewer shards or use a smaller --window_size",
                        empty, len(output_files), options.window_size)
    elapsed = time.time() - started
    logging.info("wrote %d instances in %.1f s %s (%.0f instances/s, %.2f MB/s of text)", totals["instances"],
                 elapsed, f"with {num_workers} worker processes" if num_workers > 1 else "in this process",
                 totals["instances"] / elapsed, totals["bytes"] / 1e6 / elapsed)
    return metadata


def _tokenized(stream, vocab_file, options, stops):
    """(window index, `tokenize_window`'s arguments and statistics) for each window of `stream`; reading a window
    (a TFDS corpus is read by TensorFlow) and tokenizing it hold back a stopping signal (`Stops.held`)."""
    while True:
        with stops.held():
            item = next(stream, None)
            if item is None:
                return
            index, window = item
            args, text_stats = tokenize_window(window, vocab_file, options)
        yield index, args, text_stats


def _run(stream, vocab_file, options, num_workers, appender, stops):
    """Builds and appends every window (window k after window k-1); yields (window index, statistics) in order, with
    at most 2 windows per worker in flight."""
    tokenized = _tokenized(stream, vocab_file, options, stops)
    if num_workers == 1:
        for index, args, text_stats in tokenized:
            yield index, dict(append_window(appender, index, *args), **text_stats)
        return
    # Tokenization stays here (TensorFlow is loaded once); workers get token ids and never import TensorFlow, and
    # are not forks of this process (`data_gen.workers`: TensorFlow is not fork-safe).
    with concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=workers.context(), initializer=worker_init,
                                                initargs=(appender, os.getpid())) as pool:
        try:
            workers.start_workers(pool, num_workers, worker_ready)
            pending = []
            for index, args, text_stats in tokenized:
                pending.append((index, pool.submit(worker_append_window, index, *args), text_stats))
                if len(pending) >= 2 * num_workers:
                    done_index, future, done_text = pending.pop(0)
                    yield done_index, dict(future.result(), **done_text)
            for done_index, future, done_text in pending:
                yield done_index, dict(future.result(), **done_text)
        except BaseException:  # incl. GeneratorExit: workers abort at their next turn check instead of appending
            # windows that `ShardWriter.abort` will delete; they are stopped at once rather than left to finish the
            # window in hand (what they wrote is temporary and deleted), and the shutdown waits for them, so none
            # appends after it
            appender.fail()
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def describe_run(source: dict, output_files, vocab_file, options, gzip, totals, counts,
                 global_shuffle=False) -> dict:
    """The contents of `metadata.json` for a run's corpus (`source` of a corpus), summed window statistics and
    its shards' record counts."""
    instances = totals["instances"]
    return {
        "generator": "bert_tf data_gen",
        "flags": dataclasses.asdict(options) | {"gzip": gzip, "global_shuffle": global_shuffle},
        "vocab_file": fileio.absolute(vocab_file),
        "vocab_sha256": file_sha256(vocab_file),
        **source,
        "shards": [{"path": os.path.basename(p), "instances": c} for p, c in zip(output_files, counts)],
        "instances": instances,
        "documents": totals["documents"],
        "tokens": totals["tokens"],
        "mean_tokens_per_instance": totals["tokens"] / instances,
        "masked_fraction": totals["masked"] / totals["tokens"],  # of all tokens incl. [CLS]/[SEP], as the original
        "masked_kinds": {"mask": totals["kind_mask"] / totals["masked"],
                         "random": totals["kind_random"] / totals["masked"],
                         "kept": totals["kind_kept"] / totals["masked"]},
        "random_next_fraction": totals["random_next"] / instances,
    }


class _progress:
    """tqdm bar over windows showing documents, instances and MB/s; a no-op when disabled."""

    def __init__(self, enabled):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(unit=" docs", desc="create_pretraining_data")

    def update(self, stats, totals, elapsed):
        if self.bar is not None:
            self.bar.update(stats["documents"])
            self.bar.set_postfix(instances=totals.get("instances", 0),
                                 MBps=f"{totals.get('bytes', 0) / 1e6 / max(elapsed, 1e-9):.2f}")

    def close(self, erase=False):
        if self.bar is not None:
            self.bar.leave = not erase
            self.bar.close()
