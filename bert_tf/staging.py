"""Files and directories written under a temporary name and put in place when complete, and the clean-up of what
killed writers left: no reader ever sees a half-written output.

Every file a bert-tf program writes goes through `staged_file` (for writers that take a file name) or
`atomic_write` (an open file; `write_text`, `write_json`, `copy_file` on top): the file is written at
`<path>.tmp-<pid>` through `tf.io.gfile` (any TensorFlow filesystem) and renamed to `<path>` when the block ends
without an error, replacing the earlier file only then; on an error the temporary file is removed and `<path>` is
left as it was.

A directory writer builds its directory at `<dir>.tmp-<pid>` and `replace_dir` puts it at `<dir>`. When `<dir>`
exists the two are exchanged in one `renameat2(RENAME_EXCHANGE)` call (Linux), so a reader of `<dir>` sees the old
version or the new one and never a missing or half-written directory; where the kernel or filesystem cannot
exchange, the old directory is renamed to `<dir>.old-<pid>`, the new one renamed in, and the old one renamed back if
that fails. A writer killed on the way leaves `<path>.tmp-<pid>` or `<dir>.old-<pid>` with the pid of a process
that no longer runs; `remove_stale` deletes those (restoring an `.old` one when `<dir>` itself is missing), and
leaves alone the ones whose process is still alive. TensorFlow's checkpoint writer stages each save in
`<prefix>-<N>_temp/`; `remove_stale_checkpoint_temps` deletes the ones a killed save left in a training directory.

Paths may be URLs of any TensorFlow filesystem (`bert_tf.fileio`). There a rename is what the filesystem makes of
it: on an object store (`gs://`) a copy and a delete, object by object, so a reader may see a directory half
replaced while it happens, but still never a half-written file under its final name. The pid in a staging name is
the writing process's on its machine: give an output one writer at a time, as for a local one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re

import tensorflow as tf

from bert_tf import fileio

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
# errno values meaning "this kernel / filesystem cannot exchange": fall back to two renames
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def staging_name(path: str, kind: str = "tmp") -> str:
    """`<path>.<kind>-<this process's pid>`, beside `path`."""
    return f"{path.rstrip('/')}.{kind}-{os.getpid()}"


_STAGING = re.compile(r"\.(tmp|old)-\d+$")


def is_staging_name(path: str) -> bool:
    """Whether `path` is a `staging_name` (a file or directory being written, or left by a killed writer); a name
    with a file name extension after it (`staged_file`'s `suffix`) is not taken for one."""
    return _STAGING.search(path) is not None


@contextlib.contextmanager
def staged_file(path, suffix: str = ""):
    """Yields the temporary name `<path>.tmp-<pid><suffix>` for the block to write; renames it to `path` when the
    block ends without an error and removes it when the block raises. `suffix` is for writers that want a file name
    extension (Keras's `model.save` wants `.keras`). Temporary files of killed writers of `path` are removed first."""
    path = os.fspath(path)
    remove_stale(path)
    tmp = staging_name(path) + suffix
    try:
        yield tmp
        tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        if fileio.exists(tmp):
            tf.io.gfile.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path, mode: str = "w"):
    """`path` opened for writing (`mode` "w" for text, UTF-8, or "wb") as described in the module docstring: the
    file appears at `path`, whole, when the block ends without an error."""
    with staged_file(path) as tmp, tf.io.gfile.GFile(tmp, mode) as f:
        f.write(b"" if "b" in mode else "")  # GFile creates the file at its first write: an empty one too
        yield f


def write_text(path, text: str) -> None:
    """`text` written to `path` atomically (UTF-8)."""
    with atomic_write(path) as f:
        f.write(text)


def json_text(data) -> str:
    """`data` as the JSON files bert-tf writes: keys sorted, indented by 2, a final newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_json(path, data) -> None:
    """`data` written to `path` atomically as `json_text`."""
    write_text(path, json_text(data))


@contextlib.contextmanager
def staged_directory(directory, last: tuple[str, ...] = ()):
    """Yields a temporary directory beside `directory` for the block to fill. When the block ends without an
    error, its files go to `directory`: the whole directory renamed into place when none is there, else file by
    file over what is there, the names in `last` after the others (so that a reader who trusts those files never
    finds them beside the old ones). The temporary directory is removed either way; so are those of killed
    writers of `directory`, first."""
    directory = fileio.absolute(directory).rstrip("/")
    if fileio.exists(directory) and not fileio.isdir(directory):
        raise FileExistsError(f"{directory}: exists and is not a directory")
    fileio.makedirs(fileio.dirname(directory))
    remove_stale(directory)
    tmp = staging_name(directory)
    fileio.rmtree(tmp)
    fileio.makedirs(tmp)
    try:
        yield tmp
        if not fileio.exists(directory):
            fileio.replace(tmp, directory)
        else:
            for filename in sorted(fileio.listdir(tmp), key=lambda f: f in last):
                fileio.replace(os.path.join(tmp, filename), os.path.join(directory, filename))
    finally:
        fileio.rmtree(tmp)


def copy_file(source, path) -> None:
    """A copy of `source` put at `path` atomically."""
    with staged_file(path) as tmp:
        tf.io.gfile.copy(os.fspath(source), tmp, overwrite=True)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exchange(a: str, b: str) -> None:
    """Swaps the paths `a` and `b` atomically; OSError (errno in _UNSUPPORTED) where that is not possible."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", a)
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), a)


