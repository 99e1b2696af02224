r"""The data_gen pipeline on Apache Beam, for corpora beyond one machine (optional extra: `pip install .[beam]`).

Same functions, same windows, same seeds as `data_gen.generate`, so the records are the same as the local run's
for the same flags (the assignment of records to shard files is Beam's). Each file is read twice: once to count
its documents, which gives every document its global index, then to emit the documents keyed by window, which
reproduces the local windows exactly (window k = documents k*W..(k+1)*W-1 in reading order, a 1-document tail
joining the window before it). Runs on the DirectRunner locally and on any Beam runner (Dataflow, Flink, Spark):

  python -m data_gen.beam --input_file='gs://bucket/corpus/*.txt' --output_prefix=gs://bucket/records/train \
      --vocab_file=vocab.txt --num_output_shards=256 -- --runner=DataflowRunner --project=... --region=...

(The corpus paths must be readable by the workers; `read_documents` reads them with Python's `open`, so for
object stores mount them or extend it with `apache_beam.io.filesystems`.) It writes no metadata.json, so nothing
could tell a reader which shards are this run's: an output prefix that already has shards is refused.
"""

from __future__ import annotations

import dataclasses
import json

from data_gen import documents as documents_lib
from data_gen.documents import CorpusError
from data_gen.generate import Options, make_window


def window_key(index: int, total: int, size: int) -> int:
    """The window of the document with global `index`, matching `documents.windows` for `total` documents."""
    if total < 2:
        raise CorpusError("the corpus has a single document; next-sentence prediction needs at least two")
    key = index // size
    if total > size and total % size == 1 and key == total // size:
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
    files = documents_lib.expand_input_files(input_files)
    indexed = pipeline | "Files" >> beam.Create(list(enumerate(files)))
    counts = indexed | "Count" >> beam.Map(lambda f: (f[0], sum(1 for _ in documents_lib.read_documents([f[1]]))))

    def emit(item, counts):
        file_index, path = item
        offset = sum(n for i, n in counts.items() if i < file_index)
        total = sum(counts.values())
        for local, document in enumerate(documents_lib.read_documents([path])):
            index = offset + local
            yield window_key(index, total, options.window_size), (index, document)

    def make(item):
        key, members = item
        window = [document for _, document in sorted(members)]
        records, _ = make_window(key, window, vocab_file, options)
        return records.split()

    records = (indexed
               | "Documents" >> beam.FlatMap(emit, counts=beam.pvalue.AsDict(counts))
               | "Windows" >> beam.GroupByKey()
               | "Instances" >> beam.FlatMap(make))
    compression = beam.io.filesystem.CompressionTypes.GZIP if gzip else beam.io.filesystem.CompressionTypes.UNCOMPRESSED
    records | "Write" >> beam.io.WriteToTFRecord(output_prefix, num_shards=num_output_shards,
                                                 compression_type=compression)
    return records


def main(argv=None):
    import argparse

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input_file", required=True)
    parser.add_argument("--output_prefix", required=True)
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--num_output_shards", type=int, default=0)
    parser.add_argument("--gzip", action="store_true")
    for field in dataclasses.fields(Options):  # the same generation flags as create_pretraining_data
        kind = type(field.default)
        parser.add_argument(f"--{field.name}", type=json.loads if kind is bool else kind, default=field.default)
    args, beam_args = parser.parse_known_args(argv)
    options = Options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Options)})
    try:
        with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
            build_pipeline(pipeline, args.input_file, args.output_prefix, args.vocab_file, options,
                           args.num_output_shards, args.gzip)
    except (CorpusError, ValueError) as e:  # found while building the pipeline, before any work
        raise SystemExit(f"data_gen.beam: error: {e}") from None


if __name__ == "__main__":
    main()
