r"""The data_gen pipeline on Apache Beam, for corpora beyond one machine (optional extra: `pip install .[beam]`).

Same functions, same windows, same seeds as `data_gen.generate`, so the records are the same as the local run's
for the same flags (the assignment of records to shard files is Beam's). The corpus (`--input_file`'s files, or a
TFDS dataset's files: `tfds_corpus`) is read in parts, each part twice: once to count its documents, which gives
every document its global index, then to emit the documents keyed by window, which reproduces the local windows
exactly (window k = documents k*W..(k+1)*W-1 in reading order, a tail of less than half a window joining the
window before it). Corpus, vocabulary and output may be on any filesystem TensorFlow reads
(`bert_tf.fileio`: `gs://...` on Dataflow). When the shards are written, `metadata.json` is written beside them
with the same statistics as the local run's and the shards this run wrote, so that `run_pretraining` checks them
as it checks local records. Runners (flags after `--`; docs/data.md has each command):

  python -m data_gen.beam --input_file='corpus/*.txt' --output_prefix=out/train --vocab_file=vocab.txt \
      -- --runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers=8

and DataflowRunner, FlinkRunner, SparkRunner, or Beam's DaskRunner on a Dask cluster
(`--runner=apache_beam.runners.dask.dask_runner.DaskRunner --dask_client_address=HOST:PORT`).
An output prefix that already has shards, or a directory with another run's metadata.json, is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os

from bert_tf import fileio, staging
from bert_tf.records import METADATA_NAME
from data_gen import documents as documents_lib
from data_gen.documents import CorpusError, tail_joins
from data_gen.generate import Options, check_vocab, describe_run, make_window
from data_gen.tfds_corpus import corpus_from_flags


def window_key(index: int, total: int, size: int) -> int:
    """The window of the document with global `index`, matching `documents.windows` for `total` documents."""
    if total < 2:
        raise CorpusError("the corpus has a single document; next-sentence prediction needs at least two")
    key = index // size
    if total > size and tail_joins(total % size, size) and key == total // size:
        key -= 1
    return key


def build_pipeline(pipeline, input_files, output_prefix: str, vocab_file: str, options: Options = Options(),
                   num_output_shards: int = 0, gzip: bool = False):
    """Adds the generation to `pipeline`; returns the PCollection of serialized records (also written)."""
    import apache_beam as beam

    from apache_beam.io.filesystems import FileSystems

    options.check()
    earlier = [m.path for m in FileSystems.match([f"{output_prefix}-*-of-*"])[0].metadata_list]
    if earlier:
        raise ValueError(f"--output_prefix={output_prefix}: {len(earlier)} shard(s) of an earlier run are there "
                         f"({', '.join(sorted(earlier)[:3])}{', ...' if len(earlier) > 3 else ''}); delete them or "
                         "choose another prefix, so that a reader's glob matches this run's shards alone")
    metadata_path = os.path.join(fileio.dirname(fileio.absolute(output_prefix)), METADATA_NAME)
    if fileio.exists(metadata_path):
        raise ValueError(f"--output_prefix={output_prefix}: {metadata_path} of another run is there (it lists "
                         "the shards of its directory); delete it with its shards, or write to another directory")
    check_vocab(vocab_file, options.do_lower_case)
    corpus = documents_lib.as_corpus(input_files)
    parts = corpus.parts()
    indexed = pipeline | "Parts" >> beam.Create(list(enumerate(parts)))
    counts = indexed | "Count documents" >> beam.Map(lambda p: (p[0], sum(1 for _ in corpus.read(p[1]))))

    def emit(item, counts):
        part_index, part = item
        offset = sum(n for i, n in counts.items() if i < part_index)
        total = sum(counts.values())
        for local, document in enumerate(corpus.read(part)):
            index = offset + local
            yield window_key(index, total, options.window_size), (index, document)

    def make(item):
        key, members = item
        window = [document for _, document in sorted(members)]
        records, stats = make_window(key, window, vocab_file, options)
        return records.split(), stats

    made = (indexed
            | "Documents" >> beam.FlatMap(emit, counts=beam.pvalue.AsDict(counts))
            | "Windows" >> beam.GroupByKey()
            | "Instances" >> beam.Map(make))
    records = made | "Records" >> beam.FlatMap(lambda window: window[0])
    totals = (made | "Statistics" >> beam.Map(lambda window: window[1])
              | "Sum" >> beam.CombineGlobally(_sum_statistics))
    compression = beam.io.filesystem.CompressionTypes.GZIP if gzip else beam.io.filesystem.CompressionTypes.UNCOMPRESSED
    written = records | "Write" >> beam.io.WriteToTFRecord(output_prefix, num_shards=num_output_shards,
                                                           compression_type=compression)
    shards = written | "Count records" >> beam.Map(lambda path: (path, _count_records(path, gzip)))

    def write_metadata(_, totals, shards):
        shards = sorted(shards)
        if not totals.get("instances"):
            raise CorpusError(f"{corpus.describe(parts)}: no instances; the corpus needs at least two non-empty "
                              "documents separated by a blank line")
        metadata = describe_run(corpus.source(parts), [path for path, _ in shards], vocab_file, options, gzip, totals,
                             [count for _, count in shards])
        staging.write_json(metadata_path, dict(metadata, generator="bert_tf data_gen (Apache Beam)"))

    (pipeline | "Once" >> beam.Create([None])
     | "Metadata" >> beam.Map(write_metadata, totals=beam.pvalue.AsSingleton(totals),
                              shards=beam.pvalue.AsList(shards)))
    return records


def _sum_statistics(windows) -> dict:
    totals: dict = {}
    for stats in windows:
        for key, value in stats.items():
            totals[key] = totals.get(key, 0) + value
    return totals


def _count_records(path: str, gzip: bool) -> int:
    import tensorflow as tf

    from bert_tf.tf_data import without_autotuning

    return sum(1 for _ in without_autotuning(tf.data.TFRecordDataset(path, compression_type="GZIP" if gzip else "")))


def remove_leftovers(output_prefix: str) -> list[str]:
    """Removes the `beam-temp-<prefix name>-*` directories a finished run left beside its shards (Beam 2.77's
    DaskRunner initialises a write more than once, and finalizes one); returns them."""
    directory, name = fileio.dirname(fileio.absolute(output_prefix)), os.path.basename(output_prefix)
    left = fileio.glob(os.path.join(directory, f"beam-temp-{name}-*"))
    for path in left:
        fileio.rmtree(path)
    return left


def _bool(text: str) -> bool:
    """A boolean flag's value read by absl's own parser (create_pretraining_data's flags are absl's)."""
    from absl import flags

    try:
        return flags.BooleanParser().parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false") from None


def _unknown_to_beam(args: list[str]) -> tuple[list[str], str]:
    """(those of `args` (Beam's flags, before `--` or after it) that Beam's pipeline options do not know, with the
    runner's own registered: Beam would drop them with a warning, and the run would go on without them; why the
    runner's options could not be registered, or "")."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    quiet = logging.Filter()
    quiet.filter = lambda record: False  # Beam's own warnings about them: the refusal says it in one line
    beam_logger = logging.getLogger("apache_beam.options.pipeline_options")
    beam_logger.addFilter(quiet)
    problem = ""
    try:
        runner = PipelineOptions(args).view_as(StandardOptions).runner
        if isinstance(runner, str):  # a runner's options (the Dask runner's) exist once its module is imported
            known = {path.rsplit(".", 1)[-1].lower(): path for path in StandardOptions.ALL_KNOWN_RUNNERS}
            path = known.get(runner.lower(), known.get(runner.lower() + "runner", runner))
            if "." in path:
                try:
                    importlib.import_module(path.rsplit(".", 1)[0])
                except ImportError as e:  # not installed (Dataflow's needs apache-beam[gcp]): Beam says so when it
                    problem = f"--runner={runner}: {e}"  # runs, unless a flag of its is refused first
        options = PipelineOptions(args)
        unknown = set(options.get_all_options(retain_unknown_options=True)) - set(options.get_all_options())
    finally:
        beam_logger.removeFilter(quiet)
    return [arg for arg in args if arg.startswith("-") and arg.lstrip("-").split("=", 1)[0] in unknown], problem


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, `data_gen.beam: error: ...`, and exit status 1, as the other
    commands' (argparse prints its usage first and exits with 2)."""

    def error(self, message):
        raise SystemExit(f"{self.prog}: error: {message}")

    @property
    def option_names(self) -> set[str]:
        return {name for action in self._actions for name in action.option_strings}


def parse_args(argv=None):
    """(our flags, the generation `Options`, Beam's flags) from the command line: ours first, Beam's after `--`
    (before it, a flag that Beam's pipeline options know is passed on too); a flag that neither we, Beam nor its
    runner know is refused, before `--` or after it. Boolean flags take absl's spellings, as
    create_pretraining_data's: `--flag`, `--noflag`, `--flag=false`."""
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    ours, beam_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = _Parser(prog="data_gen.beam", description=__doc__.split("\n")[0], allow_abbrev=False)

    def boolean(name, default):
        parser.add_argument(f"--{name}", type=_bool, nargs="?", const=True, default=default)
        parser.add_argument(f"--no{name}", dest=name, action="store_false")

    parser.add_argument("--input_file")
    parser.add_argument("--tfds_name")
    parser.add_argument("--tfds_split")
    parser.add_argument("--tfds_text_key")
    parser.add_argument("--tfds_data_dir")
    boolean("tfds_keep_line_breaks", None)
    parser.add_argument("--output_prefix", required=True)
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--num_output_shards", type=int, default=0)
    boolean("gzip", False)
    boolean("global_shuffle", False)  # refused below when on, not passed on to Beam
    for field in dataclasses.fields(Options):  # the same generation flags as create_pretraining_data
        kind = type(field.default)
        if kind is bool:
            boolean(field.name, field.default)
        else:
            parser.add_argument(f"--{field.name}", type=kind, default=field.default)
    args, rest = parser.parse_known_args(ours)
    unknown, problem = _unknown_to_beam(rest + beam_args)
    ours_late = [arg for arg in unknown if arg in beam_args and arg.split("=", 1)[0] in parser.option_names]
    if ours_late:
        parser.error(f"{' '.join(ours_late)}: this command's flag(s), given after --, where Beam's go; put them "
                     "before --")
    if unknown:
        why = (f"; the runner's own flags are unknown while its module cannot be imported ({problem})" if problem
               else "")
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (neither this command's flags nor Beam's, nor "
                     f"its runner's{why})")
    if args.global_shuffle:
        parser.error("--global_shuffle is create_pretraining_data's (a second pass over the output on one "
                     "machine); a Beam run has no such pass, and the runner orders the records in its shards")
    options = Options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Options)})
    return args, options, rest + beam_args


