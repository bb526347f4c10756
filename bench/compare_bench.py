#!/usr/bin/env python3
"""How fast the comparator judges two large answers (docs/shadow.md, "Speed").

    .venv/bin/python bench/compare_bench.py --rows 10000000

Builds one answer of ROWS rows (id, string, double, small int) in DuckDB, and
variants of it, then times ``compare_tables`` on each pair once per round and
prints the median and min-max of the rounds, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import duckdb

from gateway.compare import compare_tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect()
    answer = con.sql(f"SELECT i AS id, (i % 1000)::VARCHAR AS s, i * 1.5 AS f, i % 7 AS g "
                     f"FROM range({args.rows}) t(i)").to_arrow_table()
    con.register("answer", answer)
    shuffled = con.sql("SELECT * FROM answer ORDER BY hash(id)").to_arrow_table()
    changed = con.sql("SELECT id, s, CASE WHEN id % 100000 = 0 THEN f + 1 ELSE f END AS f, g "
                      "FROM answer").to_arrow_table()
    nudged = con.sql("SELECT id, s, f * (1 + 1e-12) AS f, g FROM answer").to_arrow_table()
    order_by = "SELECT * FROM t ORDER BY id"
    cases = [
        ("same rows, shuffled, no ORDER BY", shuffled, answer, None),
        ("same rows, shuffled, ORDER BY id", shuffled, answer, order_by),
        ("same rows, sorted, ORDER BY id", answer, answer, order_by),
        (f"{args.rows // 100000} cells differ", changed, answer, None),
        ("every float off by 1e-12 relative (within tolerance)", nudged, answer, None),
    ]
    print(f"{args.rows} rows, {answer.nbytes / 2**20:.0f} MiB per answer, "
          f"median of {args.rounds} rounds\n")
    print("| case | verdict | median s (min-max) |\n|---|---|---|")
    for name, primary, reference, sql in cases:
        times, category = [], ""
        for _ in range(args.rounds):
            started = time.perf_counter()
            category = compare_tables(primary, reference, sql=sql).category
            times.append(time.perf_counter() - started)
        print(f"| {name} | {category} | {statistics.median(times):.2f} "
              f"({min(times):.2f}-{max(times):.2f}) |", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"\npeak RSS of the whole process (answers included): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
