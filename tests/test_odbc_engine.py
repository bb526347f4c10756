"""The odbc engine against a real PostgreSQL (psqlODBC) and SQLite (its ODBC driver)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

import gateway
from tests import sql_databases as db
from tests.hang_guard import HANG_GUARD
from tests.pg import find_bin_dir, free_port, start_cluster

pytestmark = pytest.mark.odbc


@pytest.fixture(scope="module")
def pg(postgres):
    name = db.new_pg_database(postgres)
    postgres.psql("CREATE TABLE t (a int, b text, f float8, ok bool); "
                  "INSERT INTO t VALUES (1, 'x', 0.1, true), (2, 'y', 0.2, false)", dbname=name)
    return postgres, name


def _answer(gw, sql, **kw):
    return gw.execute(sql, **kw).to_arrow().to_pylist()


# -- configuration and bad input -------------------------------------------------
@pytest.mark.parametrize("section", [{}, {"connection": "DRIVER={SQLite3}", "dsn": "x"}])
def test_connection_or_dsn_is_required(section):
    with gateway.connect({"engines": {"o": {"type": "odbc", **section}}}) as gw, \
            pytest.raises(gateway.ConfigError, match="not both and not neither"):
        gw.execute("SELECT 1")


def test_missing_driver_lists_the_installed_ones():
    section = {"type": "odbc", "connection": "DRIVER={No Such Driver};Database=x"}
    with gateway.connect({"engines": {"o": section}}) as gw, \
            pytest.raises(gateway.ConfigError) as info:
        gw.execute("SELECT 1")
    assert "not found" in str(info.value)
    assert "SQLite3" in str(info.value)  # the hint names the drivers that are there


@pytest.mark.postgres
def test_wrong_password_is_a_connection_error_without_the_password(postgres):
    section = {"type": "odbc", "connection": "DRIVER={PostgreSQL Unicode};SERVER=127.0.0.1;"
               f"PORT={postgres.port};DATABASE=postgres;UID=postgres;PWD=not-the-password"}
    with gateway.connect({"engines": {"o": section}}) as gw, \
            pytest.raises(gateway.EngineConnectionError) as info:
        gw.execute("SELECT 1")
    assert "password" in str(info.value).lower()
    assert "not-the-password" not in str(info.value)


def test_unreachable_host_fails_fast():
    section = {"type": "odbc", "login_timeout": 5,
               "connection": "DRIVER={PostgreSQL Unicode};SERVER=127.0.0.1;"
                             f"PORT={free_port()};DATABASE=postgres;UID=postgres;PWD=pw"}
    started = time.monotonic()
    with gateway.connect({"engines": {"o": section}}) as gw, \
            pytest.raises(gateway.EngineConnectionError, match="cannot"):
        gw.execute("SELECT 1")
    assert time.monotonic() - started < HANG_GUARD


@pytest.mark.postgres
def test_a_server_that_stops_mid_answer_does_not_hang():
    """psqlODBC reads the whole answer before the first batch; stopping the server after it
    either ends the stream normally or with a gateway error, never a hang."""
    cluster = start_cluster(find_bin_dir())
    outcome: list[BaseException | str] = []
    try:
        with gateway.connect({"engines": {"o": db.odbc_pg(cluster, "postgres")}}) as gw:
            reader = gw.execute("SELECT g FROM generate_series(1, 3000000) g").reader()
            reader.read_next_batch()

            def read_rest():
                try:
                    for _ in reader:
                        pass
                    outcome.append("finished")
                except BaseException as exc:
                    outcome.append(exc)

            cluster.stop()
            worker = threading.Thread(target=read_rest, daemon=True)
            worker.start()
            worker.join(60)
            assert not worker.is_alive(), "reading hung after the server stopped"
            with pytest.raises(gateway.GatewayError):
                gw.execute("SELECT 1").to_arrow()
    finally:
        cluster.stop()
    assert outcome == ["finished"] or isinstance(outcome[0], gateway.GatewayError), outcome


# -- queries -------------------------------------------------------------------
@pytest.mark.postgres
def test_psqlodbc_pitfalls_are_fixed(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        got = gw.execute("SELECT f, ok, now() AS at FROM t ORDER BY a").to_arrow()
    assert got.schema.field("f").type == pa.float64()
    assert got.column("f").to_pylist() == [0.1, 0.2]
    assert got.column("ok").to_pylist() == [True, False]
    assert got.schema.field("at").type == pa.timestamp("us", tz="UTC")


@pytest.mark.postgres
def test_parameters_text_and_typed(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        assert _answer(gw, "SELECT a FROM t WHERE b = ?", parameters=["y"]) == [{"a": 2}]
        assert _answer(gw, "SELECT b FROM t WHERE a = $1", parameters=[2]) == [{"b": "y"}]
        assert _answer(gw, "SELECT b FROM t WHERE a = @p1 OR ok = @p2 ORDER BY b",
                       parameters=[2, True]) == [{"b": "x"}, {"b": "y"}]


@pytest.mark.postgres
def test_statements_without_rows_report_the_count(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        gw.execute("CREATE TABLE w (a int)").to_arrow()
        result = gw.execute("INSERT INTO w SELECT g FROM generate_series(1, 5) g")
        assert result.to_arrow().num_rows == 0
        assert result.notes["update_count"] == 5
        assert _answer(gw, "SELECT count(*) AS n FROM w") == [{"n": 5}]


@pytest.mark.postgres
@pytest.mark.parametrize("parameters", [None, [1]], ids=["arrow-odbc", "pyodbc"])
def test_timeout_cancels_the_query(pg, parameters):
    postgres, name = pg
    section = db.odbc_pg(postgres, name, timeout=1)
    where = " WHERE 1 = ?" if parameters else ""
    with gateway.connect({"engines": {"o": section}}) as gw:
        started = time.monotonic()
        with pytest.raises(gateway.QueryTimeout):
            gw.execute(f"SELECT pg_sleep(30){where}", parameters=parameters).to_arrow()
        assert time.monotonic() - started < HANG_GUARD
        assert _answer(gw, "SELECT 1 AS one") == [{"one": 1}]


#: statements answered through pyodbc (a typed parameter) while two threads cancel at random
#: moments; prints how many answered and how many were cancelled, and each other error
RACING_CANCELS = """
import json, random, sys, threading, time
import gateway
section, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
with gateway.connect({"engines": {"o": section}}) as gw:
    gw.execute("SELECT 1").to_arrow()
    done = threading.Event()
    def hammer():
        while not done.is_set():
            time.sleep(random.random() * 0.003)
            gw.engine("o").cancel()
    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    answered = cancelled = 0
    for _ in range(rounds):
        try:
            gw.execute("SELECT x FROM generate_series(1, 50) x WHERE 1 = ?",
                       parameters=[1]).to_arrow()
            answered += 1
        except gateway.Cancelled:
            cancelled += 1
        except gateway.GatewayError as exc:
            print("error:", exc, file=sys.stderr)
    done.set()
    for t in threads:
        t.join()
