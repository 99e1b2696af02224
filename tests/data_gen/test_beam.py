"""data_gen on Apache Beam: the local run's records and metadata from the in-process DirectRunner, from runners with
worker processes (DirectRunner multi_processing, DaskRunner on a Dask cluster), and the documented runner flags."""

import json
import os
import re

import pytest

from tests.data_gen.test_data_gen import _descendants, vocab_file  # noqa: F401  (the module fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def local_run(vocab_file, tmp_path_factory):  # noqa: F811
    """Two corpus files (windows span the file boundary) and the local run's records and metadata."""
    from bench.common import docstring_lines
    from data_gen.generate import Options, generate

    root = tmp_path_factory.mktemp("beam")
    lines = docstring_lines()[:400]
    for part, chunk in enumerate((lines[:230], lines[230:])):
        text = "\n".join(line + ("\n" if i % 5 == 4 else "") for i, line in enumerate(chunk))
        (root / f"part{part}.txt").write_text(text, encoding="utf-8")
    options = Options(dupe_factor=2, window_size=6, max_seq_length=48, max_predictions_per_seq=8)
    generate(str(root / "part*.txt"), [str(root / "local" / "a.tfrecord"), str(root / "local" / "b.tfrecord")],
             vocab_file, options, progress=False)
    return root, options


def _records(files):
    import tensorflow as tf

    return sorted(r.numpy() for r in tf.data.TFRecordDataset(sorted(map(str, files))))


def _same_as_local(root, directory):
    """The run in `directory` wrote the local run's records, and metadata equal to the local run's but for the
    generator's name and the shards, which it lists with their true record counts."""
    import tensorflow as tf

    local = _records((root / "local").glob("*.tfrecord"))
    shards = sorted(p for p in directory.iterdir() if p.name != "metadata.json")
    assert len(local) > 100 and _records(shards) == local
    ours, theirs = (json.loads((d / "metadata.json").read_text()) for d in (directory, root / "local"))
    assert ours.pop("generator") == "bert_tf data_gen (Apache Beam)" and theirs.pop("generator") == "bert_tf data_gen"
    assert ours.pop("shards") == [{"path": p.name, "instances": sum(1 for _ in tf.data.TFRecordDataset(str(p)))}
                                  for p in shards]
    theirs.pop("shards")
    assert ours == theirs


def test_beam_pipeline_writes_the_local_runs_records_and_metadata(local_run, vocab_file, tmp_path):  # noqa: F811
    import apache_beam as beam

    from data_gen.beam import build_pipeline, window_key
    from data_gen.documents import windows

    root, options = local_run
    pattern, prefix = str(root / "part*.txt"), str(tmp_path / "beam" / "records")
    with beam.Pipeline() as pipeline:
        build_pipeline(pipeline, pattern, prefix, vocab_file, options, num_output_shards=3)
    _same_as_local(root, tmp_path / "beam")
    with pytest.raises(ValueError, match=r"--output_prefix=.*records: 3 shard\(s\) of an earlier run are there .*"
                                         r"records-00000-of-00003.*; delete them or choose another prefix"):
        build_pipeline(beam.Pipeline(), pattern, prefix, vocab_file, options)
    with pytest.raises(ValueError, match=r"metadata.json of another run is there"):
        build_pipeline(beam.Pipeline(), pattern, prefix + "_again", vocab_file, options)
    for total in (2, 7, 12, 13, 14, 15, 25):  # the key function reproduces the streaming windows, tail merges too
        expected = [w for w in windows(iter(range(total)), 6)]
        keys = [window_key(i, total, 6) for i in range(total)]
        assert [[i for i in range(total) if keys[i] == k] for k in sorted(set(keys))] == expected


