"""The adbc engine in front of ``arrowgate serve``: a gateway in front of a gateway.

The conformance suite (engine ``adbc_flightsql``) and the shadow test
(tests/test_adbc_shadow.py) run the corpus through it; these are what a
client engine needs beyond answers: sessions that keep their state, prepared
statements, the served engine to use, errors that keep their kind, and a
cancelled query that stops on the server too.
"""

from __future__ import annotations

import datetime
import time

import pyarrow as pa
import pytest

import gateway
from tests import sql_databases as db
from tests.flight_support import CONFIG, serving
from tests.hang_guard import HANG_GUARD

pytestmark = pytest.mark.adbc


@pytest.fixture(scope="module")
def server():
    with serving() as server:
        yield server


@pytest.fixture
def gw(server):
    with gateway.connect({"engines": {"front": db.adbc_flight(server.location)}}) as gw:
        yield gw


def _rows(runner, sql, *args):
    return runner.execute(sql, *args).to_arrow().to_pylist()


def test_a_session_keeps_temp_tables_variables_and_transactions(gw):
    with gw.session("front") as one, gw.session("front") as two:
        one.execute("CREATE TEMP TABLE mine AS SELECT 1 AS a").to_arrow()
        two.execute("CREATE TEMP TABLE mine AS SELECT 2 AS a").to_arrow()
        one.execute("SET VARIABLE pick = 42").to_arrow()
        assert _rows(one, "SELECT a FROM mine") == [{"a": 1}]
        assert _rows(two, "SELECT a FROM mine") == [{"a": 2}]
        assert _rows(one, "SELECT getvariable('pick') AS v") == [{"v": 42}]
        one.execute("CREATE TABLE kept (a INTEGER)").to_arrow()
        one.execute("BEGIN").to_arrow()
        one.execute("INSERT INTO kept VALUES (1)").to_arrow()
        assert _rows(one, "SELECT count(*) AS n FROM kept") == [{"n": 1}]
        one.execute("ROLLBACK").to_arrow()
        assert _rows(one, "SELECT count(*) AS n FROM kept") == [{"n": 0}]
    with pytest.raises(gateway.QueryError, match="mine"):
        gw.execute("SELECT a FROM mine").to_arrow()


def test_prepared_statements_insert_many_rows_and_select_with_parameters(gw):
    with gw.session("front") as s:
        s.execute("CREATE TABLE readings (id INTEGER, name VARCHAR, x DOUBLE, seen TIMESTAMP)"
                  ).to_arrow()
        insert = s.prepare("INSERT INTO readings VALUES (?, ?, ?, ?)")
        at = datetime.datetime(2026, 11, 30, 12, 0)
        insert.execute([1, "one", 1.5, at]).to_arrow()
        insert.execute(pa.table({"id": [2, 3], "name": ["two", "three"], "x": [2.5, 3.5],
                                 "seen": [at, at]})).to_arrow()
        lookup = s.prepare("SELECT id, name FROM readings WHERE id >= ? ORDER BY id")
        assert lookup.schema.names == ["id", "name"]
        assert len(lookup.parameter_schema) == 1
        assert _rows(lookup, [2]) == [{"id": 2, "name": "two"}, {"id": 3, "name": "three"}]
        assert _rows(s, "SELECT x, seen FROM readings WHERE name = ? AND x > ?",
                     ["three", 3.0]) == [{"x": 3.5, "seen": at}]


def test_the_served_engine_is_chosen_with_the_connection_catalog(server):
    server.backend.gw.execute("CREATE OR REPLACE TABLE only_other AS SELECT 7 AS seven",
                              engine="other").to_arrow()
    section = db.adbc_flight(server.location,
                             conn_kwargs={"adbc.connection.catalog": "other"})
    with gateway.connect({"engines": {"front": section}}) as gw:
        held = gw.execute("SELECT * FROM range(100000) t(i)")  # so the next needs a second
        assert _rows(gw, "SELECT seven FROM only_other") == [{"seven": 7}]
        assert held.to_arrow().num_rows == 100000
    assert set(CONFIG["engines"]) >= {"duck", "other"}


def test_an_error_keeps_its_kind_and_not_the_servers_traceback(gw):
    with pytest.raises(gateway.QueryError) as info:
        gw.execute("SELECT no_such_column FROM trips").to_arrow()
    assert info.value.kind == "unknown_object"
    assert "no_such_column" in str(info.value)
    assert "Traceback" not in str(info.value)


def test_bulk_ingest_is_unsupported_and_says_so(gw):
    with pytest.raises(gateway.Unsupported, match="no bulk ingest"):
        gw.engine("front").ingest("loaded", pa.table({"a": [1]}))


def test_a_timeout_stops_the_query_on_the_server_too(server):
    section = db.adbc_flight(server.location, timeout=1)
    with gateway.connect({"engines": {"front": section}}) as gw:
        with pytest.raises(gateway.QueryTimeout):
            gw.execute("SELECT count(*) FROM range(100000000000) t(i)").to_arrow()
        deadline = time.monotonic() + HANG_GUARD
        while server.backend.gw.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.backend.gw.running() == []
        assert _rows(gw, "SELECT 1 AS one") == [{"one": 1}]
