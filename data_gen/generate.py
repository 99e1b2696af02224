"""Corpus -> masked-LM + next-sentence TFRecords: streaming, parallel and deterministic.

The corpus is read as a stream of documents grouped into windows of `window_size` documents. Each window is one
unit of work, done by a worker process or in-process: tokenize its lines in-graph, shuffle its documents, build
pairs (`instances`) `dupe_factor` times, mask them (`masking`), shuffle the instances and serialize them. Its random
generator is seeded by (random_seed, window index) alone, so the bytes of a window do not depend on which worker
made it, and the main process writes windows in order (window k to shard k mod shards). Memory is bounded by the
windows in flight (2 per worker), whatever the corpus size. The random-next pool is the window.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import random
import time

import numpy as np
from absl import logging

from bert_tf.tokenization import load_vocab
from data_gen import documents as documents_lib
from data_gen.documents import CorpusError, expand_input_files
from data_gen.instances import NspBalance, pairs_from_document
from data_gen.masking import MaskingVocab, mask_tokens
from data_gen.writer import METADATA_NAME, ShardWriter, file_sha256, serialize, write_metadata


@dataclasses.dataclass(frozen=True)
class Options:
    """The generation flags of the original generator (same names and defaults) plus our window size."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    random_seed: int = 12345
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    window_size: int = 1000

    def check(self):
        problems = []
        if self.max_seq_length < 5:
            problems.append(f"--max_seq_length={self.max_seq_length} must be at least 5 ([CLS] A [SEP] B [SEP])")
        if self.max_predictions_per_seq < 1:
            problems.append(f"--max_predictions_per_seq={self.max_predictions_per_seq} must be at least 1")
        if not 0 < self.masked_lm_prob < 1:
            problems.append(f"--masked_lm_prob={self.masked_lm_prob} must be in (0, 1)")
        if not 0 <= self.short_seq_prob <= 1:
            problems.append(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1]")
        if self.dupe_factor < 1:
            problems.append(f"--dupe_factor={self.dupe_factor} must be at least 1")
        if self.window_size < 2:
            problems.append(f"--window_size={self.window_size} must be at least 2")
        if problems:
            raise ValueError("; ".join(problems))


# ----------------------------------------------------------------------------------------------- one window
_WORKER: dict = {}


def _worker_state(vocab_file: str, do_lower_case: bool):
    """Per process: the in-graph tokenizer (compiled once) and the masking vocabulary."""
    key = (vocab_file, do_lower_case)
    if _WORKER.get("key") != key:
        import tensorflow as tf

        from bert_tf.tokenization import BertTokenizerLayer

        layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
        tokenize = tf.function(lambda lines: layer(lines), input_signature=[tf.TensorSpec([None], tf.string)])
        _WORKER.update(key=key, tokenize=tokenize, vocab=MaskingVocab.from_tokens(layer.vocab),
                       cls=layer.vocab.index("[CLS]"), sep=layer.vocab.index("[SEP]"))
    return _WORKER


def make_window(window_index: int, window: list[list[str]], vocab_file: str, options: Options):
    """One window of documents (lists of lines) -> (serialized records, statistics). Pure given its inputs."""
    state = _worker_state(vocab_file, options.do_lower_case)
    seeds = np.random.SeedSequence([options.random_seed, window_index])
    rng = np.random.default_rng(seeds)  # vectorised draws (masking, shuffles)
    scalar_rng = random.Random(int(seeds.generate_state(2, np.uint64)[1]))  # per-pair draws
    lines = [line for document in window for line in document]
    ids = state["tokenize"](lines)
    splits = ids.row_splits.numpy().tolist()
    values = ids.flat_values.numpy().tolist()
    docs, start = [], 0
    for document in window:
        sentences = [values[splits[i]:splits[i + 1]] for i in range(start, start + len(document))]
        start += len(document)
        sentences = [s for s in sentences if len(s)]
        if sentences:
            docs.append(sentences)
    stats = {"documents": len(docs), "lines": len(lines), "bytes": sum(len(line.encode()) + 1 for line in lines)}
    if len(docs) < 2:
        return [], dict(stats, instances=0)
    pairs = []
    balance = NspBalance()
    max_num_tokens = options.max_seq_length - 3
    for _ in range(options.dupe_factor):
        for index in rng.permutation(len(docs)):
            pairs += pairs_from_document(docs, int(index), max_num_tokens, options.short_seq_prob, scalar_rng,
                                         balance)
    arrays, kinds = _to_arrays(pairs, state, options, rng)
    order = rng.permutation(len(pairs))
    arrays = {k: v[order] for k, v in arrays.items()}
    stats.update(instances=len(pairs), tokens=int(arrays["input_mask"].sum()),
                 masked=int(arrays["masked_lm_weights"].sum()), random_next=int(arrays["next_sentence_labels"].sum()),
                 kind_mask=int((kinds == 0).sum()), kind_random=int((kinds == 1).sum()),
                 kind_kept=int((kinds == 2).sum()))
    return serialize(arrays), stats


