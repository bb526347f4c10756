#!/usr/bin/env python3
"""How fast ``arrowgate fuzz`` finds and shrinks each planted bug (docs/benchmarks.md).

    .venv/bin/python bench/fuzz_bench.py --seeds 5

For every bug in tests/planted_bugs.py, the fuzzer runs against DuckDB on the
40-row table the tests use (tests/planted_bugs.py FUZZ_TABLE_SQL) once per seed
until its first divergence, which it shrinks; the shrunk query is judged again
to check that it reproduces the bug. Printed per bug: queries and seconds until
found, seconds to shrink (median and min-max over the seeds), the category and
the shortest shrunk query. Then the throughput on the bug-free engine (queries
per minute, the comparison included), and the load average at the start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gateway
from gateway.fuzz.fuzzer import DifferentialFuzzer
from tests import planted_bugs


def spread(values: list[float], digits: int = 1) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=300, help="seconds per search at most")
    parser.add_argument("--throughput-queries", type=int, default=300)
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.parquet")
        duckdb.sql(f"COPY ({planted_bugs.FUZZ_TABLE_SQL}) TO '{path}' (FORMAT parquet)")
        print("| bug | found (of seeds) | queries to find | seconds to find | seconds to "
              "shrink | category | shortest shrunk query |\n|---|---|---|---|---|---|---|")
        for bug in planted_bugs.BUGS:
            config = {"engines": {"p": {"type": "planted", "bug": bug},
                                  "r": {"type": "duckdb"}},
                      "sources": {"t": {"path": path}}}
            queries, seconds, shrink, categories, shrunk = [], [], [], set(), []
            with gateway.connect(config, plugins=[planted_bugs]) as gw:
                for seed in range(args.seeds):
                    fuzzer = DifferentialFuzzer(gw, "p", "r", "t", seed=seed)
                    report = fuzzer.run(seconds=args.budget, max_findings=1)
                    if not report.findings:
                        continue
                    found = report.findings[0]
                    if fuzzer.judge(found.shrunk).category != found.category:
                        raise SystemExit(f"{bug}: the shrunk query does not reproduce it")
                    queries.append(found.after_queries)
                    seconds.append(found.after_seconds)
                    shrink.append(found.shrink_seconds)
                    categories.add(found.category)
                    shrunk.append(found.shrunk)
            if not queries:
                print(f"| {bug} | 0/{args.seeds} | | | | | |", flush=True)
                continue
            print(f"| {bug} | {len(queries)}/{args.seeds} | {spread(queries, 0)} | "
                  f"{spread(seconds)} | {spread(shrink)} | {', '.join(sorted(categories))} | "
                  f"`{min(shrunk, key=len)}` |", flush=True)
        config = {"engines": {"p": {"type": "planted"}, "r": {"type": "duckdb"}},
                  "sources": {"t": {"path": path}}}
        rates = []
        with gateway.connect(config, plugins=[planted_bugs]) as gw:
            for seed in range(args.seeds):
                report = DifferentialFuzzer(gw, "p", "r", "t", seed=seed).run(
                    seconds=args.budget, max_queries=args.throughput_queries)
                if report.findings:
                    raise SystemExit(f"the bug-free engine diverged: {report.findings[0].shrunk}")
                rates.append(report.per_minute)
        print(f"\nbug-free engine, {args.throughput_queries} queries per seed: "
              f"{spread(rates, 0)} queries per minute (both engines and the comparison)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
