"""Masked-LM inputs: pick `masked_lm_prob` of the tokens (at least 1, at most `max_predictions_per_seq`), never
[CLS]/[SEP]; replace 80 % of the picks by [MASK], 10 % by a random word piece, keep 10 % (paper section 3.1).

Pure numpy over a batch of instances (token ids padded with 0, `lengths` real tokens each). The default path is
vectorised; whole-word masking (all pieces of a word masked together, `##` marking continuations) walks words per
instance like the original.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """The ids masking needs: [MASK], the ids never masked, the random-replacement pool, `##` continuations."""

    mask_id: int
    special_ids: np.ndarray  # [CLS], [SEP] (and [PAD]): never picked
    replacement_ids: np.ndarray  # real word pieces: neither special tokens nor [unusedN] slots
    is_continuation: np.ndarray  # bool per vocab id: the piece starts with "##"

    @classmethod
    def from_tokens(cls, tokens: list[str]) -> "MaskingVocab":
        index = {t: i for i, t in enumerate(tokens)}
        special = [index[t] for t in ("[PAD]", "[CLS]", "[SEP]") if t in index]
        excluded = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
        replacements = [i for i, t in enumerate(tokens) if t not in excluded and not
                        (t.startswith("[unused") and t.endswith("]"))]
        return cls(index["[MASK]"], np.array(special, np.int64), np.array(replacements, np.int64),
                   np.array([t.startswith("##") for t in tokens]))


def num_to_predict(lengths, masked_lm_prob, max_predictions):
    """min(max_predictions, max(1, round(len * prob))) with Python's round-half-to-even, as the original."""
    return np.minimum(max_predictions, np.maximum(1, np.rint(np.asarray(lengths) * masked_lm_prob).astype(np.int64)))


def _replace(tokens, positions, valid, vocab: MaskingVocab, rng):
    """Applies the 80/10/10 rule in place at `positions` where `valid`; returns (labels, kinds)."""
    flat = (np.arange(len(tokens)) * tokens.shape[1])[:, None] + positions  # indices into tokens as flattened
    labels = np.where(valid, np.take(tokens, flat), 0)
    roll = rng.random(positions.shape, dtype=np.float32)
    kinds = np.where(valid, np.where(roll < 0.8, 0, np.where(roll < 0.9, 2, 1)), -1)
    random_ids = vocab.replacement_ids[rng.integers(0, len(vocab.replacement_ids), positions.shape, dtype=np.int32)]
    new = np.where(kinds == 0, vocab.mask_id, np.where(kinds == 2, labels, random_ids))
    np.put(tokens, flat[valid], new[valid])
    return labels, kinds


def mask_tokens(tokens, lengths, vocab: MaskingVocab, rng, masked_lm_prob=0.15, max_predictions=20,
                whole_word=False):
    """Masks a batch in place. Returns (positions, labels, weights, kinds), each [batch, max_predictions]:
    positions sorted ascending and zero-padded, weights 1.0 for real predictions, kinds 0 = [MASK], 1 = random,
    2 = kept, -1 = padding."""
    tokens = np.asarray(tokens)
    batch, seq = tokens.shape
    lengths = np.asarray(lengths)
    candidate = (np.arange(seq)[None, :] < lengths[:, None]) & ~np.isin(tokens, vocab.special_ids)
    count = np.minimum(num_to_predict(lengths, masked_lm_prob, max_predictions), candidate.sum(1))
    if whole_word:
        picked = np.stack([_whole_word_pick(tokens[i], candidate[i], count[i], max_predictions, vocab, rng)
                           for i in range(batch)]) if batch else np.zeros((0, max_predictions), np.int64)
    else:
        picked = _random_subsets(candidate, count, max_predictions, rng)
    valid = picked < seq
    positions = np.where(valid, picked, 0)
    labels, kinds = _replace(tokens, positions, valid, vocab, rng)
    return positions, labels, valid.astype(np.float32), kinds


def _random_subsets(candidate, count, max_predictions, rng):
    """Per row, a uniformly random subset of `count` of the candidate positions, ascending, padded with seq.

    Selection sampling (Knuth's algorithm S) down the columns for all rows at once: a candidate is taken with
    probability (still to take) / (candidates left), which gives every subset of the size the same chance, takes
    exactly `count`, and yields the positions already sorted.
    """
    batch, seq = candidate.shape
    by_column = np.ascontiguousarray(candidate.T)
    draws = rng.random((seq, batch))
    need = count.astype(np.float64)
    left = by_column.sum(0).astype(np.float64)
    taken = np.empty((seq, batch), bool)
    for j in range(seq):
        is_candidate = by_column[j]
        taken[j] = is_candidate & (draws[j] * left < need)
        need -= taken[j]
        left -= is_candidate
    rows, columns = np.nonzero(taken.T)  # row by row, columns ascending
    slots = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
    picked = np.full((batch, max_predictions), seq, np.int64)
    picked[rows, slots] = columns
    return picked


def _whole_word_pick(tokens, candidate, count, max_predictions, vocab: MaskingVocab, rng):
    """The original's loop: shuffle words, take whole words while they fit in `count`, skip those that do not."""
    words: list[list[int]] = []
    for i in np.flatnonzero(candidate):
        if words and vocab.is_continuation[tokens[i]] and words[-1][-1] == i - 1:
            words[-1].append(int(i))
        else:
            words.append([int(i)])
    chosen: list[int] = []
    for w in rng.permutation(len(words)):
        if len(chosen) >= count:
            break
        if len(chosen) + len(words[w]) > count:
            continue
        chosen += words[w]
    out = np.full(max_predictions, len(tokens), np.int64)
    out[: len(chosen)] = sorted(chosen)
    return out
