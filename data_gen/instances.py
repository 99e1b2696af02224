"""Documents -> (segment A, segment B, is_random_next) pairs, as in the paper's section 3.3 and the original code.

Pure functions over token-id lists; the randomness comes from the `random.Random` passed in (its scalar draws are
an order of magnitude cheaper than numpy's, and this code makes a few per pair).

One deliberate change from the original: the next-sentence labels are balanced. The original makes B random
whenever a chunk holds a single segment, so on corpora of short documents its ratio drifts to ~60 % random. Here a
pair whose label was forced to "random" makes the next freely drawn pair "actual next" (`NspBalance`), which keeps
the ratio at 50 % within a fraction of a percent while every pair stays a true continuation or a true random pick.
"""

from __future__ import annotations

import dataclasses
import itertools


@dataclasses.dataclass
class NspBalance:
    """Counts forced "random next" labels still to be paid back by an "actual next" one."""

    debt: int = 0

    def draw(self, rng, can_be_next: bool) -> bool:
        """True = B is random. A chunk of one segment has no actual next sentence to offer."""
        if not can_be_next:
            self.debt += 1
            return True
        if self.debt:
            self.debt -= 1
            return False
        return bool(rng.random() < 0.5)


def truncate_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng) -> None:
    """In place, as the original: trim the longer side one token at a time, from the front or the back at random."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def pairs_from_document(documents: list[list[list[int]]], index: int, max_num_tokens: int, short_seq_prob: float,
                        rng, balance: NspBalance) -> list[tuple[list[int], list[int], bool]]:
    """All (A, B, is_random_next) pairs of `documents[index]`; `documents` is the window, the random-next pool.

    Segments are accumulated up to a target length (`short_seq_prob` of the time a shorter random one, to reduce
    the pretrain/fine-tune length mismatch), then split at a random segment boundary into A and B.
    """
    document = documents[index]
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = rng.randrange(2, max_num_tokens + 1)
    pairs = []
    chunk: list[list[int]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randrange(1, len(chunk)) if len(chunk) >= 2 else 1
            tokens_a = list(itertools.chain.from_iterable(chunk[:a_end]))
            is_random = balance.draw(rng, can_be_next=len(chunk) >= 2)
            tokens_b: list[int] = []
            if is_random:
                other = index
                for _ in range(10):
                    other = rng.randrange(len(documents))
                    if other != index:
                        break
                if other == index:  # ten draws of the same document: take its neighbour
                    other = (index + 1) % len(documents)
                random_document = documents[other]
                start = rng.randrange(len(random_document))
                for segment in random_document[start:]:
                    tokens_b.extend(segment)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end  # the unused segments start the next chunk
            else:
                tokens_b = list(itertools.chain.from_iterable(chunk[a_end:]))
            truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            if tokens_a and tokens_b:
                pairs.append((tokens_a, tokens_b, is_random))
            chunk, length = [], 0
        i += 1
    return pairs
