"""Article text -> one sentence per line, the corpus format BERT's data is made from, for sources that hold whole
articles (TFDS's wikipedia, c4, ...). Deterministic and without dependencies.

Rules, in order:
1. Line breaks end paragraphs, and a paragraph always ends a sentence; empty lines are dropped.
2. Inside a paragraph a sentence ends after `.`, `!` or `?` (one or more, then any closing quotes or brackets)
   followed by whitespace and then by something other than a lower-case letter.
3. A `.` does not end one after a known abbreviation (`Mr.`, `Dr.`, `e.g.`, `U.S.`, `Jan.`, ...; `ABBREVIATIONS`),
   after a single letter (an initial: `J. R. R. Tolkien`) or after letters joined by dots (`U.S.A.`).
4. `。`, `！` and `？` (with closing brackets) end a sentence whatever follows, as CJK text has no spaces.

What it gets wrong: a sentence that ends with an abbreviation runs on into the next (`... in the U.S. The ...`), a
sentence starting with a lower-case word is joined to the one before, and `?`/`!` inside a quotation ends the
sentence. For next-sentence prediction these cost a few pairs, not the corpus.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset("""
    mr mrs ms mx dr prof st jr sr rev hon gen col lt sgt capt cmdr adm gov sen rep pres fr br
    vs etc cf al approx ca fig figs vol vols no nos pp ed eds ch sec art dept est univ assn
    inc ltd co corp bros mt ft ave rd blvd
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
    e.g i.e a.m p.m u.s u.k u.n e.u d.c
""".split())

_LATIN_END = re.compile(r"""[.!?]+["'”’»)\]]*(?=\s+[^\s])""")
_CJK_END = re.compile(r"[。！？]+[」』）】〕”’\"]*")
_DOTTED = re.compile(r"^(?:[^\W\d_]\.)*[^\W\d_]$")  # U.S / J / e.g (letters joined by dots)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` by the module's rules, stripped, in order."""
    sentences = []
    for paragraph in text.splitlines():
        start = 0
        for end in _boundaries(paragraph):
            sentences.append(paragraph[start:end])
            start = end
        sentences.append(paragraph[start:])
    return [s.strip() for s in sentences if s.strip()]


def _boundaries(paragraph: str) -> list[int]:
    ends = {m.end() for m in _CJK_END.finditer(paragraph) if m.end() < len(paragraph)}
    for match in _LATIN_END.finditer(paragraph):
        following = paragraph[match.end():].lstrip()
        if following[0].islower():
            continue
        punctuation = match.group(0).rstrip("\"'”’»)]")
        if punctuation == ".":
            word = paragraph[:match.start()].rsplit(None, 1)[-1] if paragraph[:match.start()].strip() else ""
            word = word.lstrip("\"'“‘«([")
            if word.lower() in ABBREVIATIONS or _DOTTED.match(word):
                continue
        ends.add(match.end())
    return sorted(ends)
