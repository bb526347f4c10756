#!/usr/bin/env python3
"""Sessions on DuckDB in process: throughput of many sessions at once, and the catalog tree.

    .venv/bin/python bench/sessions_bench.py --rounds 5

- ``throughput``: 32 sessions x 100 queries (each in a thread of its own)
  against one session running the same 3,200 queries, alternating which goes
  first each round. Each query is a small aggregate over a 1M-row table.
  Answers are checked against the first one before anything is timed.
- ``catalog``: ``gw.tables()`` and ``gw.columns(table=...)`` on a database of
  10,000 tables (target: listing them under 1 s).

One warm-up round, then the median of the rounds with the min-max spread. Peak
RSS is the whole process's (the two modes share it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gateway

QUERY = "SELECT k, count(*) AS n, sum(v) AS s FROM facts WHERE v > ? GROUP BY k ORDER BY k"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def throughput(gw: Any, sessions: int, queries: int, rounds: int) -> None:
    gw.execute("CREATE TABLE facts AS SELECT range % 10 AS k, range AS v "
               "FROM range(1000000)").to_arrow()
    expected = gw.execute(QUERY, parameters=[500]).to_arrow()

    def worker(n: int) -> None:
        with gw.session() as s:
            for _ in range(n):
                if not s.execute(QUERY, [500]).to_arrow().equals(expected):
                    raise SystemExit("a session's answer differs from the one-shot answer")

    def one() -> float:
        began = time.perf_counter()
        worker(sessions * queries)
        return time.perf_counter() - began

    def many() -> float:
        began = time.perf_counter()
        with ThreadPoolExecutor(sessions) as pool:
            list(pool.map(worker, [queries] * sessions))
        return time.perf_counter() - began

    times: dict[str, list[float]] = {"1 session": [], f"{sessions} sessions": []}
    modes = [("1 session", one), (f"{sessions} sessions", many)]
    for r in range(rounds + 1):
        for name, fn in modes if r % 2 == 0 else modes[::-1]:
            seconds = fn()
            if r > 0:
                times[name].append(seconds)
    total = sessions * queries
    base = statistics.median(times["1 session"])
    print(f"{total} queries, {rounds} rounds after a warm-up, load {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        print(f"  {name:12} {_spread(values)}  {total / statistics.median(values):8.0f} q/s  "
              f"{base / statistics.median(values):.2f}x one session's throughput")


def catalog(gw: Any, tables: int, rounds: int) -> None:
    gw.execute(";".join(f"CREATE TABLE t{i} (a INTEGER, b VARCHAR, c DOUBLE)"
                        for i in range(tables))).to_arrow()
    listing, columns = [], []
    for r in range(rounds + 1):
        began = time.perf_counter()
        found = gw.tables()
        middle = time.perf_counter()
        cols = gw.columns(table=f"t{tables // 2}")
        end = time.perf_counter()
        if len(found) < tables or len(cols) != 3:
            raise SystemExit(f"wrong catalog: {len(found)} tables, {len(cols)} columns")
        if r > 0:
            listing.append(middle - began)
            columns.append(end - middle)
    print(f"{tables} tables, {rounds} rounds after a warm-up, load {os.getloadavg()[0]:.1f}")
    print(f"  gw.tables()          {_spread(listing)}")
    print(f"  gw.columns(table=)   {_spread(columns)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--only", choices=("throughput", "catalog"))
    args = parser.parse_args()
    if args.only in (None, "throughput"):
        with gateway.connect() as gw:
            throughput(gw, args.sessions, args.queries, args.rounds)
    if args.only in (None, "catalog"):
        with gateway.connect() as gw:
            catalog(gw, args.tables, args.rounds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process: {peak:.0f} MB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
