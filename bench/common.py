"""Shared benchmark plumbing: a real-text corpus built on the spot, timing, the printed table, the CSV row."""

import csv
import datetime
import importlib
import os
import platform
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def docstring_lines(modules=("json", "collections", "argparse", "functools", "pathlib", "csv", "textwrap", "os",
                             "re", "logging", "subprocess", "unittest", "email", "http", "asyncio", "typing")):
    """Real English from the standard library's docstrings, one non-empty line each."""
    lines = []
    for name in modules:
        module = importlib.import_module(name)
        for attr in dir(module):
            doc = getattr(getattr(module, attr, None), "__doc__", None)
            if isinstance(doc, str):
                lines += [line.strip() for line in doc.splitlines() if line.strip()]
    return lines


def corpus_of_size(megabytes):
    lines = docstring_lines()
    size = sum(len(line.encode()) + 1 for line in lines)
    return lines * max(1, int(megabytes * 1e6 / size) + 1)


def paired_times(fns, repeats=5):
    """Times several callables in interleaved rounds (after a warm-up of each), so machine noise hits all alike.

    Returns, for each callable, the list of its per-round times; compare them round by round (median ratio).
    """
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return times


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def report(name, rows, columns):
    """Prints a table and appends the rows to bench/results/<name>.csv with the date and machine."""
    widths = [max(len(str(c)), *(len(f"{r[c]}") for r in rows)) for c in columns]
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths)))
    for row in rows:
        print("  ".join(f"{row[c]}".ljust(w) for c, w in zip(columns, widths)))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["date", "machine", "cpus"] + list(columns))
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"date": datetime.datetime.now().isoformat(timespec="seconds"),
                             "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                             **{c: row[c] for c in columns}})
