#!/usr/bin/env python3
"""CPU of the csv engine's sniffer on one file's head, with a per-step breakdown.

    .venv/bin/python bench/sniff_bench.py [PATH] [--rounds 15]
    .venv/bin/python bench/sniff_bench.py [PATH] --against DIR [--rounds 15] [--fresh]

PATH defaults to bench/data/taxi_1000000.csv (``arrowgate data taxi``). The head is
read as ``CsvEngine.layout`` reads it (DIALECT_BYTES, doubled until it holds
SAMPLE_ROWS + 200 lines, the whole file when smaller), then ``layout.sniff`` runs on
it ``--rounds`` times after one warm-up. Printed: the median CPU milliseconds
(``time.process_time``) of a whole sniff with the min-max spread, then the median CPU
of each step timed inside it (the steps nest: ``dialect.detect`` calls
``_dialect.count_rows``). Timing steps costs a little CPU of its own, so the whole
sniff is timed in rounds without them, alternating with the rounds that time them.

``--wall``: wall-clock milliseconds instead of CPU (``time.perf_counter``), for the
steps that run in threads of their own (the sample typed in two halves, two dialect
candidates counted at once), whose CPU is the same but whose time is not.

``--against DIR``: another checkout of this project (its C modules built in place,
``setup.py build_ext --inplace``), for a before/after figure. Each tree sniffs in its
own warm worker process; their layouts are compared first (a difference gets no
timing), then the two alternate round by round, the order rotated. With ``--fresh``
each round times the first sniff of a new process instead, as a one-query
``arrowgate query`` sniffs (memory not yet touched, caches cold).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway_csv import _dialect, _scanner, dialect, layout
from gateway_csv.layout import DIALECT_BYTES, SAMPLE_BYTES, SAMPLE_ROWS, sniff

DEFAULT = Path(__file__).resolve().parent / "data" / "taxi_1000000.csv"
#: the clock (time.process_time, or time.perf_counter with --wall) and its name
CLOCK: Callable[[], float] = time.process_time
CLOCK_NAME = "CPU"
#: (module, attribute) of each step timed, as sniff reaches them (where they exist)
STEPS: list[tuple[Any, str]] = [
    (dialect, "detect"), (_dialect, "count_rows"), (layout, "_typed_best"),
    (layout._Sample, "plain"), (_scanner, "sample_shapes"), (_scanner, "sample_columns"),
    (layout, "_kinds"), (_scanner, "shapes"), (layout, "_skip_rows"), (layout, "_split_lines"),
]


def read_head(path: Path) -> tuple[bytes, bool]:
    """The bytes CsvEngine.layout hands to sniff, and whether they are the whole file."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, DIALECT_BYTES, 0)
        while len(head) < size and head.count(b"\n") <= SAMPLE_ROWS + 200:
            if len(head) >= SAMPLE_BYTES:
                sys.exit(f"{path}: its first {SAMPLE_ROWS} rows take more than SAMPLE_BYTES")
            head = os.pread(fd, min(len(head) * 2, SAMPLE_BYTES), 0)
    finally:
        os.close(fd)
    return head, len(head) >= size


