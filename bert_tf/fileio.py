"""Paths on any filesystem TensorFlow knows: a local path, or a URL such as `gs://bucket/dir`, `hdfs://...` or the
in-memory `ram://...`.

A path with a scheme (`<scheme>://`) goes through `tf.io.gfile`; a plain local path goes through Python's own `os`,
`glob`, `shutil` and `open`, which read local text faster line by line than `tf.io.gfile.GFile` and need no
TensorFlow (data_gen's worker processes never load it). Every function has the meaning of its Python namesake
for both kinds. `absolute` leaves a URL as it is (`os.path.abspath` would turn `gs://b/x` into `<cwd>/gs:/b/x`).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import glob as _glob
import os
import re
import shutil
import sys
import tempfile
import uuid

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")


def is_url(path) -> bool:
    """Whether `path` names a file through a filesystem scheme (`gs://`, `ram://`, `file://`, ...)."""
    return bool(_SCHEME.match(os.fspath(path)))


def url_failure(error: BaseException) -> str | None:
    """One line for TensorFlow's failure to reach a URL (no network, no credentials, no such bucket), naming the
    URL, with where `gs://` credentials come from; None for an error that TensorFlow neither raised nor caused.
    TensorFlow's own message spans lines and puts the URL last ("Error executing an HTTP request: ...\\n when
    reading gs://b/")."""
    tf = sys.modules.get("tensorflow")  # an error of TensorFlow's needs TensorFlow loaded
    while tf is not None and error is not None and not isinstance(error, tf.errors.OpError):
        error = error.__cause__ or error.__context__  # raised by a library that called TensorFlow (tfds)
    if tf is None or error is None:
        return None
    text = " ".join(line.strip() for line in (error.message or "").splitlines() if line.strip())
    url = _URL.search(text)
    if url is None:
        return None
    line = f"cannot reach {url.group(0)}: {text}"
    if url.group(0).startswith("gs://"):
        line += ("; TensorFlow reaches gs:// with the machine's Google credentials (`gcloud auth "
                 "application-default login`, or GOOGLE_APPLICATION_CREDENTIALS naming a key file): check them, "
                 "the network and the bucket's name")
    return line


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def absolute(path) -> str:
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(path)


def dirname(path) -> str:
    """The parent of `path`; a URL's root keeps its scheme (`ram://x` -> `ram://`, where `os.path` gives `ram:`)."""
    path = os.fspath(path)
    parent = os.path.dirname(path.rstrip("/") if is_url(path) else path)
    if is_url(path) and not is_url(parent):
        return _SCHEME.match(path).group(0)
    return parent


def open(path, mode: str = "r"):  # noqa: A001 (the namesake)
    """`path` opened in `mode` ("r", "rb", "w", "wb", "a", "ab"); text is UTF-8."""
    path = os.fspath(path)
    if is_url(path):
        if "r" in mode and not _gfile().exists(path):  # GFile would fail at the first read, with TF's own error
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return _gfile().GFile(path, mode)
    return builtins.open(path, mode) if "b" in mode else builtins.open(path, mode, encoding="utf-8")


def exists(path) -> bool:
    path = os.fspath(path)
    if not is_url(path):
        return os.path.exists(path)
    return _gfile().exists(path) and _listed(path)


def isdir(path) -> bool:
    path = os.fspath(path)
    if not is_url(path):
        return os.path.isdir(path)
    return _gfile().isdir(path) and _listed(path)


def _listed(path: str) -> bool:
    """TensorFlow's `ram://` filesystem (TF 2.21) says that any prefix of a file's name exists and is a directory
    (`ram://d/model.ckpt` beside `ram://d/model.ckpt.index`), and its listdir names the rest of such names
    (`.index`); there a glob of the parent, which is right, decides."""
    if not path.startswith("ram://"):
        return True
    parent, name = dirname(path), os.path.basename(path.rstrip("/"))
    return not name or parent == path or os.path.join(parent, name) in _gfile().glob(os.path.join(parent, "*"))


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
    if not is_url(path):
        return sorted(os.listdir(path))
    if path.startswith("ram://"):  # its listdir also names the tails of siblings' names (see `_listed`); glob not
        if not exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return sorted(os.path.basename(p.rstrip("/")) for p in _gfile().glob(os.path.join(path, "*")))
    return sorted(n.rstrip("/") for n in _gfile().listdir(path))


def walk(top):
    """(directory, subdirectories, files) for `top` and every directory under it, parents first."""
    top = os.fspath(top)
    if not is_url(top):
        yield from os.walk(top)
        return
    names = listdir(top)
    dirs = [n for n in names if isdir(os.path.join(top, n))]
    yield top, dirs, [n for n in names if n not in dirs]
    for name in dirs:
        yield from walk(os.path.join(top, name))


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
    if path.startswith("ram://"):  # its rmtree trips over the names its listdir makes up (see `_listed`)
        if exists(path):
            for top, _, files in reversed(list(walk(path))):
                for name in files:
                    _gfile().remove(os.path.join(top, name))
                _gfile().remove(top)  # an empty directory: ram:// deletes it like a file
    elif is_url(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def replace(source, target) -> None:
    """Renames `source` (a file or a directory) to `target`, replacing a file there. Atomic on a local
    filesystem; on an object store (`gs://`) a copy and a delete, object by object."""
    source, target = os.fspath(source), os.fspath(target)
    if not (is_url(source) or is_url(target)):
        os.replace(source, target)
    elif isdir(source):  # object by object, as an object store does it; ram:// would move the entry, not the files
        for top, _, files in list(walk(source)):
            moved = target + top[len(source):]
            _gfile().makedirs(moved)
            for name in files:
                _gfile().rename(os.path.join(top, name), os.path.join(moved, name), overwrite=True)
        rmtree(source)
    else:
        _gfile().rename(source, target, overwrite=True)


@contextlib.contextmanager
def temporary_directory(parent, prefix: str):
    """A new directory in `parent` for the block, removed with its contents when the block ends."""
    parent = os.fspath(parent)
    if not is_url(parent):
        with tempfile.TemporaryDirectory(dir=parent, prefix=prefix) as tmp:
            yield tmp
        return
    tmp = os.path.join(parent, f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    makedirs(tmp)
    try:
        yield tmp
    finally:
        rmtree(tmp)


def stat(path):
    """`os.stat_result`-like: `st_size` and `st_mtime_ns` (what identifies a file's version for a cache)."""
    path = os.fspath(path)
    if not is_url(path):
        return os.stat(path)
    info = _gfile().stat(path)
    return _Stat(info.length, info.mtime_nsec)


class _Stat:
    def __init__(self, size: int, mtime_ns: int):
        self.st_size, self.st_mtime_ns = size, mtime_ns


def copy(source, target) -> None:
    """A copy of file `source` at `target` (either may be a URL), replacing a file there."""
    source, target = os.fspath(source), os.fspath(target)
    if is_url(source) or is_url(target):
        _gfile().copy(source, target, overwrite=True)
    else:
        shutil.copyfile(source, target)


def load_checkpoint(path):
    """`tf.train.load_checkpoint` (a reader of the checkpoint at prefix `path`, or of the latest one in directory
    `path`), with `isdir` above deciding which `path` is."""
    import tensorflow as tf

    path = os.fspath(path)
    if isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        path = latest
    return tf.compat.v1.train.NewCheckpointReader(path)