def _import_beam():
    """apache_beam, imported without the warning it logs when Google's BigQuery client is not installed (this
    pipeline does not use BigQuery), and without that warning configuring the root logger as a side effect."""
    root, hush = logging.getLogger(), logging.NullHandler()
    root.addHandler(hush)  # a root logger with a handler is left as it is by `logging.warning`
    notice = "bigquery client libraries are not available"
    drop = logging.Filter()
    drop.filter = lambda record: notice not in record.getMessage()
    root.addFilter(drop)
    try:
        import apache_beam
    finally:
        root.removeFilter(drop)
        root.removeHandler(hush)
    return apache_beam


def main(argv=None):
    beam = _import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    args, options, beam_args = parse_args(argv)
    try:
        corpus = corpus_from_flags(args.input_file, args.tfds_name, args.tfds_split, args.tfds_text_key,
                                   args.tfds_data_dir, args.tfds_keep_line_breaks)
        pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
        build_pipeline(pipeline, corpus, args.output_prefix, args.vocab_file, options,
                       args.num_output_shards, args.gzip)
    except (CorpusError, ValueError) as e:  # found while building the pipeline, before any work
        raise SystemExit(f"data_gen.beam: error: {e}") from None
    except Exception as e:
        unreachable = fileio.url_failure(e)
        if unreachable is None:
            raise
        raise SystemExit(f"data_gen.beam: error: {unreachable}") from None
    result = pipeline.run()
    try:
        result.wait_until_finish()
    finally:
        client = getattr(result, "client", None)  # the DaskRunner's, which it leaves connected
        if client is not None:
            client.close()
    for path in remove_leftovers(args.output_prefix):
        logging.info("removed %s, a temporary directory the runner left", path)


if __name__ == "__main__":
    main()
