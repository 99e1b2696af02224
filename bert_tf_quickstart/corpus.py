"""The corpus stage: the built-in corpus (the docstrings of the Python standard library on this machine, read with
`ast`, nothing imported) or the user's `--input_file`, read by `data_gen.documents` like every other corpus, both
split into a training part and a held-out part, one sentence per line, a blank line between documents."""

from __future__ import annotations

import ast
import os
import re
import sysconfig

from bert_tf.training import write_lines
from data_gen.documents import read_documents

CORPUS_VERSION = "stdlib-docstrings-1"  # the built-in corpus's extraction; change it when that changes
HELDOUT_EVERY = 20
SKIP_DIRS = {"test", "tests", "site-packages", "dist-packages", "idlelib", "lib2to3", "tkinter", "turtledemo",
             "ensurepip", "__pycache__", "pydoc_data"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


def _sentences(docstring: str) -> list[str]:
    """Prose sentences of a docstring: paragraphs joined, code, doctest and table lines dropped."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", docstring):
        lines = [line.strip() for line in paragraph.splitlines()]
        if any(line.startswith((">>>", "...", "$", "|", "+-", "==")) for line in lines):
            continue
        text = " ".join(line for line in lines if line)
        for sentence in _SENTENCE_END.split(text):
            if len(sentence.split()) >= 4 and sum(c.isalpha() for c in sentence) > 0.6 * len(sentence):
                sentences.append(sentence)
    return sentences


def stdlib_documents(max_bytes: int):
    """Documentation entries (module, class, function docstrings) of the standard library, in a fixed order, as
    lists of sentences, up to `max_bytes` of text."""
    root = sysconfig.get_paths()["stdlib"]
    total = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    sentences = _sentences(ast.get_docstring(node) or "")
                    if len(sentences) >= 2:
                        yield sentences
                        total += sum(len(s) + 1 for s in sentences)
                        if total >= max_bytes:
                            return


def _write_text(path: str, documents) -> None:
    write_lines(path, (line for document in documents for line in [*document, ""]))


def build_corpus(directory: str, input_file: str | None, max_bytes: int) -> dict:
    """Writes `train.txt` and `heldout.txt` (every `HELDOUT_EVERY`-th document) under `directory` from
    `input_file`, or from up to `max_bytes` of the built-in corpus; returns the corpus's figures. Documents of one
    sentence are dropped (next-sentence prediction needs two)."""
    documents = list(read_documents([input_file])) if input_file else list(stdlib_documents(max_bytes))
    documents = [d for d in documents if len(d) >= 2]
    if len(documents) < 2 * HELDOUT_EVERY:
        where = input_file or "the built-in corpus"
        raise ValueError(f"{where}: {len(documents)} documents with two or more sentences; the quickstart needs at "
                         f"least {2 * HELDOUT_EVERY} (one sentence per line, a blank line between documents)")
    train = [d for i, d in enumerate(documents) if i % HELDOUT_EVERY]
    heldout = [d for i, d in enumerate(documents) if not i % HELDOUT_EVERY]
    _write_text(os.path.join(directory, "train.txt"), train)
    _write_text(os.path.join(directory, "heldout.txt"), heldout)
    size = sum(len(s) + 1 for d in documents for s in d)
    return {"source": input_file or "Python standard library docstrings", "documents": len(documents),
            "sentences": sum(len(d) for d in documents), "megabytes": round(size / 1e6, 2),
            "heldout_documents": len(heldout)}