def _to_arrays(pairs, state, options: Options, rng):
    n, seq = len(pairs), options.max_seq_length
    tokens = np.zeros((n, seq), np.int64)
    segments = np.zeros((n, seq), np.int64)
    lengths = np.zeros(n, np.int64)
    for i, (a, b, _) in enumerate(pairs):
        row = [state["cls"], *a, state["sep"], *b, state["sep"]]
        tokens[i, : len(row)] = row
        segments[i, len(a) + 2: len(row)] = 1
        lengths[i] = len(row)
    positions, labels, weights, kinds = mask_tokens(tokens, lengths, state["vocab"], rng, options.masked_lm_prob,
                                                    options.max_predictions_per_seq, options.do_whole_word_mask)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    arrays = {"input_ids": tokens, "input_mask": mask, "segment_ids": segments, "masked_lm_positions": positions,
              "masked_lm_ids": labels, "masked_lm_weights": weights,
              "next_sentence_labels": np.array([[int(p[2])] for p in pairs], np.int64).reshape(n, 1)}
    return arrays, kinds


# ------------------------------------------------------------------------------------------------ the whole run
def output_paths(output_file: str, num_output_shards: int | None) -> list[str]:
    """`--output_file` as a comma list of files, or a directory (existing or ending in '/') with N shards."""
    if num_output_shards or output_file.endswith("/") or os.path.isdir(output_file):
        shards = num_output_shards or 1
        return [os.path.join(output_file, f"pretraining-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    return [p.strip() for p in output_file.split(",") if p.strip()]


def generate(input_files, output_files: list[str], vocab_file: str, options: Options = Options(), num_workers=1,
             gzip=False, progress=True) -> dict:
    """Runs the whole generation; returns the metadata written beside the shards (`metadata.json`)."""
    options.check()
    files = expand_input_files(input_files)
    vocab = load_vocab(vocab_file)  # a clear error for a bad vocab before any work starts
    if "[MASK]" not in vocab:
        raise ValueError(f"{vocab_file}: the vocabulary has no [MASK] token, which masked-LM data needs")
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be at least 1")
    if not output_files:
        raise ValueError("--output_file names no file; give files (comma-separated) or a directory")
    writer = ShardWriter(output_files, gzip=gzip)
    totals: dict = {}
    started = time.time()
    bar = _progress(progress)
    try:
        stream = enumerate(documents_lib.windows(documents_lib.read_documents(files), options.window_size))
        for index, (records, stats) in _run(stream, vocab_file, options, num_workers):
            writer.write_window(index, records)
            for key, value in stats.items():
                totals[key] = totals.get(key, 0) + value
            bar.update(stats, totals, time.time() - started)
        if not totals.get("instances"):
            raise CorpusError(f"{', '.join(files)}: no instances; the corpus needs at least two non-empty documents "
                              "separated by a blank line")
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    writer.close()
    metadata = _metadata(files, output_files, vocab_file, options, gzip, totals, writer.counts)
    write_metadata(os.path.join(os.path.dirname(os.path.abspath(output_files[0])), METADATA_NAME), metadata)
    elapsed = time.time() - started
    logging.info("wrote %d instances in %.1f s (%.0f instances/s, %.2f MB/s of text)", totals["instances"], elapsed,
                 totals["instances"] / elapsed, totals["bytes"] / 1e6 / elapsed)
    return metadata


def _run(stream, vocab_file, options, num_workers):
    """Yields (window index, (records, stats)) in window order, at most 2 windows per worker in flight."""
    if num_workers == 1:
        for index, window in stream:
            yield index, make_window(index, window, vocab_file, options)
        return
    context = multiprocessing.get_context("spawn")  # TF is not fork-safe
    with concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=context) as pool:
        pending = []
        for index, window in stream:
            pending.append((index, pool.submit(make_window, index, window, vocab_file, options)))
            if len(pending) >= 2 * num_workers:
                done_index, future = pending.pop(0)
                yield done_index, future.result()
        for done_index, future in pending:
            yield done_index, future.result()


def _metadata(files, output_files, vocab_file, options, gzip, totals, counts):
    instances = totals["instances"]
    return {
        "generator": "bert_tf data_gen",
        "flags": dataclasses.asdict(options) | {"gzip": gzip},
        "vocab_file": os.path.abspath(vocab_file),
        "vocab_sha256": file_sha256(vocab_file),
        "input_files": [os.path.abspath(f) for f in files],
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

    def close(self):
        if self.bar is not None:
            self.bar.close()
