"""One window of tokenized documents -> serialized records appended to its shard: a data_gen worker's work, free of
TensorFlow.

Workers import only numpy, google-crc32c and this package's pure modules, so they start in a fraction of a second
and do not compete with TensorFlow's thread pools; tokenization happens in the main process (or in
`generate.make_window`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import random
import signal
import sys
import threading

import numpy as np

from data_gen.appender import WindowAppender
from data_gen.instances import (A_END, A_START, B_END, B_START, IS_RANDOM, Sentences,
                                pairs_from_document, truncate)
from data_gen.masking import MaskingVocab, mask_tokens
from data_gen.records import serialize
from data_gen.workers import main_alive, wait_for_main


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
    random_next_sentence: bool = True  # False: B always follows A (records for the No NSP objective)

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


def build_window(window_index: int, values: np.ndarray, sentence_ends: np.ndarray, doc_sizes: list[int],
                 vocab: MaskingVocab, cls_id: int, sep_id: int, options: Options, features: dict):
    """Token ids of one window -> (`records.Records`, statistics). Pure: the result depends on its arguments only.

    `values` are the ids of all sentences back to back, `sentence_ends` where each sentence ends, `doc_sizes` the
    number of sentences of each document; `features` is the record schema (`bert_tf.records.FEATURES`, handed over
    by the main process). The generators are seeded by (random_seed, window index).
    """
    seeds = np.random.SeedSequence([options.random_seed, window_index])
    rng = np.random.default_rng(seeds)  # vectorised draws (truncation, masking, shuffles)
    scalar_rng = random.Random(int(seeds.generate_state(2, np.uint64)[1]))  # per-pair draws
    sentences = Sentences.from_ragged(sentence_ends, doc_sizes)
    stats = {"documents": len(sentences.documents)}
    if len(sentences.documents) < 2:
        return serialize({}, features), dict(stats, instances=0)
    spans: list = []
    max_num_tokens = options.max_seq_length - 3
    for _ in range(options.dupe_factor):
        for index in rng.permutation(len(sentences.documents)).tolist():
            pairs_from_document(sentences, index, max_num_tokens, options.short_seq_prob, scalar_rng,
                                    options.random_next_sentence, spans)
    spans = truncate(spans, max_num_tokens, rng)[rng.permutation(len(spans))]
    arrays, kinds = _to_arrays(np.asarray(values), spans, vocab, cls_id, sep_id, options, rng)
    stats.update(instances=len(spans), tokens=int(arrays["input_mask"].sum()),
                 masked=int(arrays["masked_lm_weights"].sum()), random_next=int(arrays["next_sentence_labels"].sum()),
                 kind_mask=int((kinds == 0).sum()), kind_random=int((kinds == 1).sum()),
                 kind_kept=int((kinds == 2).sum()))
    return serialize(arrays, features), stats


def append_window(appender: WindowAppender, window_index: int, *args) -> dict:
    """`build_window`, its records framed as TFRecord file bytes and appended to the window's shard in window order;
    returns the statistics. Any failure stops the other windows' appends too (`WindowAppender.fail`)."""
    try:
        records, stats = build_window(window_index, *args)
        appender.append(window_index, records.tfrecord_bytes())
    except BaseException:
        appender.fail()
        raise
    return stats


_APPENDER: list[WindowAppender] = []  # a worker's appender, set by `worker_init`


def worker_append_window(window_index: int, *args) -> dict:
    """`append_window` with the appender this worker was started with: the task a pool worker runs."""
    return append_window(_APPENDER[0], window_index, *args)


def worker_ready() -> None:
    """Nothing: submitted once per worker at start so that the worker processes load this module early."""


def worker_init(appender: WindowAppender | None = None, parent_pid: int | None = None) -> None:
    """Pool initializer: end with the main process `parent_pid` (`exit_with_parent`), keep the run's appender, and
    let freed window arrays be reused instead of handed back to the kernel.

    A window allocates arrays of a few to tens of MB. glibc serves blocks that large with mmap and unmaps them when
    freed, so every window page-faults all of its memory in again, system time that grows with the corpus
    (BENCHMARKS.md, "Pretraining data generation"). With the mmap threshold raised to glibc's maximum (32 MB) and
    trimming of the heap top off, the blocks come from the heap and are reused window after window; the peak is the
    same, because the memory is held between windows only up to the size one window needs. No-op where libc is not
    glibc.
    """
    if parent_pid is not None:
        exit_with_parent(parent_pid)
    if appender is not None:
        _APPENDER[:] = [appender]
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # no C library to load, or one without mallopt
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 1 << 30)


def exit_with_parent(parent_pid: int) -> None:
    """Ends this process as soon as the main process `parent_pid`, which started it, has exited, however it died.

    A killed main process cannot shut its pool down: its workers would wait for tasks forever, and keep
    multiprocessing's resource tracker (which exits once no process holds its pipe) alive with them. A daemon thread
    waits for the main process to exit (`workers.wait_for_main`) and exits the process, as soon as the worker's
    Python code runs (numpy's calls on a window take milliseconds). A spawned worker's parent is the main process,
    and on Linux the kernel also sends it SIGKILL when that dies (PR_SET_PDEATHSIG), even in the middle of a C
    call; a worker forked from the fork server (`data_gen.workers`) is that server's child, and the server exits
    only after its workers, so there the thread does it alone.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG, <linux/prctl.h>
        except (OSError, AttributeError):
            pass
    if not main_alive(parent_pid):  # it died before the watch began
        os._exit(1)

    def watch():
        wait_for_main(parent_pid)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _to_arrays(values: np.ndarray, spans: np.ndarray, vocab: MaskingVocab, cls_id: int, sep_id: int,
               options: Options, rng):
    """Spans -> the record's arrays: [CLS] A [SEP] B [SEP] gathered from `values` for all rows at once, masked."""
    seq = options.max_seq_length
    spans = spans.astype(np.int32)
    a_start, b_start = spans[:, A_START, None], spans[:, B_START, None]
    la = spans[:, A_END, None] - a_start
    length = la + (spans[:, B_END, None] - b_start) + 3
    column = np.arange(seq, dtype=np.int32)[None, :]
    in_b = column >= la + 2
    real = column < length
    # Column j holds A's token j - 1 or B's token j - la - 2; [CLS], [SEP] and padding are written over after.
    source = np.where(in_b, b_start - la - 2, a_start - 1) + column
    tokens = np.where(real, values[np.clip(source, 0, len(values) - 1)], 0)
    rows = np.arange(len(spans))
    tokens[:, 0] = cls_id
    tokens[rows, la[:, 0] + 1] = sep_id
    tokens[rows, length[:, 0] - 1] = sep_id
    positions, labels, weights, kinds = mask_tokens(tokens, length[:, 0], vocab, rng, options.masked_lm_prob,
                                                    options.max_predictions_per_seq, options.do_whole_word_mask)
    arrays = {"input_ids": tokens, "input_mask": real.view(np.uint8), "segment_ids": (in_b & real).view(np.uint8),
              "masked_lm_positions": positions, "masked_lm_ids": labels, "masked_lm_weights": weights,
              "next_sentence_labels": spans[:, IS_RANDOM, None]}
    return arrays, kinds
