"""Documents -> (segment A, segment B, is_random_next) pairs, as in the paper's section 3.3 and the original code.

Pure functions over one window of tokenized text. The window's token ids lie back to back in one array, sentence
after sentence and document after document, so every segment the original builds by concatenating sentences is a
contiguous slice of that array: a pair is five integers (A's start and end offsets, B's, the label), never a copy
of tokens. Chunk and random-B ends are found by bisection over the sentence end offsets, and truncation is worked
out in closed form for all pairs at once (`truncate`), so a pair costs a few scalar random draws and no per-token
Python.

Next-sentence labels are drawn as the original draws them: a chunk of a single segment has no actual next sentence
to offer and always gets a random B; otherwise B is random with probability 1/2. So where many chunks hold one
segment (short documents) the random share is above 50 %, as the original's is (62 % on the corpus docs/data.md
measures). A scheme that paid each forced "random" back by making the next free draw "actual next" kept 50 %,
but that draw is mostly the next document's first chunk, so the label became predictable from whether A opens a
document; the labels are not balanced for that reason.
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np

# Columns of the span array `pairs_from_document` fills and `truncate` trims.
A_START, A_END, B_START, B_END, IS_RANDOM = range(5)


@dataclasses.dataclass(frozen=True)
class Sentences:
    """Where the window's non-empty sentences lie in its flat token array, and which belong to which document.

    `starts[k]`, `ends[k]`: token offsets of sentence k; `documents[d]`: (first, last + 1) sentence of document d.
    Documents without tokens are left out, as the original drops them.
    """

    starts: list[int]
    ends: list[int]
    documents: list[tuple[int, int]]

    @classmethod
    def from_ragged(cls, sentence_ends: np.ndarray, doc_sizes) -> "Sentences":
        """`sentence_ends`: end offset of every sentence (empty ones included); `doc_sizes`: sentences per document."""
        ends = np.asarray(sentence_ends, np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        doc_of = np.repeat(np.arange(len(doc_sizes)), np.asarray(doc_sizes, np.int64))
        keep = ends > starts
        counts = np.bincount(doc_of[keep], minlength=len(doc_sizes))
        bounds = np.concatenate([[0], np.cumsum(counts)])
        documents = [(int(bounds[d]), int(bounds[d + 1])) for d in np.flatnonzero(counts)]
        return cls(starts[keep].tolist(), ends[keep].tolist(), documents)


def pairs_from_document(sentences: Sentences, index: int, max_num_tokens: int, short_seq_prob: float, rng,
                        random_next: bool, out: list) -> None:
    """Appends the (a_start, a_end, b_start, b_end, is_random) spans of document `index` to `out`, untruncated.

    Sentences are accumulated up to a target length (`short_seq_prob` of the time a shorter random one, to reduce
    the pretrain/fine-tune length mismatch), then split at a random sentence boundary into A and B; B is the rest
    of the chunk or, for a random next, sentences of another document of the window from a random one on, up to the
    target. `rng` is a `random.Random` (its scalar draws are an order of magnitude cheaper than numpy's).
    `random_next` False: no random next at all (the No NSP objective's records): B is always the rest of the chunk,
    and empty for a chunk of one sentence.
    """
    starts, ends, documents = sentences.starts, sentences.ends, sentences.documents
    first, last = documents[index]
    random = rng.random
    target = max_num_tokens
    if random() < short_seq_prob:
        target = 2 + int(random() * (max_num_tokens - 1))  # uniform in [2, max_num_tokens]
    chunk_start = first
    while chunk_start < last:
        # The chunk ends at its first sentence that brings it to the target, or at the document's end.
        chunk_end = min(bisect.bisect_left(ends, starts[chunk_start] + target, chunk_start, last), last - 1) + 1
        size = chunk_end - chunk_start
        a_end = chunk_start + (1 + int(random() * (size - 1)) if size >= 2 else 1)
        a_lo, a_hi = starts[chunk_start], ends[a_end - 1]
        is_random = random_next and (size < 2 or random() < 0.5)
        if not random_next and size < 2:
            out.append((a_lo, a_hi, a_hi, a_hi, 0))
            chunk_start = chunk_end
        elif is_random:
            other = index
            for _ in range(10):
                other = int(random() * len(documents))
                if other != index:
                    break
            if other == index:  # ten draws of the same document: take its neighbour
                other = (index + 1) % len(documents)
            o_first, o_last = documents[other]
            b_first = o_first + int(random() * (o_last - o_first))
            need = target - (a_hi - a_lo)
            b_last = min(bisect.bisect_left(ends, starts[b_first] + need, b_first, o_last), o_last - 1)
            out.append((a_lo, a_hi, starts[b_first], ends[b_last], 1))
            chunk_start = a_end  # the chunk's unused sentences start the next chunk
        else:
            out.append((a_lo, a_hi, starts[a_end], ends[chunk_end - 1], 0))
            chunk_start = chunk_end


def truncate(spans: np.ndarray, max_num_tokens: int, rng: np.random.Generator) -> np.ndarray:
    """Trims over-long pairs as the original does, for all spans at once; returns the trimmed copy.

    The original removes one token at a time from the longer side (B on a tie), from its front or back with
    probability 1/2, until A + B fits. How many tokens each side loses depends on the lengths alone, so it is
    computed directly; the number taken from the front of a side that loses t tokens is then Binomial(t, 1/2),
    the same distribution the original's coin flips give.
    """
    spans = np.array(spans, np.int64).reshape(-1, 5)
    la = spans[:, A_END] - spans[:, A_START]
    lb = spans[:, B_END] - spans[:, B_START]
    excess = np.maximum(la + lb - max_num_tokens, 0)
    only_a = (la > lb) & (la - excess >= lb)
    only_b = (lb >= la) & (lb - excess >= la)
    # Otherwise both sides are trimmed down to an even split, A keeping the odd token (B loses the ties).
    keep_a = np.where(only_a, la - excess, np.where(only_b, la, np.minimum(la, (max_num_tokens + 1) // 2)))
    keep_b = np.where(only_a, lb, np.where(only_b, lb - excess, np.minimum(lb, max_num_tokens // 2)))
    for start, end, cut in ((A_START, A_END, la - keep_a), (B_START, B_END, lb - keep_b)):
        front = rng.binomial(cut, 0.5)
        spans[:, start] += front
        spans[:, end] -= cut - front
    return spans
