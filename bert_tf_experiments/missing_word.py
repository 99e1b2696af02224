"""`missing_word`, the span-QA task the experiments make from any corpus without hand labels, written as SQuAD v1.1
JSON so that `run_squad` trains and scores it: the context is two or three consecutive sentences of a document, the
question one of them with one word left out, the answer that word where it stands in the context. Finding it means
lining the question up with the context, the kind of token-level reading SQuAD needs and that Table 5's
left-to-right model is worst at."""

from __future__ import annotations

import json
import random

from bert_tf import staging

MIN_WORDS, MAX_WORDS = 5, 14  # words of a question sentence: long enough to line up, short enough for the query


def missing_word_examples(documents, count: int, seed: int, prefix: str) -> list[dict]:
    """`count` SQuAD paragraphs of one question each (see the module docstring), drawn with `seed`; ids are
    `<prefix>-<n>`. The left-out word is alphabetic, three letters or more, not "the" (the SQuAD metric drops
    articles: it would score as no answer), and appears once in the context, so the answer is unambiguous."""
    rng = random.Random(seed)
    candidates = [(d, i) for d in documents for i, s in enumerate(d) if MIN_WORDS <= len(s.split()) <= MAX_WORDS]
    if not candidates:
        raise ValueError(f"no sentence of {MIN_WORDS}-{MAX_WORDS} words to ask about: the corpus is too small")
    paragraphs, tries = [], 0
    while len(paragraphs) < count:
        tries += 1
        if tries > 100 * count:  # a corpus whose sentences repeat their words, or hold none of three letters
            raise ValueError(f"only {len(paragraphs)} of {count} missing_word questions found in {tries - 1} tries: "
                             "too few sentences with a word that appears once in its context")
        document, i = rng.choice(candidates)
        first = max(0, i - rng.randint(0, 2))
        sentences = [" ".join(s.split()) for s in document[first:first + 3]]
        context = " ".join(sentences)
        words = sentences[i - first].split()
        choices = [k for k, w in enumerate(words) if w.isalpha() and len(w) >= 3 and w.lower() != "the"
                   and context.split().count(w) == 1]
        if not choices:
            continue
        k = rng.choice(choices)
        start = len(" ".join(sentences[:i - first])) + (i > first) + len(" ".join(words[:k])) + (k > 0)
        paragraphs.append({"context": context, "qas": [{
            "id": f"{prefix}-{len(paragraphs)}", "question": " ".join(words[:k] + words[k + 1:]),
            "answers": [{"text": words[k], "answer_start": start}]}]})
    return paragraphs


def write_squad(path: str, paragraphs: list[dict]) -> None:
    """Paragraphs as a SQuAD v1.1 file (written under a temporary name, then renamed)."""
    with staging.staged_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "missing_word", "paragraphs": paragraphs}]}, f)