def _timed(name: str, fn: Callable[..., Any], spent: dict[str, float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = CLOCK()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += CLOCK() - start
    return wrapper


def _sniff_ms(head: bytes, complete: bool, path: Path) -> float:
    start = CLOCK()
    sniff(head, {}, path=str(path), complete=complete)
    return (CLOCK() - start) * 1000


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f} ms {CLOCK_NAME} (min {min(values):.1f}, " \
           f"max {max(values):.1f}, {len(values)} rounds)"


def measure(path: Path, rounds: int) -> None:
    head, complete = read_head(path)
    lines = head.count(b"\n")
    print(f"{path}: head of {len(head):,} bytes, {lines:,} lines")
    _sniff_ms(head, complete, path)  # warm-up
    whole: list[float] = []
    steps: dict[str, list[float]] = defaultdict(list)
    # (owner, attribute, what to call, what to put back: a classmethod as it was)
    originals = [(owner, attr, getattr(owner, attr), vars(owner)[attr])
                 for owner, attr in STEPS if hasattr(owner, attr)]
    for _ in range(rounds):
        whole.append(_sniff_ms(head, complete, path))
        spent: dict[str, float] = defaultdict(float)
        for owner, attr, fn, _ in originals:
            setattr(owner, attr, _timed(f"{owner.__name__.rpartition('.')[2]}.{attr}", fn, spent))
        try:
            _sniff_ms(head, complete, path)
        finally:
            for owner, attr, _, raw in originals:
                setattr(owner, attr, raw)
        for owner, attr, _, _ in originals:
            name = f"{owner.__name__.rpartition('.')[2]}.{attr}"
            steps[name].append(spent[name] * 1000)
    print(f"sniff: {_spread(whole)}")
    for name, values in steps.items():
        if any(values):
            print(f"  {name:28} {statistics.median(values):7.1f} ms")


def worker(path: Path) -> None:
    """Sniff, print the CPU milliseconds and the layout, then sniff once per line read
    and print its CPU milliseconds."""
    head, complete = read_head(path)
    start = CLOCK()
    found = sniff(head, {}, path=str(path), complete=complete)
    print(f"{(CLOCK() - start) * 1000:.3f}\t{found!r}", flush=True)
    for _ in sys.stdin:
        print(f"{_sniff_ms(head, complete, path):.3f}", flush=True)


def _worker(path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], float, str]:
    """A worker process, the CPU milliseconds of its first sniff and its layout."""
    wall = ["--wall"] if CLOCK is time.perf_counter else []
    w = subprocess.Popen([sys.executable, __file__, str(path), "--worker", *wall], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, **env})
    ms, _, found = w.stdout.readline().partition("\t")  # type: ignore[union-attr]
    return w, float(ms), found.strip()


def _close(w: subprocess.Popen[str]) -> None:
    w.stdin.close()  # type: ignore[union-attr]
    w.wait()


def against(path: Path, other: Path, rounds: int, fresh: bool) -> None:
    trees = {"this tree": {}, str(other): {"PYTHONPATH": f"{other / 'plugins'}{os.pathsep}{other}"}}
    workers = {name: _worker(path, env) for name, env in trees.items()}
    try:
        layouts = {name: found for name, (_, _, found) in workers.items()}
        if len(set(layouts.values())) != 1:
            sys.exit("the layouts differ, so no timing:\n" +
                     "\n".join(f"{name}: {text}" for name, text in layouts.items()))
        print(f"{path}: the same layout from both trees")
        times: dict[str, list[float]] = {name: [] for name in workers}
        names = list(workers)
        for i in range(rounds + 1):  # the first round warms up
            for name in names[i % 2:] + names[:i % 2]:
                if fresh:
                    w, ms, _ = _worker(path, trees[name])
                    _close(w)
                else:
                    w = workers[name][0]
                    w.stdin.write("go\n")  # type: ignore[union-attr]
                    w.stdin.flush()  # type: ignore[union-attr]
                    ms = float(w.stdout.readline())  # type: ignore[union-attr]
                if i:
                    times[name].append(ms)
        what = "first sniff of a new process" if fresh else "sniff"
        for name, values in times.items():
            print(f"{name}: {what} {_spread(values)}")
        base, new = (statistics.median(times[n]) for n in (str(other), "this tree"))
        print(f"this tree / {other}: {new / base:.2f}")
    finally:
        for w, _, _ in workers.values():
            _close(w)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--fresh", action="store_true",
                        help="with --against: time the first sniff of a new process each round")
    parser.add_argument("--wall", action="store_true",
                        help="wall-clock milliseconds instead of CPU")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wall:
        global CLOCK, CLOCK_NAME
        CLOCK, CLOCK_NAME = time.perf_counter, "wall"
    if args.worker:
        worker(args.path)
    elif args.against:
        against(args.path, args.against.resolve(), args.rounds, args.fresh)
    else:
        measure(args.path, args.rounds)


if __name__ == "__main__":
    main()
