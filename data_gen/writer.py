"""Sharded TFRecord files written atomically, and the metadata file beside them (`bert_tf.records`: the schema and
the metadata's name and contents, one definition for the writer and the reader)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from absl import logging

from bert_tf import fileio, staging
from bert_tf.records import METADATA_NAME, listed_shards
from data_gen.appender import WindowAppender
from data_gen.shuffle import shuffle_files

_GENERATED = re.compile(r"pretraining-\d{5}-of-\d{5}\.tfrecord")  # `generate.output_paths`' names of a directory


class ShardWriter:
    """One run's record set in one directory: shard files under temporary names, which windows are appended to by
    its `appender` (from the worker that built each window, `appender.WindowAppender`); `commit()` puts the set and
    its `metadata.json` in place and removes the shards of the run that wrote the directory before, `abort()`
    removes the temporary files and leaves the earlier set as it was.

    A run that dies leaves only `<shard>.tmp-<pid>` files (`staging.staging_name`) and, during a global shuffle,
    a `data_gen-buckets.tmp-<pid>` directory, never a shard that looks complete; the next run into the directory
    removes them. The directory's `metadata.json` lists exactly its
    shards, so that a reader can refuse any other file matched beside them (`bert_tf.pretraining.expand_files`).
    Call `abort()` only once no process appends any more (`generate` fails the appender and shuts its workers down
    first).

    An output directory on another filesystem (`gs://...`, `bert_tf.fileio`) cannot be appended to by the workers:
    its shards are built in a local temporary directory and copied there by `commit()`, each under a staging name
    then renamed, before the metadata; local disk must hold one run's output (twice its uncompressed size with a
    global shuffle).
    """

    def __init__(self, paths: list[str], gzip: bool = False, global_shuffle: bool = False):
        self.paths = [fileio.absolute(p) for p in paths]
        directories = sorted({fileio.dirname(p) for p in self.paths})
        if len(directories) > 1:
            raise ValueError(f"--output_file: the shards must be in one directory, beside the metadata.json that "
                             f"lists them; got {len(directories)}: {', '.join(directories)}")
        if len({os.path.basename(p) for p in self.paths}) < len(self.paths) or METADATA_NAME in map(
                os.path.basename, self.paths):
            raise ValueError(f"--output_file: each shard needs its own name, other than {METADATA_NAME}")
        self.directory = directories[0]
        self.metadata_path = os.path.join(self.directory, METADATA_NAME)
        self._check_replaces_only_its_own_set()
        fileio.makedirs(self.directory)
        self._local = tempfile.mkdtemp(prefix="bert_tf_shards-") if fileio.is_url(self.directory) else None
        self._tmp = [os.path.join(self._local, os.path.basename(path)) if self._local else staging.staging_name(path)
                     for path in self.paths]
        self._buckets = os.path.join(self.directory, "data_gen-buckets")  # a global shuffle's, while it runs
        for path in self.paths + ([] if self._local else [self._buckets]):
            staging.remove_stale(path)  # a killed run's
        for tmp in self._tmp:
            open(tmp, "wb").close()  # empty: the workers append to it
        self.gzip, self.global_shuffle = gzip, global_shuffle
        self.appender = WindowAppender(self._tmp, gzip=gzip and not global_shuffle)  # the shuffle compresses
        self.counts = [0] * len(self.paths)

    def shuffle(self, seed: int) -> None:
        """With `global_shuffle`, once every window is in: the records shuffled across the windows and shards
        (`shuffle.shuffle_files`, its buckets in a staging directory that a later run removes if this one is
        killed), the counts theirs."""
        work = os.path.join(self._local, "buckets") if self._local else staging.staging_name(self._buckets)
        self.counts = shuffle_files(self._tmp, work, seed, gzip=self.gzip)

    def count(self, window_index: int, instances: int) -> None:
        """Window `window_index` was appended with `instances` records."""
        self.counts[window_index % len(self.paths)] += instances

    def commit(self, metadata: dict) -> None:
        """The complete set in place: the metadata written aside first (a full disk fails here, before anything
        is replaced), the shards renamed, the metadata renamed over the earlier run's, then the earlier run's
        shards that this set does not reuse removed."""
        earlier = self._earlier_shards()
        with staging.atomic_write(self.metadata_path) as f:
            f.write(staging.json_text(metadata))
            f.flush()  # written out: a full disk fails here
            for tmp, path in zip(self._tmp, self.paths):
                if self._local:
                    staging.copy_file(tmp, path)
                else:
                    os.replace(tmp, path)
        if self._local:
            shutil.rmtree(self._local, ignore_errors=True)
        stale = sorted(earlier - {os.path.basename(p) for p in self.paths})
        for name in stale:
            path = os.path.join(self.directory, name)
            if fileio.isfile(path):
                fileio.remove(path)
        if stale:
            logging.info("removed the %d shard(s) of the earlier run in %s that this run does not replace: %s",
                         len(stale), self.directory, ", ".join(stale))

    def abort(self) -> None:
        if self._local:
            shutil.rmtree(self._local, ignore_errors=True)
            return
        for tmp in self._tmp:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _check_replaces_only_its_own_set(self) -> None:
        """A ValueError, before any work, where the commit would remove shards of the directory's earlier set that
        this run does not write, unless both are sets of `--num_output_shards` shards (`pretraining-*-of-*`, a set
        made again with another count): a run writing eval.tfrecord beside an earlier run's train.tfrecord, as
        the original's users do, would otherwise delete it."""
        names = {os.path.basename(p) for p in self.paths}
        removed = sorted(self._earlier_shards() - names)
        if removed and not all(_GENERATED.fullmatch(name) for name in removed + sorted(names)):
            shown = ", ".join(removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
            raise ValueError(f"--output_file: {self.directory} holds another record set ({shown}, listed in its "
                             f"{METADATA_NAME}), which this run would replace: a directory holds one set, which "
                             "training checks by that file; write to another directory, or remove that set first")

    def _earlier_shards(self) -> set[str]:
        """The shard names the directory's metadata.json lists (none without one); a metadata.json that cannot be
        read is replaced, with a warning: the shards it listed stay, and a reader refuses them by name."""
        if not fileio.exists(self.metadata_path):
            return set()
        try:
            return listed_shards(self.metadata_path) or set()
        except ValueError as e:
            logging.warning("%s; it is replaced, and any shard of the earlier run stays beside the new ones", e)
            return set()
