#!/usr/bin/env python3
"""What a file's shape costs the csv engine: each of opening.py's paths against a plain file of the same size.

    .venv/bin/python bench/csv_shapes_bench.py [--mb 300] [--rounds 5] [--dir /tmp/csv_shapes] [--cache]

Writes (once, kept in --dir; never in the repository) files of the same rows in
these shapes, each about --mb MB:

- ``plain``: ``1,25,3.5,"text 12 item 3"`` (every row has one quoted field);
- ``padded``: the same with a blank before each quoted field (``..., "text 12 item 3"``),
  which the scanner skips as it reads (until issue #39, a copy rewritten line by
  line in Python at every query);
- ``comments``: the plain rows with a comment after every 50th row's values
  (``... # n``) and a comment line every 1000 (DuckDB's detection then takes ``#``),
  read through a copy cut in C;
- ``lone_cr``: rows ending in a lone CR, read through a copy whose ends are rewritten.

Each round runs, in a fresh process per query (``arrowgate``'s own import, sniff,
scan; the sniff cache off, or on with --cache), ``count(*)`` and ``sum`` of a column over every shape,
the order rotated round by round; the answers are checked equal across shapes first.
Printed: per shape and query, the median seconds with the min-max spread, the ratio
to the plain file's median of the same run, and the largest peak RSS of its processes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHAPES = ("plain", "padded", "comments", "lone_cr")
QUERIES = {"count": "SELECT count(*) AS n FROM t",
           "sum": "SELECT sum(b) AS s, count(c) AS n FROM t"}

CHILD = r"""
import sys, gateway
path, sql = sys.argv[1], sys.argv[2]
with gateway.connect({"engines": {"csv": {"type": "csv"}},
                      "sources": {"t": {"path": path}}}) as gw:
    rows = gw.execute(sql, engine="csv").to_arrow().to_pylist()
print(rows)
"""


def row(i: int) -> tuple[str, str, str, str]:
    return str(i), f"{(i * 7919) % 100000}", f"{(i % 977) / 8}", f"text {i % 1000} item {i % 37}"


def write_files(folder: Path, mb: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {shape: folder / f"{shape}_{mb}mb.csv" for shape in SHAPES}
    if all(p.exists() for p in paths.values()):
        return paths
    target = mb << 20
    with contextlib.ExitStack() as stack:
        outs = {shape: stack.enter_context(open(paths[shape], "wb")) for shape in SHAPES}
        header = b"a,b,c,d\n"
        outs["comments"].write(b"# written by bench/csv_shapes_bench.py\n")
        for shape, out in outs.items():
            out.write(header.replace(b"\n", b"\r") if shape == "lone_cr" else header)
        i, written = 0, 0
        while written < target:
            lines: dict[str, list[str]] = {shape: [] for shape in SHAPES}
            for j in range(i, i + 10000):
                a, b, c, d = row(j)
                lines["plain"].append(f'{a},{b},{c},"{d}"\n')
                lines["padded"].append(f'{a},{b},{c}, "{d}"\n')
                lines["comments"].append(f'{a},{b},{c},"{d}"' + (" # n\n" if j % 50 == 0 else "\n")
                                         + ("# a comment line\n" if j % 1000 == 999 else ""))
                lines["lone_cr"].append(f'{a},{b},{c},"{d}"\r')
            i += 10000
            for shape, out in outs.items():
                data = "".join(lines[shape]).encode()
                out.write(data)
                if shape == "plain":
                    written += len(data)
    return paths


#: the sniff cache's setting for the children: off, or a folder (--cache)
SNIFF_CACHE = "off"


def run(path: Path, sql: str) -> tuple[float, str, int]:
    """Seconds, printed answer and peak RSS (KiB) of one query in a fresh process."""
    env = {**os.environ, "ARROWGATE_SNIFF_CACHE": SNIFF_CACHE}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), sql], env=env,
                             stdout=subprocess.PIPE, text=True)
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{path}: {sql} failed ({child.returncode})")
    return took, out, usage.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/csv_shapes"))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--cache", action="store_true",
                    help="the sniff cache on (a fresh folder, filled by the warm-up), as "
                         "a user's second query on a file finds it")
    args = ap.parse_args()
    global SNIFF_CACHE
    if args.cache:
        import tempfile

        SNIFF_CACHE = tempfile.mkdtemp(prefix="csv-shapes-cache-")
    shapes = args.shapes.split(",")
    paths = write_files(args.dir, args.mb)
    print(f"files: {', '.join(f'{s} {paths[s].stat().st_size / 1e6:.0f} MB' for s in shapes)}")
    for name, sql in QUERIES.items():
        answers = {s: run(paths[s], sql)[1] for s in shapes}  # also the warm-up
        wrong = [s for s in shapes if answers[s] != answers["plain"]]
        if wrong:
            print(f"{name}: answers differ from plain's on {wrong}: no timing")
            continue
        times: dict[str, list[float]] = {s: [] for s in shapes}
        peaks: dict[str, int] = dict.fromkeys(shapes, 0)
        for r in range(args.rounds):
            for s in shapes[r % len(shapes):] + shapes[:r % len(shapes)]:
                took, _, peak = run(paths[s], sql)
                times[s].append(took)
                peaks[s] = max(peaks[s], peak)
        base = statistics.median(times["plain"])
        for s in shapes:
            med = statistics.median(times[s])
            print(f"{name:6} {s:9} median {med:6.3f} s (min {min(times[s]):.3f} max "
                  f"{max(times[s]):.3f})  x{med / base:.2f} of plain  peak {peaks[s] >> 10} MB")


if __name__ == "__main__":
    main()
