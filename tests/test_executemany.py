"""``executemany``: many rows of parameters bound in one engine call (issue 36).

Row by row, 50,000 rows of three integers took about 2.6 ms a row through the
service, past a two-minute timeout. An ``INSERT ... VALUES (row)`` runs now as
one ``INSERT ... SELECT`` over the rows (gateway_duckdb.batch); other
statements still run row by row.
"""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as dbapi
import pytest

import gateway
from tests.flight_support import serving

CONFIG = {"default_engine": "duck", "engines": {"duck": {"type": "duckdb"}}}


@pytest.fixture(scope="module")
def server():
    with serving(CONFIG) as server:
        yield server


def test_many_rows_arrive_whole_and_in_order(server):
    rows = [(i, i * 2, -i) for i in range(50_000)]
    with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE many (a INTEGER, b INTEGER, c INTEGER)")
        cur.executemany("INSERT INTO many VALUES (?, ?, ?)", rows)
        cur.execute("SELECT a, b, c FROM many ORDER BY rowid")
        assert cur.fetchall() == rows


def test_expressions_over_parameters_and_numbered_placeholders(server):
    with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE shaped (a INTEGER, s VARCHAR)")
        cur.executemany("INSERT INTO shaped (s, a) VALUES (upper($2), $1 + 1)",
                        [(1, "x"), (2, "y")])
        cur.execute("SELECT a, s FROM shaped ORDER BY a")
        assert cur.fetchall() == [(2, "X"), (3, "Y")]


def test_one_failing_row_fails_the_batch_whole(server):
    """One statement over every row is one transaction: a row that breaks a constraint
    leaves none of the others behind (row by row, the rows before it stayed)."""
    with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE keyed (a INTEGER PRIMARY KEY)")
        with pytest.raises(dbapi.Error, match=r"(?i)constraint|duplicate"):
            cur.executemany("INSERT INTO keyed VALUES (?)", [(1,), (2,), (2,)])
        cur.execute("SELECT count(*) FROM keyed")
        assert cur.fetchall() == [(0,)]


def test_what_cannot_be_one_statement_still_runs_row_by_row():
    import pyarrow as pa

    with gateway.connect(CONFIG) as gw, gw.session("duck") as session:
        session.execute("CREATE TABLE two (a INTEGER)").to_arrow()
        with session.prepare("INSERT INTO two VALUES (?), (? * 10)") as prepared:
            answer = prepared.execute(pa.table({"x": [1, 2], "y": [3, 4]}))
            assert answer.update_count == 4
        assert session.execute("SELECT a FROM two ORDER BY a").to_arrow() \
            .column(0).to_pylist() == [1, 2, 30, 40]
