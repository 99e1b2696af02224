"""A run's records shuffled across its windows, as the original shuffles all of its instances (`--global_shuffle`).

The windows are written first, each one's records shuffled among themselves, to shard k mod N for window k. This
two-pass external shuffle then turns the shards into a uniformly random permutation of all the records, cut into the
same N shards: every record goes to one of B buckets, drawn uniformly at random, then each bucket is read back,
permuted and written out, the buckets of shard s being s*K .. s*K + K - 1 (B = N * K). A uniform bucket followed by
a uniform order inside the bucket gives every order of the records the same probability. K is the least that keeps a
bucket near `budget_bytes`; memory holds one bucket and a view of each of its records (~200 bytes a record), and the
disk the uncompressed output about twice over at most (each bucket is deleted once written). A single file within
the budget is its own bucket. A gzip file's header names no file and no time, so its bytes depend only on the
records. Free of TensorFlow, deterministic in the seed, and the same for any number of workers, since the windows'
bytes are.
"""

from __future__ import annotations

import contextlib
import gzip as gzip_lib
import math
import os
import shutil

import numpy as np

BUDGET_BYTES = 256 << 20
OPEN_BUCKETS = 512  # well under the usual limit of 1,024 open files
_HEADER, _FOOTER = 12, 4  # a framed record: length (uint64) and its CRC, the data, the data's CRC


def _split(view: memoryview) -> tuple[list[memoryview], int]:
    """(the whole framed records at the start of `view`, the bytes they take)."""
    records, used = [], 0
    while used + _HEADER <= len(view):
        end = used + _HEADER + int.from_bytes(view[used:used + 8], "little") + _FOOTER
        if end > len(view):
            break
        records.append(view[used:end])
        used = end
    return records, used


def framed_records(data) -> list[memoryview]:
    """TFRecord file bytes -> each record with its framing, as views into `data`; a file cut short is an error."""
    view = memoryview(data)
    records, used = _split(view)
    if used != len(view):
        raise ValueError(f"a TFRecord file ends inside the record that starts at byte {used}")
    return records


def framed_chunks(path: str, size: int = 64 << 20):
    """The framed records of the uncompressed TFRecord file at `path`, a list at a time, read about `size` bytes at a
    time (whole records each time)."""
    with open(path, "rb") as f:
        rest = b""
        while block := f.read(size):
            view = memoryview(rest + block)
            records, used = _split(view)
            rest = bytes(view[used:])
            yield records
        if rest:
            raise ValueError(f"{path}: the file ends inside a record")


def _spread(paths: list[str], bucket_paths: list[str], seed: int, read_bytes: int) -> None:
    """Every record of the files `paths` appended to a bucket drawn uniformly at random; the files deleted once
    spread. At most `OPEN_BUCKETS` bucket files are open at once: with more buckets the files are read once per
    group of them (each file's draws are the same in every pass)."""
    for first in range(0, len(bucket_paths), OPEN_BUCKETS):
        group = range(first, min(first + OPEN_BUCKETS, len(bucket_paths)))
        outs = {bucket: open(bucket_paths[bucket], "wb") for bucket in group}
        try:
            for index, path in enumerate(paths):
                rng = np.random.default_rng([seed, 1, index])
                for records in framed_chunks(path, read_bytes):
                    for record, bucket in zip(records, rng.integers(0, len(bucket_paths), len(records)).tolist()):
                        if bucket in outs:
                            outs[bucket].write(record)
        finally:
            for out in outs.values():
                out.close()
    for path in paths:
        os.remove(path)


def _gzip(raw):
    """A gzip stream onto the open file `raw` whose header names no file and no time (TF's default level, 6)."""
    return gzip_lib.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0)


def shuffle_files(paths: list[str], work_dir: str, seed: int, gzip: bool = False,
                  budget_bytes: int | None = None) -> list[int]:
    """Shuffles the records of the uncompressed TFRecord files `paths` across all of them, in place (each file
    replaced, gzip-compressed with `gzip`); returns each file's record count. `work_dir` (created, then removed)
    holds the buckets; `budget_bytes` (default `BUDGET_BYTES`) bounds a bucket."""
    budget_bytes = budget_bytes or BUDGET_BYTES
    shards = len(paths)
    total = sum(os.path.getsize(p) for p in paths)
    per_shard = max(1, math.ceil(total / shards / budget_bytes))
    buckets = shards * per_shard
    os.makedirs(work_dir, exist_ok=True)
    try:
        bucket_paths = [os.path.join(work_dir, f"bucket-{b:06d}") for b in range(buckets)]
        if buckets == 1:  # one file within the budget: its own bucket
            os.replace(paths[0], bucket_paths[0])
        else:
            _spread(paths, bucket_paths, seed, min(budget_bytes, 64 << 20))
        counts = []
        for shard, path in enumerate(paths):
            count = 0
            with open(path, "wb") as raw, (_gzip(raw) if gzip else contextlib.nullcontext(raw)) as out:
                for bucket in range(shard * per_shard, (shard + 1) * per_shard):
                    with open(bucket_paths[bucket], "rb") as f:
                        records = framed_records(f.read())
                    order = np.random.default_rng([seed, 2, bucket]).permutation(len(records)).tolist()
                    for start in range(0, len(order), 8192):  # in slices: no second copy of the bucket
                        out.write(b"".join(records[i] for i in order[start:start + 8192]))
                    count += len(records)
                    del records
                    os.remove(bucket_paths[bucket])
            counts.append(count)
        return counts
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
