#!/usr/bin/env python3
"""Clients that stop reading, by the thousand, against a real ``arrowgate serve``.

    .venv/bin/python bench/abandoned_answers.py --loops 1000 --abandoned 10000 | tee out.txt

Not a timing benchmark: the figures of issue 36's "done when". Three parts, on
one service process:

1. the ADBC loop that crashed it: ``execute`` a million-row query,
   ``fetchmany(10)``, ``close``, ``--loops`` times;
2. its raw variant: ``CreatePreparedStatement``, ``GetFlightInfo``, ``DoGet``
   cancelled after one batch, ``ClosePreparedStatement`` at once, ``--loops`` times;
3. ``--abandoned`` answers abandoned after ten rows (the loop of part 1),
   with the service's RSS sampled every tenth of the way.

After each part the service must be alive and answer; RSS is measured from the
end of a warm-up of 100 abandoned answers. Output is a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import adbc_driver_flightsql.dbapi as dbapi  # noqa: E402
import pyarrow.flight as flight  # noqa: E402

from gateway.flight import protobuf as M  # noqa: E402
from tests.serve_process import Served, served  # noqa: E402

BIG = "SELECT range AS id, 'row' || range AS s FROM range(1000000)"
CONFIG = 'default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'


def ten_rows_and_close(conn: object) -> None:
    cur = conn.cursor()  # type: ignore[attr-defined]
    try:
        cur.execute(BIG)
        rows = cur.fetchmany(10)
        assert rows[9] == (9, "row9"), rows
    finally:
        cur.close()


def raw_cancel_and_close(client: flight.FlightClient) -> None:
    body = M.pack(M.ActionCreatePreparedStatementRequest(query=BIG))
    answer = next(iter(client.do_action(flight.Action("CreatePreparedStatement", body))))
    handle = M.unpack(M.ActionCreatePreparedStatementResult,
                      answer.body.to_pybytes()).prepared_statement_handle
    command = M.pack(M.CommandPreparedStatementQuery(prepared_statement_handle=handle))
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
    reader = client.do_get(info.endpoints[0].ticket)
    assert reader.read_chunk().data.column(0)[0].as_py() == 0
    reader.cancel()
    close = M.pack(M.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
    list(client.do_action(flight.Action("ClosePreparedStatement", close)))


def answers(service: Served) -> bool:
    with dbapi.connect(service.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 42")
        return cur.fetchall() == [(42,)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=1000)
    parser.add_argument("--abandoned", type=int, default=10000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp), CONFIG) as service:
        with dbapi.connect(service.location, autocommit=True) as conn:
            for _ in range(100):
                ten_rows_and_close(conn)
            start_rss = service.rss_mb()
            started = time.monotonic()
            for _ in range(args.loops):
                ten_rows_and_close(conn)
            rows.append(("ADBC execute, fetchmany(10), close", args.loops,
                         time.monotonic() - started, service.alive and answers(service),
                         service.rss_mb()))
        with flight.connect(service.location) as client:
            started = time.monotonic()
            for _ in range(args.loops):
                raw_cancel_and_close(client)
            rows.append(("raw: DoGet cancelled after a batch, statement closed at once",
                         args.loops, time.monotonic() - started,
                         service.alive and answers(service), service.rss_mb()))
        samples = []
        with dbapi.connect(service.location, autocommit=True) as conn:
            started = time.monotonic()
            step = max(1, args.abandoned // 10)
            for i in range(1, args.abandoned + 1):
                ten_rows_and_close(conn)
                if i % step == 0:
                    samples.append(round(service.rss_mb()))
            rows.append((f"answers abandoned after 10 rows (RSS every {step}: {samples})",
                         args.abandoned, time.monotonic() - started,
                         service.alive and answers(service), service.rss_mb()))
    print(f"RSS after a warm-up of 100 abandoned answers: {start_rss:.0f} MB\n")
    print("| part | rounds | seconds | alive and answering | RSS after (MB) | growth (MB) |")
    print("|---|---|---|---|---|---|")
    for name, n, seconds, alive, rss in rows:
        print(f"| {name} | {n} | {seconds:.0f} | {alive} | {rss:.0f} | {rss - start_rss:+.0f} |")
    sys.exit(0 if all(r[3] for r in rows) and rows[-1][4] - start_rss < 50 else 1)


if __name__ == "__main__":
    main()
