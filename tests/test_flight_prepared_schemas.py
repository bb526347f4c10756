"""A prepared statement's answer schema is kept per statement text, engine, session and
user, so a client that prepares every statement (the ADBC driver) does not have each one
planned twice; any statement that may change a schema forgets them, and the pipeline's
checks run on every prepare all the same."""

from __future__ import annotations

import time
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gateway.flight import protobuf as M
from gateway.flight.schemas import changes_nothing
from gateway.flight.serve_config import hash_password
from tests.flight_support import CONFIG, serving

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
USERS = {
    "dave": {"password_hash": hash_password("dave-pw")},
    "rita": {"password_hash": hash_password("rita-pw"), "read_only": True},
    "carol": {"password_hash": hash_password("carol-pw"), "engines": ["scan"]},
}


@pytest.fixture(scope="module")
def server():
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def shared():
    with serving({**CONFIG, "serve": {"users": USERS}}) as server:
        yield server


def connect(server: Any, user: str | None = None, cookies: bool = True) -> Any:
    """An ADBC connection; with ``cookies``, in a session of its own on the service."""
    kwargs = {"username": user, "password": f"{user}-pw"} if user else {}
    return dbapi.connect(server.location, autocommit=True,
                         db_kwargs={**(COOKIES if cookies else {}), **kwargs})


def prepared_columns(client: flight.FlightClient, sql: str,
                     options: flight.FlightCallOptions | None = None) -> list[str]:
    """The column names CreatePreparedStatement answers for ``sql`` (the handle is closed)."""
    body = M.pack(M.ActionCreatePreparedStatementRequest(query=sql))
    result = M.unpack(M.ActionCreatePreparedStatementResult, next(iter(client.do_action(
        flight.Action("CreatePreparedStatement", body), options))).body.to_pybytes())
    close = M.pack(M.ActionClosePreparedStatementRequest(
        prepared_statement_handle=result.prepared_statement_handle))
    list(client.do_action(flight.Action("ClosePreparedStatement", close), options))
    if not result.dataset_schema:
        return []
    return pa.ipc.read_schema(pa.py_buffer(result.dataset_schema)).names


def test_preparing_a_statement_again_plans_nothing_until_a_write_runs(server):
    gw = server.backend.gw
    gw.execute("CREATE OR REPLACE TABLE shape AS SELECT 1 AS a", "duck").to_arrow()
    with flight.connect(server.location) as client:
        assert prepared_columns(client, "SELECT * FROM shape") == ["a"]
        # changed behind the service's back (in process): the kept schema answers, which
        # shows that the second prepare planned nothing
        gw.execute("CREATE OR REPLACE TABLE shape AS SELECT 1 AS a, 2 AS b", "duck").to_arrow()
        assert prepared_columns(client, "SELECT * FROM shape") == ["a"]
        # a statement through the service that may change schemas forgets every one kept
        with connect(server) as conn, conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE TABLE other_shape AS SELECT 1 AS z")
        assert prepared_columns(client, "SELECT * FROM shape") == ["a", "b"]


def test_a_kept_schema_expires_so_a_change_the_service_did_not_see_shows(server):
    gw, schemas = server.backend.gw, server.backend.schemas
    gw.execute("CREATE OR REPLACE TABLE elsewhere AS SELECT 1 AS a", "duck").to_arrow()
    ttl, schemas.ttl = schemas.ttl, 0.3
    try:
        with flight.connect(server.location) as client:
            assert prepared_columns(client, "SELECT * FROM elsewhere") == ["a"]
            gw.execute("CREATE OR REPLACE TABLE elsewhere AS SELECT 1 AS a, 2 AS b",
                       "duck").to_arrow()  # as another process writing the database would
            assert prepared_columns(client, "SELECT * FROM elsewhere") == ["a"]
            time.sleep(0.4)
            assert prepared_columns(client, "SELECT * FROM elsewhere") == ["a", "b"]
    finally:
        schemas.ttl = ttl


def test_a_schema_changed_by_ddl_is_seen_by_the_next_prepare(server):
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE grows (a INTEGER)")
        assert cur.adbc_execute_schema("SELECT * FROM grows").names == ["a"]
        cur.execute("SELECT * FROM grows")
        assert cur.description[0][0] == "a"
        cur.execute("ALTER TABLE grows ADD COLUMN b VARCHAR")
        assert cur.adbc_execute_schema("SELECT * FROM grows").names == ["a", "b"]
        cur.execute("SELECT * FROM grows")
        assert [d[0] for d in cur.description] == ["a", "b"]


