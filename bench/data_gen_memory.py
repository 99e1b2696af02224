"""Peak memory of pretraining-data generation by input route, at two corpus sizes: does it stay flat?

  python -m bench.data_gen_memory [--megabytes 10 100] [--routes file url tfds beam]

Routes, each with 2 worker processes and the same corpus (`bench.data_gen.write_corpus`), flags seq 128 / 20
predictions / dupe_factor 5 and the real uncased vocabulary:
  file  create_pretraining_data's `generate` on a local text file;
  url   the same with the corpus and the output named by `file://` URLs, so every read and write goes through
        `tf.io.gfile` as a `gs://` path would (the shards are built locally and copied up at the end);
  tfds  a TFDS text dataset prepared here from the same documents (one example per document, its lines kept);
  beam  `python -m data_gen.beam` on the DirectRunner in multi_processing mode.
Each run is a fresh process; the parent samples the resident memory of its whole process tree (the run, its
workers, the Beam SDK workers) every 20 ms from /proc and reports the peak of the sum, beside the largest peak of
one process. Preparing the TFDS dataset is not measured.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from bench.common import report, uncased_vocab
from bench.data_gen import ROOT, write_corpus

DATASET = "bert_tf_bench_documents"

CHILD = r"""
import json, sys, time
route, corpus, out, vocab, data_dir = sys.argv[1:6]
start = time.perf_counter()
if route == "beam":
    from data_gen.beam import main
    main([f"--input_file={corpus}", f"--output_prefix={out}", f"--vocab_file={vocab}", "--dupe_factor=5",
          "--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
else:
    from data_gen.generate import Options, generate
    from data_gen.tfds_corpus import corpus_from_flags
    if route == "tfds":
        corpus = corpus_from_flags(None, DATASET, "train", "text", data_dir, True)
    generate(corpus, [out], vocab, Options(dupe_factor=5), num_workers=2, progress=False)
print(json.dumps({"seconds": time.perf_counter() - start}))
""".replace("DATASET", repr(DATASET))


def _tree_rss_kb(root: int) -> tuple[int, int]:
    """(sum, largest) of the resident memory in kB of `root` and every process under it, now."""
    total = largest = 0
    pending = [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    pending.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended between the listing and the read
        total, largest = total + rss, max(largest, rss)
    return total, largest


def measure(route, corpus, vocab, data_dir, tmp):
    out_dir = os.path.join(tmp, f"out-{route}")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "records" if route == "beam" else "records.tfrecord")
    if route == "url":
        corpus, out = "file://" + corpus, "file://" + out
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    child = subprocess.Popen([sys.executable, "-c", CHILD, route, corpus, out, vocab, data_dir],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    peaks = [0, 0]

    def sample():
        while child.poll() is None:
            total, largest = _tree_rss_kb(child.pid)
            peaks[0], peaks[1] = max(peaks[0], total), max(peaks[1], largest)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    stdout, stderr = child.communicate()
    sampler.join()
    if child.returncode:
        raise RuntimeError(f"{route}: exit {child.returncode}\n{stderr[-3000:]}")
    seconds = json.loads(stdout.strip().splitlines()[-1])["seconds"]
    written = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    subprocess.run(["rm", "-rf", out_dir], check=True)
    return {"seconds": seconds, "tree_mb": peaks[0] / 1024, "largest_mb": peaks[1] / 1024, "written_mb": written / 1e6}


def prepare_tfds(corpus, data_dir):
    """A TFDS dataset of `corpus`'s documents (blank-line separated), one example each, in `data_dir`."""
    import tensorflow_datasets as tfds

    global _Builder
    if _Builder is None:  # TFDS registers a builder class by name, once per process
        class BertTfBenchDocuments(tfds.core.GeneratorBasedBuilder):
            VERSION = tfds.core.Version("1.0.0")
            __module__ = "bench_data_gen_memory"  # no package: TFDS 4.9.10 would look for its source with a module
            corpus = None                          # it lacks

            def _info(self):
                return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                    {"text": tfds.features.Text()}))

            def _split_generators(self, dl_manager):
                return {"train": self._generate_examples()}

            def _generate_examples(self):
                with open(self.corpus, encoding="utf-8") as f:
                    document, key = [], 0
                    for line in f:
                        if line.strip():
                            document.append(line.strip())
                        elif document:
                            yield key, {"text": "\n".join(document)}
                            document, key = [], key + 1
                    if document:
                        yield key, {"text": "\n".join(document)}

        _Builder = BertTfBenchDocuments
    _Builder.corpus = corpus
    tfds.disable_progress_bar()
    _Builder(data_dir=data_dir).download_and_prepare()


_Builder = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, nargs="+", default=(10, 100))
    parser.add_argument("--routes", nargs="+", default=("file", "url", "tfds", "beam"),
                        choices=("file", "url", "tfds", "beam"))
    args = parser.parse_args()

    vocab = uncased_vocab()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.megabytes:
            corpus = os.path.join(tmp, f"corpus-{size:g}.txt")
            write_corpus(corpus, size)
            data_dir = os.path.join(tmp, f"tfds-{size:g}")
            if "tfds" in args.routes:
                prepare_tfds(corpus, data_dir)
            for route in args.routes:
                r = measure(route, corpus, vocab, data_dir, tmp)
                rows.append({"route": route, "corpus_mb": f"{os.path.getsize(corpus) / 1e6:.1f}",
                             "seconds": f"{r['seconds']:.1f}", "written_mb": f"{r['written_mb']:.0f}",
                             "peak_tree_rss_mb": f"{r['tree_mb']:.0f}",
                             "peak_process_rss_mb": f"{r['largest_mb']:.0f}"})
                print(rows[-1], flush=True)
    print("2 workers each; peak resident memory of the whole process tree (sampled every 20 ms) and of its largest "
          "process")
    report("data_gen_memory", rows, ["route", "corpus_mb", "seconds", "written_mb", "peak_tree_rss_mb",
                                     "peak_process_rss_mb"])


if __name__ == "__main__":
    main()
