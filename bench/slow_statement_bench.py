#!/usr/bin/env python3
"""Issue 36's "limits from arrival": a 200 KB statement under ``query_timeout = 4``.

    .venv/bin/python bench/slow_statement_bench.py [--whens 12000] [--timeout 4] [--rounds 5]

A CASE of ``--whens`` WHENs (6,800 make 200 KB, the issue's size) over
``range(1000000000)``, sent through the ADBC Flight SQL driver to an in-process
service: each round on a fresh connection and a fresh text (a comment numbers it), so
no kept schema or plan helps. Printed per round: how long the client waited for its
error, the error's kind, and what the query log said. The bound to meet is the
timeout plus one second.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(json.loads(record.getMessage()))
        except ValueError:
            pass


def main() -> None:
    import adbc_driver_flightsql.dbapi as dbapi

    from tests.flight_support import serving

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whens", type=int, default=6800)
    parser.add_argument("--timeout", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    whens = " ".join(f"WHEN range = {i} THEN 'v{i}'" for i in range(args.whens))
    lines = _Lines()
    log = logging.getLogger("arrowgate.flight.query")
    log.addHandler(lines)
    log.setLevel(logging.INFO)
    waits = []
    print(f"statement: {len(whens) / 1000:.0f} KB of CASE, query_timeout = {args.timeout}")
    print("| round | client waited s | error | log line ms |\n|---|---|---|---|")
    with serving(query_timeout=args.timeout) as server:
        for n in range(args.rounds):
            sql = f"/* round {n} */ SELECT CASE {whens} ELSE 'x' END AS c FROM range(1000000000)"
            with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
                started = time.monotonic()
                try:
                    cur.execute(sql)
                    cur.fetchall()
                    error = "none (answered)"
                except dbapi.Error as exc:
                    error = str(exc).splitlines()[0][:60]
                waited = time.monotonic() - started
            waits.append(waited)
            ms = lines.lines[-1].get("ms") if lines.lines else None
            print(f"| {n + 1} | {waited:.2f} | {error} | {ms} |", flush=True)
    print(f"\nmedian {statistics.median(waits):.2f} s, max {max(waits):.2f} s "
          f"(bound: timeout + 1 = {args.timeout + 1:.0f} s)")


if __name__ == "__main__":
    main()