def test_a_write_through_a_prepared_statement_is_seen_by_the_next_prepare(server):
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE swapped AS SELECT 1 AS a")
        assert cur.adbc_execute_schema("SELECT * FROM swapped").names == ["a"]
        cur.execute("CREATE OR REPLACE TABLE swapped AS SELECT 'x' AS c, 2 AS d")
        assert cur.adbc_execute_schema("SELECT * FROM swapped").names == ["c", "d"]


def test_a_temp_table_of_one_session_does_not_answer_for_another(server):
    sql = "SELECT * FROM mine"
    with connect(server) as first, first.cursor() as cur, \
            connect(server) as second, second.cursor() as other:
        cur.execute("CREATE TEMP TABLE mine AS SELECT 1 AS a")
        assert cur.adbc_execute_schema(sql).names == ["a"]
        with pytest.raises(dbapi.Error, match="mine"):
            other.adbc_execute_schema(sql)


def test_a_kept_schema_never_lets_a_statement_skip_the_users_checks(shared):
    # without cookies no statement has a session: only the user tells the schemas apart
    with connect(shared, "dave", cookies=False) as conn, conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE payroll AS SELECT 'ann' AS name, 100 AS salary")
        assert cur.adbc_execute_schema("SELECT * FROM payroll").names == ["name", "salary"]
    with flight.connect(shared.location) as client:  # prepared, never run: nothing forgets it
        options = flight.FlightCallOptions(
            headers=[client.authenticate_basic_token("dave", "dave-pw")])
        assert prepared_columns(client, "CREATE TABLE copy AS SELECT 1 AS a", options) == []
    with connect(shared, "carol", cookies=False) as conn, conn.cursor() as cur:  # may not use duck
        with pytest.raises(dbapi.Error, match="no table named 'payroll'"):
            cur.adbc_execute_schema("SELECT * FROM payroll")
        with pytest.raises(dbapi.Error, match="no table named 'payroll'"):
            cur.execute("SELECT * FROM payroll")
    with connect(shared, "rita", cookies=False) as conn, conn.cursor() as cur:  # read-only
        with pytest.raises(dbapi.Error, match="read-only"):
            cur.adbc_execute_schema("CREATE TABLE copy AS SELECT 1 AS a")
        with pytest.raises(dbapi.Error, match="read-only"):
            cur.execute("CREATE TABLE copy AS SELECT 1 AS a")


@pytest.mark.parametrize("sql, surely_read", [
    ("SELECT 1", True), ("  -- why\n from t", True), ("(SELECT 1)", True),
    ("SELECT 1;", True), ("DESCRIBE t", True),
    ("SELECT 1; DROP TABLE t", False), ("WITH x AS (SELECT 1) SELECT * FROM x", False),
    ("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", False), ("PRAGMA threads = 2", False),
    ("SET search_path = 'x'", False), ("USE other", False), ("ROLLBACK", False),
    ("ALTER TABLE t ADD COLUMN b INT", False), ("INSERT INTO t VALUES (1)", False),
])
def test_only_statements_that_surely_change_nothing_keep_the_schemas(sql, surely_read):
    assert changes_nothing(sql) is surely_read


def test_a_statement_without_a_session_runs_on_a_lent_connection_that_keeps_nothing(server):
    # no cookie: each statement is prepared in a one-shot session, which takes an idle
    # cursor (set up already) rather than opening one, and gives back only an unchanged one
    with connect(server, cookies=False) as conn:
        ids = []
        for _ in range(6):
            with conn.cursor() as cur:
                cur.execute("SELECT current_connection_id() AS c")
                ids.extend(row[0] for row in cur.fetchall())  # read to its end: nothing runs
        assert len(set(ids)) == 1, ids
        with conn.cursor() as cur, pytest.raises(dbapi.ProgrammingError,
                                                 match="needs a session"):
            cur.execute("SET VARIABLE lent = 42")  # it would be forgotten: refused
        with conn.cursor() as cur:
            cur.execute("SELECT getvariable('lent') AS v")
            assert cur.fetchone()[0] is None


def test_a_statement_prepared_again_is_not_parsed_again_unless_it_is_long():
    from gateway.sql import kinds

    sql = "SELECT $1 + ? AS counted_once"
    assert kinds.placeholder_count(sql, "duckdb") == 2
    before = kinds._kept_placeholder_count.cache_info()
    assert kinds.placeholder_count(sql, "duckdb") == 2
    assert kinds._kept_placeholder_count.cache_info().hits == before.hits + 1
    long = "SELECT ? AS a, '" + "x" * kinds._COUNT_KEPT_CHARS + "' AS b"
    assert kinds.placeholder_count(long, "duckdb") == 1
    assert kinds._kept_placeholder_count.cache_info().currsize == before.currsize
