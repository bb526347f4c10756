#!/usr/bin/env python3
"""A gateway in front of a gateway: the adbc engine reading ``arrowgate serve``.

    .venv/bin/python bench/flight_front_bench.py --rounds 5

``arrowgate serve`` runs in a process of its own on loopback (its default
DuckDB engine). Contenders, each in a worker process of its own
(:mod:`gateway.benchmark.runner`), read the same answer (an integer, a double and a
string per row, ``--rows`` rows) to the end:

- ``flight_direct``: the ADBC Flight SQL driver used directly against the
  server (``cursor.execute``, ``fetch_arrow_table``), the baseline;
- ``adbc_flightsql``: arrowgate's adbc engine on the same driver and server
  (what the engine adds: target within 10% of the driver, as on PostgreSQL);
- ``duckdb_local``: a duckdb engine in the worker's own process (what the
  network hop and the second gateway cost).

Answers are checked against the baseline before anything is timed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.benchmark.runner import AdbcDriver, GatewayEngine, run_benchmark  # noqa: E402
from gateway.sql.corpus import Query  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def query(rows: int) -> str:
    return f"SELECT i, i * 0.5 AS x, 'trip-' || i AS label FROM range({rows}) t(i)"


def serve(folder: str) -> tuple[subprocess.Popen[str], str]:
    """``arrowgate serve`` on a free port; its process and address."""
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--port", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=folder)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # the query log
    return proc, first.split("listening on ")[1].split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server, uri = serve(folder)
        try:
            config = {"engines": {
                "adbc_flightsql": {"type": "adbc", "driver": "flightsql", "uri": uri,
                                   "dialect": "duckdb"},
                "duckdb_local": {"type": "duckdb"}}}
            report = run_benchmark(
                [AdbcDriver("flight_direct", driver="flightsql", uri=uri), GatewayEngine("adbc_flightsql", config),
                 GatewayEngine("duckdb_local", config)],
                [Query(f"rows_{args.rows}", query(args.rows))], rounds=args.rounds,
                baseline="flight_direct")
        finally:
            server.terminate()
            server.wait(timeout=30)
    RESULTS.mkdir(parents=True, exist_ok=True)
    report.write_json(RESULTS / "flight_front.json")
    print(report.to_markdown())


if __name__ == "__main__":
    main()
