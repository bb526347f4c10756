"""Users who share `arrowgate serve` are kept apart, over a real ADBC Flight SQL client:
engines through fallbacks, settings, limits counted before planning, cancels that stop
the work, clean errors and throttled logins."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.flight as flight
import pytest

from gateway.flight.serve_config import hash_password
from tests.flight_support import CONFIG, action, serving
from tests.hang_guard import HANG_GUARD

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
USERS = {
    "carol": {"password_hash": hash_password("carol-pw"), "engines": ["scan"]},
    "dave": {"password_hash": hash_password("dave-pw")},
    "erin": {"password_hash": hash_password("erin-pw")},
}
HEAVY = "SELECT count(*) FROM range(3000000000) r(i) WHERE i % 7 = 3"


def _config(**serve: Any) -> dict[str, Any]:
    return {**CONFIG, "serve": {"users": USERS, **serve}}


@pytest.fixture(scope="module")
def server():
    with serving(_config()) as server:
        with connect(server, "dave") as conn, conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE TABLE payroll AS SELECT 'ann' AS name, 100 AS salary")
            cur.fetchall()
        yield server


def connect(server: Any, user: str, **kwargs: Any) -> Any:
    return dbapi.connect(server.location, autocommit=True, db_kwargs={
        "username": user, "password": f"{user}-pw", **COOKIES, **kwargs})


def _fails(cur: Any, sql: str) -> str:
    with pytest.raises(dbapi.Error) as caught:
        cur.execute(sql)
        cur.fetchall()
    return str(caught.value)


def test_a_user_of_the_csv_engine_reaches_no_other_through_its_fallback(server):
    with connect(server, "carol") as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM trips")
        assert cur.fetchone()[0] > 0
        for sql in ["SELECT (SELECT max(salary) FROM payroll) AS m",
                    "SELECT * FROM query('SELECT * FROM payroll')",
                    "SELECT * FROM duckdb_tables()",
                    "INSERT INTO payroll VALUES ('eve', 1)",
                    "DROP TABLE payroll"]:
            message = _fails(cur, sql)
            assert "'duck'" in message and "may use" in message, message
    with connect(server, "dave") as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM payroll")
        assert cur.fetchall() == [("ann", 100)]


def test_one_clients_settings_never_change_another_clients_answers(server):
    with connect(server, "dave") as mine, mine.cursor() as cur, \
            connect(server, "erin") as theirs, theirs.cursor() as other:
        assert "every user" in _fails(cur, "SET GLOBAL integer_division = true")
        cur.execute("SET default_order = 'DESC'")
        cur.fetchall()
        cur.execute("SET integer_division = true")
        cur.fetchall()
        other.execute("SELECT 7 / 2 AS x, (SELECT list(i ORDER BY i) FROM range(3) r(i)) AS l")
        assert other.fetchall() == [(3.5, [0, 1, 2])]
        cur.execute("SELECT 7 / 2 AS x")
        assert cur.fetchall() == [(3,)]
        assert "locally" in _fails(cur, "SET memory_limit = '20MB'")


def test_no_user_reads_anothers_statements_or_redefines_what_they_read(server):
    """DuckDB keeps its log, the sources' views and macros per database: enable_logging()
    from one client logged every client's statements, which duckdb_logs showed it; a view
    made in main stood for a source, and a macro named lower replaced the built-in, for
    every other client."""
    with connect(server, "dave") as mine, mine.cursor() as cur, \
            connect(server, "erin") as theirs, theirs.cursor() as other:
        for sql in ["SELECT * FROM enable_logging()", "CALL enable_logging()",
                    "SELECT message FROM duckdb_logs",
                    "CREATE OR REPLACE VIEW _arrowgate.main.trips AS SELECT 1 AS x",
                    "CREATE VIEW main.trips AS SELECT 1 AS x",
                    "CREATE MACRO lower(x) AS 'pwned'"]:
            assert "UNAUTHORIZED" in _fails(cur, sql), sql
        other.execute("SELECT 'erin-private' AS s, lower('A') AS l, "
                      "(SELECT count(*) FROM trips) > 1 AS whole")
        assert other.fetchall() == [("erin-private", "a", True)]
        cur.execute("CREATE TEMP MACRO twice(x) AS 2 * x")  # the session's own
        cur.fetchall()
        cur.execute("SELECT twice(2), current_setting('enable_logging')")
        assert cur.fetchall() == [(4, False)]


def _cpu_seconds() -> float:
    return time.process_time()


def test_a_cancelled_query_stops_computing_within_a_second(server):
    """The ADBC driver's cancel of a query still being planned and computed (a blocking
    aggregate inside GetFlightInfo): the server's CPU for it stops."""
    with connect(server, "dave") as conn, conn.cursor() as cur:
        failed: list[BaseException] = []

        def run() -> None:
            try:
                cur.execute(HEAVY)
                cur.fetchall()
            except BaseException as exc:  # the cancel's error, handed to the test
                failed.append(exc)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        deadline = time.monotonic() + HANG_GUARD
        while not server.backend.running() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        cur.adbc_cancel()
        worker.join(10)
        assert failed, "the query was not stopped"
        # the server's CPU falls to idle: under 0.3 s of a core in a second (the query kept
        # a core busy), however long the cancel takes to reach the engine on this machine
        deadline = time.monotonic() + HANG_GUARD
        while True:
            before = _cpu_seconds()
            time.sleep(1.0)
            if _cpu_seconds() - before < 0.3:
                break
            assert time.monotonic() < deadline, "the cancelled query kept computing"
        assert server.backend.running() == []


