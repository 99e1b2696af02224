"""One window of tokenized documents -> serialized records: the work a data_gen worker does, free of TensorFlow.

Workers import only numpy and this package's pure modules, so they start in a fraction of a second and do not
compete with TensorFlow's thread pools; tokenization happens in the main process (or in `generate.make_window`).
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from data_gen.instances import NspBalance, pairs_from_document
from data_gen.masking import MaskingVocab, mask_tokens
from data_gen.records import serialize


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


def build_window(window_index: int, values: np.ndarray, sentence_ends: np.ndarray, doc_sizes: list[int],
                 vocab: MaskingVocab, cls_id: int, sep_id: int, options: Options):
    """Token ids of one window -> (serialized records, statistics). Pure: the result depends on its arguments only.

    `values` are the ids of all sentences back to back, `sentence_ends` where each sentence ends, `doc_sizes` the
    number of sentences of each document. The generators are seeded by (random_seed, window index).
    """
    seeds = np.random.SeedSequence([options.random_seed, window_index])
    rng = np.random.default_rng(seeds)  # vectorised draws (masking, shuffles)
    scalar_rng = random.Random(int(seeds.generate_state(2, np.uint64)[1]))  # per-pair draws
    ids, ends = values.tolist(), sentence_ends.tolist()
    docs, sentence, start = [], 0, 0
    for size in doc_sizes:
        sentences = []
        for end in ends[sentence:sentence + size]:
            if end > start:
                sentences.append(ids[start:end])
            start = end
        sentence += size
        if sentences:
            docs.append(sentences)
    stats = {"documents": len(docs)}
    if len(docs) < 2:
        return [], dict(stats, instances=0)
    pairs = []
    balance = NspBalance()
    max_num_tokens = options.max_seq_length - 3
    for _ in range(options.dupe_factor):
        for index in rng.permutation(len(docs)):
            pairs += pairs_from_document(docs, int(index), max_num_tokens, options.short_seq_prob, scalar_rng,
                                         balance)
    arrays, kinds = _to_arrays(pairs, vocab, cls_id, sep_id, options, rng)
    order = rng.permutation(len(pairs))
    arrays = {k: v[order] for k, v in arrays.items()}
    stats.update(instances=len(pairs), tokens=int(arrays["input_mask"].sum()),
                 masked=int(arrays["masked_lm_weights"].sum()), random_next=int(arrays["next_sentence_labels"].sum()),
                 kind_mask=int((kinds == 0).sum()), kind_random=int((kinds == 1).sum()),
                 kind_kept=int((kinds == 2).sum()))
    return serialize(arrays), stats


def _to_arrays(pairs, vocab: MaskingVocab, cls_id: int, sep_id: int, options: Options, rng):
    n, seq = len(pairs), options.max_seq_length
    tokens = np.zeros((n, seq), np.int64)
    segments = np.zeros((n, seq), np.int64)
    lengths = np.zeros(n, np.int64)
    for i, (a, b, _) in enumerate(pairs):
        row = [cls_id, *a, sep_id, *b, sep_id]
        tokens[i, : len(row)] = row
        segments[i, len(a) + 2: len(row)] = 1
        lengths[i] = len(row)
    positions, labels, weights, kinds = mask_tokens(tokens, lengths, vocab, rng, options.masked_lm_prob,
                                                    options.max_predictions_per_seq, options.do_whole_word_mask)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    arrays = {"input_ids": tokens, "input_mask": mask, "segment_ids": segments, "masked_lm_positions": positions,
              "masked_lm_ids": labels, "masked_lm_weights": weights,
              "next_sentence_labels": np.array([[int(p[2])] for p in pairs], np.int64).reshape(n, 1)}
    return arrays, kinds
