"""A TFDS text dataset (wikipedia, c4, ...) as a pretraining corpus: each example's text feature is one document,
split into one sentence per line (`data_gen.sentences`), or at its own line breaks with `keep_line_breaks`.

The dataset must be prepared already (`tfds build NAME --data_dir=DIR`, or `tfds.load(NAME, data_dir=DIR)` once);
nothing is downloaded here. The documents are read straight from the prepared split's files, file after file in the
split's order and each file's examples in their order, so the corpus is the same on every run, in the local
generator and in every Beam worker (each reads the files it is given: `parts`). Any split expression TFDS reads
(`train`, `train[:10%]`, `train+validation`) works. Empty articles are skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Iterator

from bert_tf import fileio
from data_gen.documents import CorpusError
from data_gen.sentences import split_sentences


@dataclasses.dataclass(frozen=True)
class TfdsCorpus:
    """`name` as TFDS names it (`wikipedia/20230601.en`, with an optional `:version`), `split`, the text feature
    `text_key`, the prepared datasets' `data_dir` (TFDS's default when None)."""

    name: str
    split: str = "train"
    text_key: str = "text"
    data_dir: str | None = None
    keep_line_breaks: bool = False

    def parts(self) -> list[tuple[str, int, int]]:
        """(file, examples to skip, examples to take) for each file of the split, in order; checks the dataset."""
        info = self._info()
        try:
            instructions = info.splits[self.split].file_instructions
        except (KeyError, ValueError, AssertionError) as e:
            raise CorpusError(f"--tfds_split={self.split}: {self.name} has no such split ({_first_line(e)}); "
                              f"its splits: {', '.join(info.splits.keys())}") from None
        return [(os.fspath(i.filename), i.skip, i.take) for i in instructions]

    def read(self, part) -> Iterator[list[str]]:
        """The documents of one part (from `parts`), as lists of sentence lines."""
        import tensorflow as tf

        from bert_tf.tf_data import without_autotuning

        filename, skip, take = part
        features = self._info().features
        texts = tf.data.TFRecordDataset(filename).skip(skip).take(take).map(
            lambda serialized: features.deserialize_example(serialized)[self.text_key])
        batches = without_autotuning(texts.batch(256).prefetch(1))
        for batch in batches.as_numpy_iterator():  # decoded in the graph, not op by op
            for raw in batch:
                text = raw.decode("utf-8", "replace")
                lines = ([line.strip() for line in text.splitlines() if line.strip()] if self.keep_line_breaks
                         else split_sentences(text))
                if lines:
                    yield lines

    def source(self, parts=None) -> dict:
        """What metadata.json records of the corpus."""
        info = self._info()
        return {"tfds": {"name": self.name, "version": str(info.version), "split": self.split,
                         "text_key": self.text_key, "keep_line_breaks": self.keep_line_breaks,
                         "data_dir": fileio.absolute(info.data_dir)}}

    def describe(self, parts=None) -> str:
        return f"--tfds_name={self.name} --tfds_split={self.split}"

    def _info(self):
        return _checked_info(self.name, self.data_dir, self.text_key)


@functools.lru_cache(maxsize=8)
def _checked_info(name: str, data_dir: str | None, text_key: str):
    """The prepared dataset's `DatasetInfo`, or one CorpusError line saying what is wrong with the flags."""
    import tensorflow_datasets as tfds
    from absl import logging

    level = logging.get_verbosity()
    logging.set_verbosity(logging.WARNING if level == logging.INFO else level)  # not TFDS's "Load dataset info"
    try:
        info = tfds.builder(name, data_dir=data_dir).info
    except Exception as e:  # tfds raises assorted types for a name it cannot find
        unreachable = fileio.url_failure(e)
        if unreachable:
            raise CorpusError(f"--tfds_data_dir={data_dir}: {unreachable}") from None
        raise CorpusError(f"--tfds_name={name}: no such dataset in {data_dir or 'the default --tfds_data_dir'} "
                          f"({_first_line(e)}); prepare it with `tfds build {name.split(':')[0]} --data_dir=DIR` and "
                          "pass --tfds_data_dir=DIR") from None
    finally:
        logging.set_verbosity(level)
    if not info.splits:
        raise CorpusError(f"--tfds_name={name}: not prepared in {info.data_dir}; prepare it with `tfds build "
                          f"{name.split(':')[0]}` first (this program downloads nothing)")
    if str(info.file_format).split(".")[-1].lower() != "tfrecord":
        raise CorpusError(f"--tfds_name={name}: prepared as {info.file_format}; only tfrecord files are read "
                          "(`tfds build --file_format=tfrecord`)")
    feature = info.features[text_key] if text_key in info.features.keys() else None
    if type(feature).__name__ != "Text":
        texts = sorted(key for key, value in info.features.items() if type(value).__name__ == "Text")
        what = (f"not a feature of {name}" if feature is None
                else f"a {type(feature).__name__} feature of {name}, not text")
        raise CorpusError(f"--tfds_text_key={text_key}: {what}; its text features: {', '.join(texts) or 'none'}")
    return info


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]



def corpus_from_flags(input_file=None, tfds_name=None, tfds_split=None, tfds_text_key=None, tfds_data_dir=None,
                      tfds_keep_line_breaks=None):
    """The corpus the command line names: `--input_file`'s patterns, or a `TfdsCorpus` (checked now, before any
    work); exactly one of the two. The tfds_* values are None where not given."""
    given = {flag: value for flag, value in (("tfds_split", tfds_split), ("tfds_text_key", tfds_text_key),
                                              ("tfds_data_dir", tfds_data_dir),
                                              ("tfds_keep_line_breaks", tfds_keep_line_breaks)) if value is not None}
    if input_file and tfds_name:
        raise CorpusError(f"--input_file={input_file} and --tfds_name={tfds_name}: give one corpus, text files or a "
                          "TFDS dataset")
    if not tfds_name:
        if given:
            raise CorpusError(f"--{', --'.join(given)} without --tfds_name: name the TFDS dataset, or drop the flag")
        if not input_file:
            raise CorpusError("no corpus: give --input_file (text files, one sentence per line) or --tfds_name (a "
                              "prepared TFDS dataset)")
        return input_file
    corpus = TfdsCorpus(tfds_name, split=tfds_split or "train", text_key=tfds_text_key or "text",
                        data_dir=tfds_data_dir, keep_line_breaks=bool(tfds_keep_line_breaks))
    corpus.parts()
    return corpus