print(answered, cancelled)
"""


@pytest.mark.postgres
def test_cancels_racing_statements_neither_crash_the_process_nor_fail_a_statement(pg):
    # an SQLCancel landing as pyodbc fetched the rows or closed the statement killed the
    # process (SIGSEGV), and one landing after the execute failed the statement with
    # "Function sequence error" instead of cancelling it
    postgres, name = pg
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", RACING_CANCELS,
                           json.dumps(db.odbc_pg(postgres, name)), "600"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "error:" not in done.stderr, done.stderr[-3000:]
    answered, cancelled = map(int, done.stdout.split())
    assert answered + cancelled == 600 and answered and cancelled


class _SlowSet(threading.Event):
    """An event whose ``set`` returns late, as when its thread is preempted right after."""

    def set(self):
        super().set()
        time.sleep(0.5)


class _Delegate:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _SlowConnection(_Delegate):
    """A pyodbc connection whose cursors return late from their execute, as when the
    thread is preempted right after the statement ran."""

    def cursor(self):
        cursor = _Delegate(self._inner.cursor())

        def execute(*args):
            done = cursor._inner.execute(*args)
            time.sleep(0.6)
            return done

        cursor.execute = execute
        return cursor


@pytest.mark.postgres
def test_a_late_cancel_is_the_next_statements_cancel_or_none(pg):
    # a cancel that set its flag, then lost the processor before it read the cursor,
    # saw the next statement clear the flag and then cancelled that statement's cursor
    # after its execute: the fetch failed with "Function sequence error" instead of the
    # statement ending Cancelled (seen in CI-style parallel runs)
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        gw.execute("SELECT 1 WHERE 1 = ?", parameters=[1]).to_arrow()
        con, = gw.engine("o")._idle
        real = con._py()
        con._py = lambda: _SlowConnection(real)
        con.stopped = _SlowSet()
        late = threading.Thread(target=con.cancel)
        late.start()
        time.sleep(0.1)  # the flag is set; the cancel has not read the cursor yet
        try:
            answer = gw.execute("SELECT 7 AS x WHERE 1 = ?", parameters=[1]).to_arrow()
            assert answer.to_pylist() == [{"x": 7}]
        except gateway.Cancelled:
            pass
        finally:
            late.join()


@pytest.mark.postgres
def test_cancel_a_typed_parameter_query_from_another_thread(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        gw.execute("SELECT 1").to_arrow()
        done = threading.Event()

        def keep_cancelling():  # until the statement is running and stops: a loaded machine
            while not done.wait(0.2):  # may take longer than any fixed delay to start it
                gw.engine("o").cancel()

        canceller = threading.Thread(target=keep_cancelling, daemon=True)
        canceller.start()
        started = time.monotonic()
        try:
            with pytest.raises(gateway.Cancelled):
                gw.execute("SELECT pg_sleep(30) WHERE 1 = ?", parameters=[1]).to_arrow()
        finally:
            done.set()
            canceller.join()  # not cancelling into the next test's statements
        assert time.monotonic() - started < HANG_GUARD


class _CountingConnection(_Delegate):
    """A pyodbc connection whose cursors note when each SQLCancel was sent; the first
    ``deaf`` of them do nothing, as a cancel landing before the execute began."""

    def __init__(self, inner, sent, deaf):
        super().__init__(inner)
        self._sent, self._deaf = sent, deaf

    def cursor(self):
        cursor = _Delegate(self._inner.cursor())

        def cancel():
            self._sent.append(time.monotonic())
            if len(self._sent) > self._deaf:
                cursor._inner.cancel()

        cursor.cancel = cancel
        return cursor


@pytest.mark.postgres
@pytest.mark.parametrize("deaf", [0, 1])
def test_a_statement_cancelled_many_times_gets_one_sqlcancel_a_second(pg, deaf):
    # unixODBC's SQLCancel frees the statement's diagnostic records under no lock: a second
    # one landing as the first one's cancelled execute posted its error corrupted the heap
    # (SIGABRT "corrupted size vs. prev_size", found on a fresh Debian 12 by the racing
    # test above). A first one that did nothing (deaf=1) is sent again a second later.
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        gw.execute("SELECT 1 WHERE 1 = ?", parameters=[1]).to_arrow()
        con, = gw.engine("o")._idle
        real, sent = con._py(), []
        con._py = lambda: _CountingConnection(real, sent, deaf)
        done = threading.Event()

        def keep_cancelling():
            while not done.wait(0.01):
                if con._cursor is not None:  # the statement is executing
                    gw.engine("o").cancel()

        canceller = threading.Thread(target=keep_cancelling, daemon=True)
        canceller.start()
        try:
            with pytest.raises(gateway.Cancelled):
                gw.execute("SELECT pg_sleep(30) WHERE 1 = ?", parameters=[1]).to_arrow()
        finally:
            done.set()
            canceller.join()
    assert len(sent) == 1 + deaf, sent
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(sent)), sent


@pytest.mark.postgres
def test_catalog_and_tables(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        engine = gw.engine("o")
        columns = {(c.table, c.column): c.type for c in engine.catalog() if c.table == "t"}
        assert [t.table for t in engine.tables(pattern="t")] == ["t"]
    assert columns == {("t", "a"): pa.int32(), ("t", "b"): pa.string(),
                       ("t", "f"): pa.float64(), ("t", "ok"): pa.bool_()}


def test_sqlite_dialect_and_transpile(tmp_path):
    path = tmp_path / "x.sqlite"
    section = db.odbc_sqlite(path, transpile_from="duckdb")
    with gateway.connect({"engines": {"o": section}}) as gw:
        engine = gw.engine("o")
        assert (engine.dialect, engine.rewriter.dialect) == ("duckdb", "sqlite")
        gw.execute("CREATE TABLE n (i INTEGER)").to_arrow()
        gw.execute("INSERT INTO n VALUES (?), (?)", parameters=[7, 2]).to_arrow()
        # DuckDB's / on integers is a double division; sqlglot writes a cast for SQLite
        assert _answer(gw, "SELECT i / 2 AS h FROM n ORDER BY i") == [{"h": 1.0}, {"h": 3.5}]


# -- sessions, prepared statements, per-query cancel ---------------------------------------
@pytest.mark.postgres
def test_a_session_refuses_state_it_cannot_keep(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw, \
            gw.session("o") as s:
        assert s.keeps == frozenset()
        with pytest.raises(gateway.Unsupported, match="would not persist"):
            s.execute("CREATE TEMP TABLE picks (id int)")
        assert s.execute("SELECT 1 AS one").to_arrow().to_pylist() == [{"one": 1}]


@pytest.mark.postgres
def test_prepared_statement_is_described_without_running(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw, \
            gw.session("o") as s:
        insert = s.prepare("INSERT INTO t (a, b) VALUES ($1, $2)")
        assert insert.schema.names == [] and insert.parameter_schema.names == ["$1", "$2"]
        lookup = s.prepare("SELECT f, ok FROM t WHERE a = ?")
        assert lookup.schema.field("f").type == pa.float64()
        assert lookup.schema.field("ok").type == pa.bool_()
        assert lookup.execute([1]).to_arrow().to_pylist() == [{"f": 0.1, "ok": True}]
        assert gw.execute("SELECT count(*) AS n FROM t").to_arrow().column(0)[0].as_py() == 2


@pytest.mark.postgres
def test_cancel_stops_that_query_only(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        other = gw.execute("SELECT a FROM t ORDER BY a")

        def cancel_the_slow_one():
            for q in gw.running():
                if "pg_sleep" in q.sql:
                    gw.cancel(q.query_id)

        threading.Timer(0.5, cancel_the_slow_one).start()
        started = time.monotonic()
        with pytest.raises(gateway.Cancelled):
            gw.execute("SELECT pg_sleep(30) WHERE 1 = ?", parameters=[1]).to_arrow()
        assert time.monotonic() - started < HANG_GUARD
        assert other.to_arrow().column("a").to_pylist() == [1, 2]