def replace_dir(new: str, target: str) -> None:
    """Puts directory `new` at `target`, replacing any directory there as described in the module docstring. On
    return `new` no longer exists; if it raises, `target` is what it was before."""
    if not fileio.exists(target):
        fileio.replace(new, target)
        return
    try:
        if fileio.is_url(target):
            raise OSError(errno.ENOTSUP, "no exchange on this filesystem", target)
        _exchange(new, target)
    except OSError as e:
        if e.errno not in _UNSUPPORTED:
            raise
    else:
        fileio.rmtree(new)  # now the old version
        return
    old = staging_name(target, "old")
    fileio.replace(target, old)
    try:
        fileio.replace(new, target)
    except BaseException:
        fileio.replace(old, target)
        raise
    fileio.rmtree(old)


def remove_stale(path: str) -> list[str]:
    """Removes `<path>.tmp-<pid>[.ext]` and `<path>.old-<pid>` left by writers that are no longer running (an `.old`
    one is renamed back to `path` if `path` is missing, since it is then the last complete version); returns what
    it removed or restored."""
    path = os.fspath(path).rstrip("/")
    parent, base = fileio.dirname(fileio.absolute(path)), os.path.basename(path)
    if not fileio.isdir(parent):
        return []
    pattern = re.compile(re.escape(base) + r"\.(tmp|old)-(\d+)(\.\w+)?$")
    done = []
    for name in fileio.listdir(parent):
        match = pattern.match(name)
        if not match or pid_alive(int(match.group(2))):
            continue
        stale = os.path.join(parent, name)
        if match.group(1) == "old" and not fileio.exists(path):
            fileio.replace(stale, path)
        elif fileio.isdir(stale) and not os.path.islink(stale):
            fileio.rmtree(stale)
        else:
            with contextlib.suppress(FileNotFoundError, tf.errors.NotFoundError):
                fileio.remove(stale)
        done.append(stale)
    return done


def remove_stale_checkpoint_temps(directory: str, prefix: str) -> list[str]:
    """Removes `<prefix>-<N>_temp/` staging directories of checkpoint saves that never finished. Call it before
    the run's first save: a training directory has one writer, so any such directory then is a killed run's."""
    if not fileio.isdir(directory):
        return []
    pattern = re.compile(re.escape(prefix) + r"-\d+_temp$")
    removed = [os.path.join(directory, n) for n in fileio.listdir(directory) if pattern.match(n)
               and fileio.isdir(os.path.join(directory, n))]
    for path in removed:
        fileio.rmtree(path)
    return removed


def output_problem(path: str, directory: bool | None = None) -> str | None:
    """Why `path` cannot be written, or None when nothing on disk stands in the way: a regular file where one of its
    parent directories must go, a file where a directory is wanted (`directory=True`) or the reverse
    (`directory=False`, as is a name ending in '/'; None: either will do), or a directory this process may not
    write in. A URL (`gs://...`)
    is only checked to be reachable."""
    if directory is False and path.endswith("/"):
        return f"{path} ends in '/', the name of a directory; give a file name"
    if fileio.is_url(path):
        try:
            fileio.exists(path)
        except Exception as e:
            unreachable = fileio.url_failure(e)
            if unreachable is None:
                raise
            return unreachable
        return None
    path = os.path.abspath(path)
    if os.path.exists(path):
        if directory and not os.path.isdir(path):
            return f"{path} is a file, not a directory"
        if directory is False and os.path.isdir(path):
            return f"{path} is a directory, not a file"
        where = path if os.path.isdir(path) else os.path.dirname(path)
    else:
        where = os.path.dirname(path)
        while not os.path.exists(where):
            where = os.path.dirname(where)
        if not os.path.isdir(where):
            return f"{where} is a file, not a directory, so {path} cannot be created"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"no permission to write in {where}"
    return None


def first_missing(path: str) -> str | None:
    """The outermost of `path` and its parents that does not exist (what writing `path` would create), or None."""
    if "://" in path:
        return None
    path, missing = os.path.abspath(path), None
    while not os.path.lexists(path):
        path, missing = os.path.dirname(path), path
    return missing


def remove_if_empty(directory: str) -> bool:
    """Removes `directory` if it holds nothing but (empty) directories; returns whether it did. Never deletes a
    file: for undoing the directories a run created before it failed."""
    if fileio.is_url(directory) or not os.path.isdir(directory) or os.path.islink(directory):
        return False  # (an object store has no empty directories to undo)
    tree = list(os.walk(directory, topdown=False))
    if any(files or any(os.path.islink(os.path.join(top, d)) for d in dirs) for top, dirs, files in tree):
        return False
    try:
        for top, _, _ in tree:
            os.rmdir(top)
    except OSError:
        return False
    return True
