#!/usr/bin/env python3
"""``executemany`` of many rows through the service, beside DuckDB's own ways to insert them.

    .venv/bin/python bench/executemany_bench.py --rows 50000 --rounds 5 | tee out.txt

Three contenders insert the same ``--rows`` rows of three integers into an
empty table: the ADBC Flight SQL driver's ``executemany`` through
``arrowgate serve`` (in a process of its own), DuckDB's own
``executemany`` in this process, and DuckDB inserting the rows from an Arrow
table (the floor). The table's count and sums are checked after each insert;
contenders alternate round by round, rotated, after one warm-up; the median
and min-max of ``--rounds`` are printed with the ratio to the floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import adbc_driver_flightsql.dbapi as dbapi  # noqa: E402
import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402

from tests.serve_process import served  # noqa: E402

CONFIG = 'default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.rows
    rows = [(i, i + 1, i + 2) for i in range(n)]
    table = pa.table({"a": [r[0] for r in rows], "b": [r[1] for r in rows],
                      "c": [r[2] for r in rows]})
    expected = (n, n * (n - 1) // 2, n * (n + 3) // 2)
    local = duckdb.connect()
    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp), CONFIG) as service, \
            dbapi.connect(service.location, autocommit=True) as conn, conn.cursor() as cur:

        def through_service() -> tuple[int, ...]:
            cur.execute("CREATE OR REPLACE TABLE t (a INTEGER, b INTEGER, c INTEGER)")
            cur.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
            cur.execute("SELECT count(*), sum(a)::BIGINT, sum(c)::BIGINT FROM t")
            return tuple(cur.fetchall()[0])

        def duckdb_executemany() -> tuple[int, ...]:
            local.execute("CREATE OR REPLACE TABLE t (a INTEGER, b INTEGER, c INTEGER)")
            local.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
            return local.execute("SELECT count(*), sum(a)::BIGINT, sum(c)::BIGINT FROM t") \
                .fetchall()[0]

        def duckdb_from_arrow() -> tuple[int, ...]:
            local.execute("CREATE OR REPLACE TABLE t (a INTEGER, b INTEGER, c INTEGER)")
            local.register("rows_table", table)
            local.execute("INSERT INTO t SELECT * FROM rows_table")
            local.unregister("rows_table")
            return local.execute("SELECT count(*), sum(a)::BIGINT, sum(c)::BIGINT FROM t") \
                .fetchall()[0]

        contenders: dict[str, Callable[[], tuple[int, ...]]] = {
            "arrowgate serve, ADBC executemany": through_service,
            "DuckDB executemany, in process": duckdb_executemany,
            "DuckDB INSERT from Arrow, in process (floor)": duckdb_from_arrow,
        }
        for name, run in contenders.items():  # answers first (and the warm-up)
            got = run()
            assert tuple(got) == expected, (name, got, expected)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                started = time.perf_counter()
                got = contenders[name]()
                times[name].append(time.perf_counter() - started)
                assert tuple(got) == expected, (name, got)
    floor = statistics.median(times[names[-1]])
    print(f"{n} rows of 3 integers, {args.rounds} rounds after a warm-up (load: "
          f"{Path('/proc/loadavg').read_text().split()[0]})\n")
    print("| contender | median s | min-max s | / floor |")
    print("|---|---|---|---|")
    for name in names:
        median = statistics.median(times[name])
        print(f"| {name} | {median:.3f} | {min(times[name]):.3f}-{max(times[name]):.3f} | "
              f"{median / floor:.1f}x |")


if __name__ == "__main__":
    main()
