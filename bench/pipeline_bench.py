#!/usr/bin/env python3
"""What the statement pipeline costs per statement, in process: ``SELECT 1``, p50 and p99.

    .venv/bin/python bench/pipeline_bench.py --before a1d474a --rounds 5

Two checkouts of arrowgate run the same loop, each in a process of its own:
``gw.execute("SELECT 1").to_arrow()`` on the default DuckDB engine, ``--n``
times, every statement timed alone. ``--before`` names a commit (checked out
into a temporary worktree and run from there, with this checkout's compiled
csv modules beside it); the other is this checkout. Answers are checked first
(each side answers ``[(1,)]``), then the two alternate round by round in
rotated order, after one warm-up round; each round reports p50 and p99; the
table shows the median of the rounds with the min-max spread, the ratio of the
medians, and each process's peak RSS. Output goes to stdout (pipe it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import gateway
n = int(sys.argv[1])
with gateway.connect() as gw:
    assert gw.execute("SELECT 1 AS x").to_arrow().to_pylist() == [{"x": 1}]
    times = []
    for _ in range(n):
        started = time.perf_counter_ns()
        gw.execute("SELECT 1 AS x").to_arrow()
        times.append(time.perf_counter_ns() - started)
times.sort()
print(json.dumps({"p50": times[len(times) // 2] / 1e3, "p99": times[int(len(times) * 0.99)] / 1e3,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(tree: Path, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'plugins'}"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True,
                          text=True, env=env, cwd=tree, check=True)
    return json.loads(done.stdout)


def worktree(commit: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="arrowgate-before-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), commit],
                   check=True, capture_output=True)
    for built in (ROOT / "plugins" / "gateway_csv").glob("*.so"):
        shutil.copy(built, folder / "plugins" / "gateway_csv" / built.name)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=3000, help="statements per round")
    args = parser.parse_args()
    before = worktree(args.before)
    trees = {"before": before, "after": ROOT}
    try:
        print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
        for name, tree in trees.items():
            run(tree, 10)  # answers checked inside: each asserts SELECT 1 gives 1
            print(f"{name}: answers checked", flush=True)
        order = list(trees)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(args.rounds + 1):
            for name in order:
                got = run(trees[name], args.n)
                if r:
                    results[name].append(got)
            order = order[1:] + order[:1]
        print(f"load average {os.getloadavg()[0]:.2f}\n")
        print("| | p50 µs (spread) | p99 µs (spread) | peak RSS MB |")
        print("|---|---|---|---|")
        medians = {}
        for name, rows in results.items():
            cells = []
            for key in ("p50", "p99"):
                values = [row[key] for row in rows]
                medians[(name, key)] = statistics.median(values)
                cells.append(f"{statistics.median(values):.0f} ({min(values):.0f}-"
                             f"{max(values):.0f})")
            peak = max(row["peak_mb"] for row in rows)
            print(f"| {name} | {cells[0]} | {cells[1]} | {peak:.0f} |")
        for key in ("p50", "p99"):
            ratio = medians[("after", key)] / medians[("before", key)]
            print(f"\nafter / before, {key}: {ratio:.3f}x", end="")
        print()
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                       capture_output=True)


if __name__ == "__main__":
    main()
