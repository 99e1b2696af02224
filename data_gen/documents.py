"""Streaming corpus reader: one sentence per line, a blank line between documents (the original input format).

Nothing here holds more than one window of documents: `read_documents` yields documents one at a time and
`windows` groups them into fixed-size windows, the unit of shuffling, random-next sampling and parallel work.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Iterable, Iterator

from bert_tf import fileio


class CorpusError(ValueError):
    """A corpus that cannot make pretraining data (missing, empty, a single document)."""


def expand_input_files(patterns) -> list[str]:
    """`--input_file`: a comma-separated list (or a list) of files and globs -> the files, each glob sorted. Any
    filesystem TensorFlow reads (`gs://...`; `bert_tf.fileio`)."""
    if isinstance(patterns, str):
        patterns = [p.strip() for p in patterns.split(",") if p.strip()]
    files = []
    for pattern in patterns:
        matched = fileio.glob(pattern)
        if not matched:
            raise CorpusError(f"--input_file: {pattern!r} matches no file")
        for path in matched:
            if fileio.isdir(path):
                raise CorpusError(f"--input_file: {path} is a directory; pass its files, e.g. "
                                  f"{os.path.join(path, '*.txt')}")
        files += matched
    return files


def read_documents(files: Iterable[str]) -> Iterator[list[str]]:
    """Yields each document as its list of non-empty lines, across files in order.

    Invalid UTF-8 bytes are dropped, as the original generator's `convert_to_unicode` does; a warning names the
    file and the number of lines affected. A file boundary also ends a document.
    """
    for path in files:
        damaged = 0
        document: list[str] = []
        with fileio.open(path, "rb") as f:
            for lines, bad in _decoded_lines(f):
                damaged += bad
                for line in lines:
                    line = line.strip()
                    if line:
                        document.append(line)
                    elif document:
                        yield document
                        document = []
        if document:
            yield document
        warn_invalid_utf8(path, damaged)


def warn_invalid_utf8(path: str, damaged: int) -> None:
    """The warning for a file with `damaged` lines whose invalid UTF-8 bytes were dropped (none: no warning)."""
    if damaged:
        logging.warning("%s: %d line(s) had invalid UTF-8 bytes; those bytes were dropped", path, damaged)


_BLOCK_BYTES = 1 << 22


def _decoded_lines(f) -> Iterator[tuple[list[str], int]]:
    """The lines of the binary file `f`, split at line feeds only (as the original's `readline`), decoded, a block
    of whole lines at a time: (lines, how many of them had invalid UTF-8 bytes, dropped). A block is decoded in one
    call, and line by line only when it holds invalid UTF-8: far cheaper per line than decoding each."""
    rest = b""
    while True:
        block = f.read(_BLOCK_BYTES)
        if not block:
            if rest:
                yield _decode(rest)
            return
        block = rest + block
        end = block.rfind(b"\n") + 1
        block, rest = block[:end], block[end:]
        if block:
            lines, bad = _decode(block)
            lines.pop()  # the empty string after the block's last newline, which is not a line
            yield lines, bad


def _decode(block: bytes) -> tuple[list[str], int]:
    try:
        return block.decode("utf-8").split("\n"), 0
    except UnicodeDecodeError:
        lines, bad = [], 0
        for raw in block.split(b"\n"):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                lines.append(raw.decode("utf-8", "ignore"))
                bad += 1
        return lines, bad


@dataclasses.dataclass(frozen=True)
class FileCorpus:
    """`--input_file`'s text files as a corpus. A corpus is read in `parts` (here its files), each read alone by
    `read`, in order, so that Beam can read them in parallel and still number the documents as the local run does;
    `source` is what metadata.json records of it. `data_gen.tfds_corpus.TfdsCorpus` is the other kind."""

    patterns: str | tuple

    def parts(self) -> list[str]:
        return expand_input_files(self.patterns)

    def read(self, part: str) -> Iterator[list[str]]:
        return read_documents([part])

    def source(self, parts: list[str]) -> dict:
        return {"input_files": [fileio.absolute(f) for f in parts]}

    def describe(self, parts: list[str]) -> str:
        return ", ".join(parts)


def as_corpus(corpus):
    """A corpus (`FileCorpus`, `TfdsCorpus`) as it is, or `--input_file`'s patterns (a string or a list) as a
    `FileCorpus`."""
    if hasattr(corpus, "parts"):
        return corpus
    return FileCorpus(corpus if isinstance(corpus, str) else tuple(corpus))


def corpus_documents(corpus, parts) -> Iterator[list[str]]:
    """Every document of `corpus`, part after part."""
    for part in parts:
        yield from corpus.read(part)


def tail_joins(tail: int, size: int) -> bool:
    """Whether a last window of `tail` documents joins the window before it: when it holds fewer than half a
    window (and always below 2), so that no window draws its random next sentences from a handful of documents."""
    return 0 < tail < max(2, size // 2)


def windows(documents: Iterable[list], size: int) -> Iterator[list[list]]:
    """Groups documents into windows of `size`; a small last window joins the previous one (`tail_joins`), so
    every window draws its random next sentences from at least half a window of other documents."""
    if size < 2:
        raise ValueError(f"window size {size} must be at least 2 documents")
    pending: list[list] | None = None
    current: list[list] = []
    for document in documents:
        current.append(document)
        if len(current) == size:
            if pending is not None:
                yield pending
            pending, current = current, []
    if pending is not None and tail_joins(len(current), size):
        yield pending + current
        return
    if pending is not None:
        yield pending
    if current:
        if len(current) < 2:
            raise CorpusError("the corpus has a single document; next-sentence prediction needs at least two "
                              "(separate documents with a blank line)")
        yield current
