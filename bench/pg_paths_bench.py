#!/usr/bin/env python3
"""A 1M-row answer from PostgreSQL, through each way arrowgate can read it.

    .venv/bin/python bench/pg_paths_bench.py --rounds 5

Contenders, each in a process of its own (:mod:`gateway.benchmark.runner`):

- ``adbc_direct``: the ADBC PostgreSQL driver used directly
  (``cursor.execute``, ``fetch_arrow_table``), the baseline;
- ``adbc``: arrowgate's adbc engine on the same driver;
- ``odbc``: arrowgate's odbc engine (psqlODBC, read by arrow-odbc);
- ``pyodbc_rows``: pyodbc ``fetchall()`` with the rows turned into Arrow
  columns by pyarrow (what reading ODBC without arrow-odbc costs);
- ``duckdb_scanner``: DuckDB 1.5.5's ``postgres_scan`` (the extension package)
  through a duckdb engine.

The table (int8, float8, text, timestamp) lives on a throwaway cluster
(``tests/pg.py``, fsync off) started by this script. Answers are checked
against the baseline before anything is timed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.benchmark.runner import AdbcDriver, Contender, GatewayEngine, run_benchmark  # noqa: E402
from gateway.sql.corpus import Query  # noqa: E402
from tests.pg import find_bin_dir, start_cluster  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TABLE = ("CREATE TABLE bench AS SELECT g::int8 AS id, g * 0.5::float8 AS x, 'trip-' || g AS label, "
         "timestamp '2020-01-01' + g * interval '1 second' AS ts "
         "FROM generate_series(1, {rows}) g")
QUERY = "SELECT id, x, label, ts FROM bench ORDER BY id"


@dataclass
class PyodbcRows(Contender):
    """pyodbc's rows, made into Arrow columns by pyarrow's type inference."""

    name: str
    connection: str = ""

    def start(self) -> str:
        import pyodbc

        self._con: Any = pyodbc.connect(self.connection, autocommit=True)
        return f"pyodbc {pyodbc.version} fetchall + pa.array"

    def run(self, sql: str) -> Any:
        import pyarrow as pa

        cur = self._con.cursor()
        cur.execute(sql)
        rows = cur.fetchall()
        names = [d[0] for d in cur.description]
        return pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})

    def stop(self) -> None:
        self._con.close()


@dataclass
class DuckdbScanner(GatewayEngine):
    """A duckdb engine reading the table through ``postgres_scan`` (the same rows, its SQL)."""

    scan: str = ""

    def run(self, sql: str) -> Any:
        return super().run(self.scan)


def contenders(cluster: Any, dbname: str) -> list[Contender]:
    odbc = (f"DRIVER={{PostgreSQL Unicode}};SERVER=127.0.0.1;PORT={cluster.port};"
            f"DATABASE={dbname};UID=postgres;PWD={cluster.password};BoolsAsChar=0")
    config = {"engines": {
        "adbc": {"type": "adbc", "driver": "postgresql", "uri": cluster.uri(dbname)},
        "odbc": {"type": "odbc", "connection": odbc},
        "duckdb_scanner": {"type": "duckdb", "version": "1.5.5",
                           "extensions": ["postgres_scanner"], "settings": {"threads": 2}},
    }}
    return [AdbcDriver("adbc_direct", driver="postgresql", uri=cluster.uri(dbname)),
            GatewayEngine("adbc", config), GatewayEngine("odbc", config),
            PyodbcRows("pyodbc_rows", connection=odbc),
            DuckdbScanner("duckdb_scanner", config, scan=(
                f"SELECT id, x, label, ts FROM postgres_scan('{cluster.dsn(dbname)}', "
                "'public', 'bench') ORDER BY id"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries not found (apt-get install postgresql)")
    cluster = start_cluster(bin_dir)
    try:
        cluster.psql("CREATE DATABASE bench")
        cluster.psql(TABLE.format(rows=args.rows) + "; ANALYZE bench", dbname="bench")
        report = run_benchmark(contenders(cluster, "bench"), [Query(f"rows_{args.rows}", QUERY)],
                               rounds=args.rounds, baseline="adbc_direct")
    finally:
        cluster.stop()
    RESULTS.mkdir(parents=True, exist_ok=True)
    report.write_json(RESULTS / "pg_paths.json")
    print(report.to_markdown())


if __name__ == "__main__":
    main()
