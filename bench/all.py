"""Every benchmark, one after another, each in its own process; each prints its table and appends to bench/results.

  pip install -r bench/requirements.txt && python -m bench.all [--quick] [--only model_speed,memory]

`--quick` runs every benchmark at a reduced size: enough to see a regression, not the figures for BENCHMARKS.md,
which come from the full run (see its "Reproduce" section).
"""

import argparse
import subprocess
import sys
import time

from bench.common import RESULTS

# name -> (full arguments, quick arguments)
BENCHMARKS = {
    "model_speed": ([], ["--quick", "--repeats", "1"]),
    "memory": ([], ["--preset", "small"]),
    "pretraining": ([], ["--preset", "mini", "--batch", "32", "--precision", "fp32", "--repeats", "2"]),
    "input_pipeline": ([], ["--megabytes", "0.5", "--rounds", "2", "--frees", "5"]),
    "finetuning": ([], ["--quick", "--repeats", "2"]),
    "serving": ([], ["--preset", "small", "--repeats", "3"]),
    "tokenizer": ([], ["--megabytes", "1", "--repeats", "3"]),
    "vocab_learner": ([], ["--megabytes", "0.3", "--repeats", "1"]),
    "inference_policy": ([], ["--preset", "mini", "--rounds", "2", "--calls", "5"]),
    "data_gen": ([], ["--quick"]),
    "data_gen_memory": ([], ["--megabytes", "1", "2"]),
    "squad_features": ([], ["--questions", "2000", "--rounds", "1"]),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma list of benchmark names")
    args = parser.parse_args()
    names = args.only.split(",")
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(f"--only: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    failed, start = [], time.perf_counter()
    for name in names:
        full, quick = BENCHMARKS[name]
        command = [sys.executable, "-m", f"bench.{name}", *(quick if args.quick else full)]
        print(f"\n== {' '.join(command[1:])}", flush=True)
        began = time.perf_counter()
        if subprocess.run(command).returncode:
            failed.append(name)
        print(f"== {name}: {time.perf_counter() - began:.0f} s", flush=True)
    print(f"\nall benchmarks: {time.perf_counter() - start:.0f} s; results appended under {RESULTS}")
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
