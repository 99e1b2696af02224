"""Paths on any filesystem TensorFlow knows: a local path, or a URL such as `gs://bucket/dir`, `hdfs://...`,
`s3://...` or the in-memory `ram://...`.

A path with a scheme (`<scheme>://`) goes through `tf.io.gfile`; a plain local path goes through Python's own `os`,
`glob`, `shutil` and `open`, which read local text faster line by line than `tf.io.gfile.GFile` and need no
TensorFlow (data_gen's worker processes never load it). Every function has the meaning of its Python namesake
for both kinds. `absolute` leaves a URL as it is (`os.path.abspath` would turn `gs://b/x` into `<cwd>/gs:/b/x`).
"""

from __future__ import annotations

import builtins
import glob as _glob
import os
import re
import shutil

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path) -> bool:
    """Whether `path` names a file through a filesystem scheme (`gs://`, `ram://`, `file://`, ...)."""
    return bool(_SCHEME.match(os.fspath(path)))


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def absolute(path) -> str:
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(path)


def open(path, mode: str = "r"):  # noqa: A001 (the namesake)
    """`path` opened in `mode` ("r", "rb", "w", "wb", "a", "ab"); text is UTF-8."""
    path = os.fspath(path)
    if is_url(path):
        return _gfile().GFile(path, mode)
    return builtins.open(path, mode) if "b" in mode else builtins.open(path, mode, encoding="utf-8")


def exists(path) -> bool:
    path = os.fspath(path)
    return _gfile().exists(path) if is_url(path) else os.path.exists(path)


def isdir(path) -> bool:
    path = os.fspath(path)
    return _gfile().isdir(path) if is_url(path) else os.path.isdir(path)


def isfile(path) -> bool:
    path = os.fspath(path)
    return exists(path) and not isdir(path) if is_url(path) else os.path.isfile(path)


def glob(pattern) -> list[str]:
    """The paths matching `pattern` (`*`, `?`, `[...]`), sorted."""
    pattern = os.fspath(pattern)
    return sorted(_gfile().glob(pattern) if is_url(pattern) else _glob.glob(pattern))


def listdir(path) -> list[str]:
    """The names in directory `path` (without a trailing '/'), sorted."""
    path = os.fspath(path)
    names = [n.rstrip("/") for n in _gfile().listdir(path)] if is_url(path) else os.listdir(path)
    return sorted(names)


def makedirs(path) -> None:
    """`path` and its parents, as directories; nothing if it is one already."""
    path = os.fspath(path)
    if is_url(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def remove(path) -> None:
    path = os.fspath(path)
    _gfile().remove(path) if is_url(path) else os.remove(path)


def rmtree(path) -> None:
    """Removes directory `path` and everything in it; nothing if it does not exist."""
    path = os.fspath(path)
    if is_url(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def replace(source, target) -> None:
    """Renames `source` (a file or a directory) to `target`, replacing a file there. Atomic on a local
    filesystem; on an object store (`gs://`) a copy and a delete, object by object."""
    source, target = os.fspath(source), os.fspath(target)
    if is_url(source) or is_url(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def getsize(path) -> int:
    path = os.fspath(path)
    return _gfile().stat(path).length if is_url(path) else os.path.getsize(path)


def copy(source, target) -> None:
    """A copy of file `source` at `target` (either may be a URL), replacing a file there."""
    source, target = os.fspath(source), os.fspath(target)
    if is_url(source) or is_url(target):
        _gfile().copy(source, target, overwrite=True)
    else:
        shutil.copyfile(source, target)