@pytest.mark.parametrize("runner", ["direct_multi_processing", "dask"])
def test_runners_with_worker_processes_write_the_local_runs_records(local_run, vocab_file, tmp_path,  # noqa: F811
                                                                    runner):
    """`python -m data_gen.beam`'s main on a runner whose workers are other processes: 2 DirectRunner workers, or
    Beam's DaskRunner on a Dask cluster of 2 worker processes. Nothing of the run or the cluster is left behind."""
    from data_gen.beam import main

    root, options = local_run
    flags = [f"--input_file={root / 'part*.txt'}", f"--output_prefix={tmp_path / 'out' / 'records'}",
             f"--vocab_file={vocab_file}", "--num_output_shards=2", "--dupe_factor=2", "--window_size=6",
             "--max_seq_length=48", "--max_predictions_per_seq=8", "--"]
    before = set(_descendants(os.getpid()))
    if runner == "dask":
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            assert len(cluster.scheduler_info["workers"]) == 2 and len(set(_descendants(os.getpid())) - before) >= 2
            main(flags + ["--runner=apache_beam.runners.dask.dask_runner.DaskRunner",
                          f"--dask_client_address={cluster.scheduler_address}"])
    else:
        main(flags + ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    _same_as_local(root, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "metadata.json", "records-00000-of-00002", "records-00001-of-00002"]  # no beam-temp-* left
    left = {pid: cmd for pid, (_, cmd) in _descendants(os.getpid()).items() if pid not in before
            and "multiprocessing.resource_tracker" not in cmd}  # Python's own, one per process, ends with it
    assert not left, left


def _documented_flags():
    text = open(os.path.join(ROOT, "docs", "data.md"), encoding="utf-8").read()
    return {name: " ".join(block.split()) for name, block in re.findall(r"```beam-(\w+)\n(.+?)```", text, re.S)}


@pytest.mark.parametrize("flag", ["--global_shuffle", "--global_shuffle=true"])
def test_global_shuffle_is_refused_on_beam_not_passed_to_it(flag, capsys):
    from data_gen.beam import parse_args

    base = ["--input_file=c.txt", "--output_prefix=out/train", "--vocab_file=v.txt"]
    with pytest.raises(SystemExit, match="^data_gen.beam: error: --global_shuffle is create_pretraining_data's"):
        parse_args([*base, flag])  # one line, exit status 1, as the other commands
    for off in ("--global_shuffle=false", "--noglobal_shuffle"):
        assert parse_args([*base, off])[2] == [], off  # off: nothing reaches Beam


DASK = "apache_beam.runners.dask.dask_runner.DaskRunner"  # as docs/data.md names it: Beam knows no short name


def test_flags_take_absls_spellings_and_a_flag_nobody_knows_is_refused(capsys):
    """The generation flags as create_pretraining_data (absl) spells them, `--noflag` included, which argparse would
    have handed to Beam to drop with a warning (the run then made next-sentence records for
    `--norandom_next_sentence`); a misspelt flag is refused, where Beam would drop it; Beam's own flags pass on,
    before or after `--`."""
    from data_gen.beam import parse_args

    base = ["--input_file=c.txt", "--output_prefix=out/train", "--vocab_file=v.txt"]
    for flags, expected in ((["--norandom_next_sentence", "--nodo_lower_case"], (False, False, False)),
                            (["--random_next_sentence=false", "--do_whole_word_mask"], (False, True, True)),
                            (["--do_whole_word_mask=True", "--do_lower_case", "1"], (True, True, True)),
                            ([], (True, True, False))):
        args, options, beam_args = parse_args([*base, *flags])
        assert (options.random_next_sentence, options.do_lower_case, options.do_whole_word_mask) == expected, flags
        assert beam_args == [], flags
    args, options, beam_args = parse_args([*base, "--nogzip", "--runner=DirectRunner", "--", "--direct_num_workers=2"])
    assert not args.gzip and beam_args == ["--runner=DirectRunner", "--direct_num_workers=2"]
    args, options, beam_args = parse_args([*base, "--runner", "DirectRunner", "--max_seq_length", "64"])
    assert options.max_seq_length == 64 and beam_args == ["--runner", "DirectRunner"]
    for bad, message in ((["--dupe_factr=3"], "unrecognized arguments: --dupe_factr=3 \\(neither this command's"),
                         (["--do_lower_case=maybe"], "'maybe' is not true or false"),
                         # after `--` too, where Beam would drop it: the runner's own flags are known
                         (["--", "--runner=DirectRunner", "--direct_num_workerz=2"],
                          "unrecognized arguments: --direct_num_workerz=2 "),
                         (["--", f"--runner={DASK}", "--dask_adress=x:8786"], "arguments: --dask_adress=x:8786 "),
                         (["--", "--max_seq_length=64"], "--max_seq_length=64: this command's flag.*before --"),
                         (["--", "--runner=no_such.module.Runner", "--its_flag=1"],
                          "--its_flag=1 .*while its module cannot be imported .*No module named 'no_such'")):
        with pytest.raises(SystemExit, match=f"^data_gen.beam: error: .*{message}"):
            parse_args([*base, *bad])
    assert parse_args([*base, "--", f"--runner={DASK}", "--dask_client_address=x:8786"])[2] == [
        f"--runner={DASK}", "--dask_client_address=x:8786"]
    assert not capsys.readouterr().err  # Beam's own warnings about the flags it would drop are not shown


def test_the_documented_runner_flags_parse_as_beam_reads_them():
    """Each runner's flags in docs/data.md, after data_gen.beam's own, reach Beam's options as written."""
    from apache_beam.options.pipeline_options import (DirectOptions, GoogleCloudOptions, PipelineOptions,
                                                      SetupOptions, StandardOptions, WorkerOptions)
    from apache_beam.runners.dask.dask_runner import DaskOptions

    documented = _documented_flags()
    assert set(documented) == {"local", "dataflow", "flink", "spark", "dask"}
    from data_gen.beam import parse_args

    parsed = {}
    for name, line in documented.items():
        args, options, beam_args = parse_args(["--input_file=gs://b/corpus/*.txt", "--output_prefix=gs://b/out/train",
                                               "--vocab_file=gs://b/vocab.txt", "--max_seq_length=512", "--",
                                               *line.split()])
        assert (args.output_prefix, options.max_seq_length) == ("gs://b/out/train", 512)
        parsed[name] = PipelineOptions(beam_args)
        every = parsed[name].get_all_options(retain_unknown_options=True)
        assert set(every) == set(parsed[name].get_all_options()), (name, "flags Beam does not know")
    assert parsed["local"].view_as(DirectOptions).direct_num_workers == 8
    assert parsed["local"].view_as(DirectOptions).direct_running_mode == "multi_processing"
    cloud = parsed["dataflow"].view_as(GoogleCloudOptions)
    assert (parsed["dataflow"].view_as(StandardOptions).runner, cloud.project, cloud.region, cloud.temp_location) == (
        "DataflowRunner", "my-project", "us-central1", "gs://my-bucket/tmp")
    assert parsed["dataflow"].view_as(SetupOptions).setup_file == "./pyproject.toml"
    assert os.path.exists(os.path.join(ROOT, "pyproject.toml"))
    assert parsed["dataflow"].view_as(WorkerOptions).max_num_workers == 32
    flink = parsed["flink"].get_all_options()
    assert (flink["runner"], flink["flink_master"], flink["parallelism"]) == ("FlinkRunner", "flink-jobmanager:8081",
                                                                             16)
    spark = parsed["spark"].get_all_options()
    assert (spark["runner"], spark["spark_master_url"]) == ("SparkRunner", "spark://spark-master:7077")
    assert parsed["dask"].view_as(DaskOptions).get_all_options(drop_default=True, current_only=True) == {
        "address": "dask-scheduler:8786"}