def test_running_queries_count_from_admission_and_max_queries_holds():
    with serving(_config(max_queries=2)) as server:
        conns = [connect(server, "dave") for _ in range(2)]
        threads = []
        try:
            for conn in conns:
                def run(conn: Any = conn) -> None:
                    try:
                        with conn.cursor() as cur:
                            cur.execute(HEAVY)
                            cur.fetchall()
                    except dbapi.Error:
                        pass

                threads.append(threading.Thread(target=run, daemon=True))
                threads[-1].start()
            deadline = time.monotonic() + HANG_GUARD
            while len(server.backend.running()) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            client = flight.connect(server.location)
            options = flight.FlightCallOptions(
                headers=[client.authenticate_basic_token("erin", "erin-pw")])
            assert action(client, "health", options=options)["running_queries"] == 2
            with connect(server, "erin") as conn, conn.cursor() as cur:
                assert "limit of 2 queries" in _fails(cur, "SELECT 1")
        finally:
            for q in server.backend.running():
                server.backend.gw.cancel(q.query_id)
            for thread in threads:
                thread.join(10)
            for conn in conns:
                conn.close()


def test_errors_sent_to_clients_carry_no_traceback_or_server_path(server):
    with connect(server, "dave") as conn, conn.cursor() as cur:
        message = _fails(cur, "SELEC 1")
    assert "Traceback" not in message
    assert "/gateway/" not in message and ".py" not in message


def test_a_dead_clients_transaction_is_rolled_back_after_transaction_idle():
    with serving(_config(transaction_idle=0.5)) as server:
        with connect(server, "dave") as conn, conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE TABLE ledger (a INTEGER)")
            cur.fetchall()
        dead = connect(server, "dave")
        cur = dead.cursor()
        cur.execute("BEGIN")
        cur.fetchall()
        cur.execute("INSERT INTO ledger VALUES (1)")
        cur.fetchall()
        # the client dies without a word: its session holds the transaction
        time.sleep(2.0)
        with connect(server, "erin") as conn, conn.cursor() as other:
            other.execute("INSERT INTO ledger VALUES (2)")  # no "Conflict on update"
            other.fetchall()
            other.execute("SELECT a FROM ledger ORDER BY a")
            assert other.fetchall() == [(2,)]
        with contextlib.suppress(dbapi.Error):
            cur.close()
            dead.close()


def test_the_engines_action_lists_only_the_users_engines(server):
    client = flight.connect(server.location)
    options = flight.FlightCallOptions(
        headers=[client.authenticate_basic_token("carol", "carol-pw")])
    listed = [e["name"] for e in action(client, "engines", options=options)]
    assert listed == ["scan"]
    assert action(client, "running-queries", options=options) == []


def test_the_shadow_summary_quotes_no_other_users_statements(tmp_path):
    config = {**_config(), "shadow": {"primary": "duck", "reference": "other",
                                      "store": str(tmp_path / "shadow")}}
    config["serve"]["users"] = {**USERS, "dave": {**USERS["dave"]}}
    with serving(config) as server:
        with connect(server, "dave") as conn, conn.cursor() as cur:
            cur.execute("SELECT 'dave-private-literal' AS s")
            cur.fetchall()
        server.backend.gw.close()  # the store is flushed when the gateway closes
        client = flight.connect(server.location)
        options = flight.FlightCallOptions(
            headers=[client.authenticate_basic_token("erin", "erin-pw")])
        summary = action(client, "shadow-summary", options=options)
    assert summary["records"] >= 1
    assert "dave-private-literal" not in str(summary)


def test_a_statement_past_max_statement_bytes_is_refused_before_any_engine_sees_it():
    values = ",".join(str(i) for i in range(200_000))
    with serving(_config(max_statement_bytes=65536)) as server, \
            connect(server, "dave") as conn, conn.cursor() as cur:
        message = _fails(cur, f"SELECT count(*) FROM range(10) r(i) WHERE i IN ({values})")
        assert "max_statement_bytes" in message
        assert server.backend.running() == []


def test_query_memory_caps_each_statement_and_no_user_lifts_it():
    with serving(_config(query_memory="32MB")) as server, \
            connect(server, "dave") as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('operator_memory_limit') AS m")
        assert cur.fetchall() == [("30.5 MiB",)]
        assert "fixed by the server" in _fails(cur, "SET operator_memory_limit = '10GB'")
        assert "fixed by the server" in _fails(cur, "RESET operator_memory_limit")
        cur.execute("SELECT count(*) FROM (SELECT i::VARCHAR || repeat('x', 40) AS s "
                    "FROM range(2000000) r(i) ORDER BY s DESC)")  # spills under the cap
        assert cur.fetchall() == [(2000000,)]


def test_query_memory_on_a_duckdb_without_the_setting_is_a_configuration_error():
    from gateway.errors import ConfigError

    config = {**_config(query_memory="32MB"),
              "engines": {**CONFIG["engines"], "old": {"type": "duckdb", "version": "1.5.5"}}}
    with pytest.raises(ConfigError, match=r"DuckDB 2\.0"), serving(config):
        pass


def test_an_engine_error_naming_a_server_file_keeps_only_its_name(tmp_path):
    """DuckDB's CSV errors name the file they read (``file = /srv/.../bad.csv``): the
    server's folders reached every client (issue 36)."""
    folder = tmp_path / "server-only-folder"
    folder.mkdir()
    (folder / "bad.csv").write_text("a,b\n1,2\n3,x\n")
    config = {"default_engine": "duck", "engines": {"duck": {"type": "duckdb"}},
              "sources": {"bad": {"path": str(folder / "bad.csv"),
                                  "columns": {"a": "INTEGER", "b": "INTEGER"}}}}
    with serving(config) as server, \
            dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        message = _fails(cur, "SELECT * FROM bad")
    assert "Could not convert" in message and "bad.csv" in message
    assert "server-only-folder" not in message and str(tmp_path) not in message
