"""The statement pipeline (gateway/statement.py): every statement passes the same checks,
whoever sends it and whichever engine answers it."""

from __future__ import annotations

import gc
import logging
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gateway
from gateway.errors import ConfigError, GatewayError
from gateway.statement import Principal
from tests.conftest import DATA
from tests.hang_guard import HANG_GUARD

CONFIG: dict[str, Any] = {
    "default_engine": "duck",
    "engines": {"duck": {"type": "duckdb"},
                "scan": {"type": "csv", "fallback": "duck"}},
    "sources": {"trips": {"path": str(DATA / "trips.csv")}},
}
SCAN_ONLY = Principal("carol", engines=frozenset({"scan"}), shared=True)
SHARED = Principal("dave", shared=True)


@pytest.fixture
def gw() -> Iterator[gateway.Gateway]:
    with gateway.connect(CONFIG) as gw:
        gw.execute("CREATE TABLE payroll AS SELECT 'ann' AS name, 100 AS salary",
                   engine="duck").to_arrow()
        yield gw


def _denied(gw: gateway.Gateway, sql: str, principal: Principal, engine: str = "scan",
            **kwargs: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        gw.execute(sql, engine=engine, principal=principal, **kwargs).to_arrow()
    assert caught.value.kind == "permission", caught.value
    return caught.value


# -- permissions follow the engine that answers ----------------------------------------
@pytest.mark.parametrize("sql", [
    "SELECT (SELECT max(salary) FROM payroll) AS m",
    "WITH p AS (SELECT * FROM payroll) SELECT * FROM p",
    "SELECT t.cab_type, p.salary FROM trips t JOIN payroll p ON true LIMIT 1",
    "SELECT * FROM query_table('payroll')",
    "SELECT * FROM query('SELECT * FROM payroll')",
    "SELECT * FROM duckdb_tables()",
    "DESCRIBE payroll",
    "SELECT * FROM pragma_table_info('payroll')",
])
def test_a_fallback_never_reads_an_engine_its_user_may_not_use(gw, sql):
    error = _denied(gw, sql, SCAN_ONLY)
    assert "'duck'" in str(error)


@pytest.mark.parametrize("sql", [
    "INSERT INTO payroll VALUES ('eve', 1)",
    "UPDATE payroll SET salary = 0",
    "DELETE FROM payroll",
    "DROP TABLE payroll",
    "CREATE TABLE stolen AS SELECT 1 AS x",
])
def test_a_fallback_never_writes_an_engine_its_user_may_not_use(gw, sql):
    _denied(gw, sql, SCAN_ONLY)
    rows = gw.execute("SELECT * FROM payroll", engine="duck").to_arrow().to_pylist()
    assert rows == [{"name": "ann", "salary": 100}]
    names = gw.execute("SELECT table_name FROM duckdb_tables()", engine="duck").to_arrow()
    assert names.column(0).to_pylist() == ["payroll"]


def test_a_user_of_both_engines_still_gets_the_fallback_answer(gw):
    both = Principal("bob", engines=frozenset({"scan", "duck"}), shared=True)
    result = gw.execute("SELECT (SELECT max(salary) FROM payroll) AS m", engine="scan",
                        principal=both)
    assert result.to_arrow().to_pylist() == [{"m": 100}]
    assert result.notes["answered_by"] == "duck"


def test_a_read_only_user_cannot_write_through_a_fallback(gw):
    reader = Principal("rita", read_only=True, shared=True)
    _denied(gw, "INSERT INTO payroll VALUES ('eve', 1)", reader)
    _denied(gw, "INSERT INTO payroll VALUES ('eve', 1)", reader, engine="duck")


def test_a_session_and_a_prepared_statement_take_the_same_checks(gw):
    with pytest.raises(GatewayError) as caught:
        gw.session("duck", principal=SCAN_ONLY)
    assert caught.value.kind == "permission"
    with gw.session("scan", principal=SCAN_ONLY) as session:
        with pytest.raises(GatewayError) as caught:
            session.execute("SELECT (SELECT max(salary) FROM payroll) AS m").to_arrow()
        assert caught.value.kind == "permission"
    reader = Principal("rita", read_only=True, shared=True)
    with gw.session("duck", principal=reader) as session:
        with pytest.raises(GatewayError) as caught:
            session.prepare("DELETE FROM payroll WHERE salary = ?")
        assert caught.value.kind == "permission"


def test_a_shadow_reference_the_user_may_not_use_is_refused(gw):
    _denied(gw, "SELECT count(*) FROM trips", SCAN_ONLY, shadow="duck")


# -- settings stay in the session -----------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "SET GLOBAL integer_division = true",
    "RESET GLOBAL default_order",
    "PRAGMA threads = 1",
    "PRAGMA enable_profiling",
    "SET threads = 1; SELECT 1",
])
def test_settings_of_the_whole_database_are_refused_to_shared_users(gw, sql):
    _denied(gw, sql, SHARED, engine="duck")


@pytest.mark.parametrize("sql", [
    "SET enable_profiling = 'json'",
    "SET SESSION enable_profiling = 'query_tree'",
    "SET LOCAL profiling_output = 'plans.json'",
    "set Enable_Progress_Bar TO true",
    "SET enable_progress_bar_print = true",
    "SET profiling_output = 0",  # not a switch: a file named 0
    "SET progress_bar_time = 0",
])
def test_settings_that_make_the_server_print_statements_are_refused_to_shared_users(
        gw, sql, capfd):
    # DuckDB's profiler, even in one session, prints each statement's text and plan (with
    # its literals) on the server's standard output, the service's log
    with gw.session("duck", principal=SHARED) as session:
        with pytest.raises(GatewayError) as caught:
            session.execute(sql).to_arrow()
        assert caught.value.kind == "permission" and "shared server" in str(caught.value)
        session.execute("SELECT 'a literal of mine' AS x").to_arrow()
        session.execute("SET enable_progress_bar = false").to_arrow()  # off is harmless
    assert "a literal of mine" not in capfd.readouterr().out


@pytest.mark.parametrize("sql", [
    "SET max_streaming_buffer_size = '100GB'",  # a stalled client would hold it all
    "SET SESSION streaming_buffer_size = '100GB'",
    "SET current_dialect = 'postgres'",  # the checks read DuckDB's SQL
])
def test_settings_the_shared_server_owns_are_refused_to_shared_users(gw, sql):
    assert "server's own" in str(_denied(gw, sql, SHARED, engine="duck"))
    gw.execute("SET max_streaming_buffer_size = '64MB'", engine="duck").to_arrow()  # local: ok


def test_a_shared_users_setting_stays_in_their_session(gw):
    gw.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)", engine="duck").to_arrow()
    with gw.session("duck", principal=SHARED) as mine, \
            gw.session("duck", principal=Principal("erin", shared=True)) as theirs:
        mine.execute("SET default_order = 'DESC'").to_arrow()
        mine.execute("SET integer_division = true").to_arrow()
        ordered = "SELECT i FROM t ORDER BY i"
        assert mine.execute(ordered).to_arrow().column(0).to_pylist() == [2, 1, 0]
        assert theirs.execute(ordered).to_arrow().column(0).to_pylist() == [0, 1, 2]
        assert theirs.execute("SELECT 7 / 2 AS x").to_arrow().to_pylist() == [{"x": 3.5}]
        assert gw.execute(ordered, engine="duck").to_arrow().column(0).to_pylist() == [0, 1, 2]
        before = gw.execute("SELECT current_setting('memory_limit') AS m",
                            engine="duck").to_arrow()
        with pytest.raises(GatewayError, match="locally"):
            mine.execute("SET memory_limit = '20MB'").to_arrow()
        after = gw.execute("SELECT current_setting('memory_limit') AS m",
                           engine="duck").to_arrow()
        assert after.equals(before)
        mine.execute("SET VARIABLE who = 'me'").to_arrow()
        assert mine.execute("SELECT getvariable('who') AS w").to_arrow().to_pylist() == \
            [{"w": "me"}]


def test_the_process_own_user_keeps_full_control(gw):
    gw.execute("SET GLOBAL default_order = 'DESC'", engine="duck").to_arrow()
    answer = gw.execute("SELECT i FROM range(3) r(i) ORDER BY i", engine="duck").to_arrow()
    assert answer.column(0).to_pylist() == [2, 1, 0]


# -- credentials go nowhere else ------------------------------------------------------------
class PasswordListener:
    """A loopback 'PostgreSQL server' that asks for a cleartext password and keeps what
    it is sent."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    self._talk(conn)
                except OSError:
                    pass

    def _talk(self, conn: socket.socket) -> None:
        while True:
            head = conn.recv(8)
            if len(head) < 8:
                return
            length, code = struct.unpack("!ii", head)
            if code == 80877103:  # SSLRequest
                conn.sendall(b"N")
                continue
            conn.recv(length - 8)  # the startup message's parameters
            conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
            self.received += conn.recv(4096)
            return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.mark.postgres
def test_an_attach_to_another_server_is_never_offered_the_catalog_password(postgres, tmp_path):
    pytest.importorskip("duckdb")
    from tests.lakes import pg_lake

    section = pg_lake(postgres, tmp_path)
    assert f"password={postgres.password}" in section["catalog"]
    listener = PasswordListener()
    try:
        with gateway.connect({"engines": {"lake": section}}) as gw:
            gw.execute("SELECT 1", engine="lake").to_arrow()
            assert gw.engine("lake").holds_credentials
            for sql in [
                f"ATTACH 'host=127.0.0.1 port={listener.port} dbname=x user=postgres' "
                "AS evil (TYPE postgres)",
                f"SELECT * FROM postgres_query('host=127.0.0.1 port={listener.port} "
                "dbname=x', 'SELECT 1')",
                f"ATTACH 'postgres:host=127.0.0.1 port={listener.port} dbname=x' AS evil2",
            ]:
                with pytest.raises(GatewayError) as caught:
                    gw.execute(sql, engine="lake").to_arrow()
                assert caught.value.kind == "permission", caught.value
        time.sleep(0.3)
    finally:
        listener.close()
    assert postgres.password.encode() not in listener.received
    assert listener.connections == 0


@pytest.mark.postgres
def test_the_catalog_password_is_a_named_secret_no_other_server_is_offered(postgres, tmp_path):
    """Below the pipeline's refusal: on the engine's own connection, an ATTACH or a
    ``postgres_query`` of another server finds no unnamed postgres secret to send."""
    pytest.importorskip("duckdb")
    from tests.lakes import pg_lake

    section = pg_lake(postgres, tmp_path)
    listener = PasswordListener()
    try:
        with gateway.connect({"engines": {"lake": section}}) as gw:
            gw.execute("CREATE TABLE kept AS SELECT 42 AS a", engine="lake").to_arrow()
            assert gw.execute("SELECT a FROM kept", engine="lake").to_arrow().to_pylist() \
                == [{"a": 42}]
            engine = gw.engine("lake")
            for sql in [
                f"ATTACH 'host=127.0.0.1 port={listener.port} dbname=x user=postgres' "
                "AS evil (TYPE postgres)",
                f"SELECT * FROM postgres_query('host=127.0.0.1 port={listener.port} "
                "dbname=x user=postgres', 'SELECT 1')",
            ]:
                with pytest.raises(GatewayError):
                    engine.execute(sql).to_arrow()
        time.sleep(0.3)
    finally:
        listener.close()
    assert listener.connections >= 1  # the statements did reach the listener...
    assert postgres.password.encode() not in listener.received  # ...without the password


def test_attaching_a_database_file_still_works_without_credentials(gw, tmp_path):
    target = tmp_path / "other.duckdb"
    gw.execute(f"ATTACH '{target}' AS other", engine="duck").to_arrow()
    gw.execute("CREATE TABLE other.x AS SELECT 1 AS v", engine="duck").to_arrow()
    assert gw.execute("SELECT v FROM other.x", engine="duck").to_arrow().to_pylist() == \
        [{"v": 1}]


# -- governance -------------------------------------------------------------------------------
def test_a_statement_counts_as_running_from_its_admission(gw):
    """A blocking aggregate is computed inside execute(): it shows in running() (and counts
    toward the limits) while it does, not only once its answer streams."""
    gw.pipeline.limits.max_queries = 1
    done = threading.Event()
    errors: list[BaseException] = []

    def heavy() -> None:
        try:
            gw.execute("SELECT count(*) FROM range(400000000) r(i) WHERE i % 7 = 3",
                       engine="duck", principal=SHARED).to_arrow()
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=heavy, daemon=True).start()
    deadline = time.monotonic() + HANG_GUARD
    while not gw.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [q.user for q in gw.running()] == ["dave"]
    with pytest.raises(GatewayError) as caught:
        gw.execute("SELECT 1", engine="duck", principal=SHARED)
    assert caught.value.kind == "resource"
    for q in gw.running():
        gw.cancel(q.query_id)
    assert done.wait(HANG_GUARD)
    assert gw.running() == []


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, 0])
def test_a_timeout_must_be_a_positive_finite_number(gw, value):
    with pytest.raises(GatewayError, match="finite"):
        gw.execute("SELECT 1", timeout=value)


@pytest.mark.parametrize("text", ["inf", "nan", "+inf"])
def test_a_configured_timeout_of_inf_or_nan_is_a_configuration_error(tmp_path, text):
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'[engines.duck]\ntype = "duckdb"\ntimeout = {text}\n')
    with pytest.raises(ConfigError, match="finite"):
        gateway.connect(config)


def test_the_deadline_thread_survives_a_deadline_that_never_comes(gw):
    from gateway.result import QueryHandle

    never = QueryHandle("duck", 0, "SELECT 1", timeout=1e300)
    never.start_timer()
    with pytest.raises(gateway.errors.QueryTimeout):
        gw.execute("SELECT count(*) FROM range(2000000000) r(i) WHERE i % 7 = 3",
                   engine="duck", timeout=0.5).to_arrow()
    never.finish()


# -- nothing leaks -----------------------------------------------------------------------------
def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("engine", ["duck", "scan", "duck_adbc"])
def test_answers_dropped_unread_are_released(engine):
    """About 300 answers dropped unread on a DuckDB reached through ADBC ended in 'Out of
    Memory' for every later query; each kept a connection and a file descriptor."""
    engines = {**CONFIG["engines"], "duck_adbc": {"type": "duckdb", "version": "1.5.5"}}
    sql = "SELECT * FROM trips" if engine == "scan" else "SELECT * FROM range(100000) r(i)"
    with gateway.connect({**CONFIG, "engines": engines}) as gw:
        _drop_many(gw, engine, sql)


@pytest.mark.parametrize("kind", ["adbc_sqlite", "odbc_sqlite", "ducklake"])
def test_answers_dropped_unread_are_released_on_every_engine_type(kind, tmp_path):
    from tests import sql_databases as db
    from tests.lakes import duckdb_file_lake

    if kind == "odbc_sqlite":
        pytest.importorskip("pyodbc", reason="unixODBC is not installed")
    section = {"adbc_sqlite": lambda: db.adbc_sqlite(tmp_path / "a.sqlite"),
               "odbc_sqlite": lambda: db.odbc_sqlite(tmp_path / "o.sqlite"),
               "ducklake": lambda: duckdb_file_lake(tmp_path)}[kind]()
    sql = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 2000) "
           "SELECT i FROM r") if kind != "ducklake" else "SELECT * FROM range(100000) r(i)"
    with gateway.connect({"engines": {kind: section}}) as gw:
        _drop_many(gw, kind, sql)


def _drop_many(gw: gateway.Gateway, engine: str, sql: str) -> None:
    gw.execute(sql, engine=engine).to_arrow()
    gc.collect()
    fds = _fds()
    for i in range(400):
        result = gw.execute(sql, engine=engine)
        if i % 2:
            result.to_arrow()
        del result
    gc.collect()
    assert gw.running() == []
    assert _fds() <= fds + 5


@pytest.mark.parametrize("kind", ["adbc_sqlite", "duckdb_adbc"])
def test_answers_dropped_before_their_first_batch_free_their_adbc_cursor(kind, tmp_path):
    """A never-started stream never runs its ``finally``: without a finalizer each dropped
    answer kept its ADBC cursor and statement (3,000 drops: +41 MB)."""
    from adbc_driver_manager.dbapi import Cursor

    from tests import sql_databases as db

    section = {"adbc_sqlite": lambda: db.adbc_sqlite(tmp_path / "a.sqlite"),
               "duckdb_adbc": lambda: {"type": "duckdb", "version": "1.5.5"}}[kind]()
    with gateway.connect({"engines": {kind: section}}) as gw:
        gw.execute("SELECT 1 AS x", engine=kind).to_arrow()
        for _ in range(200):
            gw.execute("SELECT 1 AS x", engine=kind)  # dropped at once, never read
        gc.collect()
        live = sum(isinstance(o, Cursor) for o in gc.get_objects())
        assert live <= 2, live
        assert gw.running() == []


def test_unread_answers_kept_by_their_caller_are_bounded(gw):
    gw.pipeline.limits.max_open_per_engine = 5
    kept = [gw.execute("SELECT * FROM range(10) r(i)", engine="duck") for _ in range(5)]
    with pytest.raises(GatewayError, match="open") as caught:
        gw.execute("SELECT 1", engine="duck")
    assert caught.value.kind == "resource"
    kept[0].close()
    assert gw.execute("SELECT 1 AS x", engine="duck").to_arrow().to_pylist() == [{"x": 1}]


# -- clean edges --------------------------------------------------------------------------------
def test_sqlglot_never_logs_statement_text(gw, caplog, capfd):
    secret = "RESET sqlglot_cannot_read_this_xyzzy"
    reader = Principal("rita", read_only=True, shared=True)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(GatewayError):
            gw.execute(secret, engine="duck", principal=reader).to_arrow()
        gw.execute("PREPARE p AS SELECT 1", engine="duck").to_arrow()
    assert "xyzzy" not in caplog.text
    assert "Falling back" not in caplog.text
    captured = capfd.readouterr()
    assert "xyzzy" not in captured.err and "Falling back" not in captured.err


def test_a_huge_statement_is_not_parsed_in_python(gw, monkeypatch):
    """An 8 MB IN list took sqlglot tens of seconds and gigabytes in Python, where no
    timeout could interrupt it; past the parse limit it is read by its first keyword."""
    import sqlglot
    import sqlglot.tokens

    from gateway.statement import Statement

    read: list[int] = []

    def refusing(real):
        def reading(self_or_sql, *args, **kwargs):
            text = self_or_sql if isinstance(self_or_sql, str) else (args or [""])[0]
            if isinstance(text, str) and len(text) > 1_000_000:
                read.append(len(text))
                raise AssertionError("sqlglot was given the huge statement")
            return real(self_or_sql, *args, **kwargs)
        return reading

    for owner, name in [(sqlglot, "parse"), (sqlglot, "parse_one"), (sqlglot, "transpile"),
                        (sqlglot, "tokenize"), (sqlglot.tokens.Tokenizer, "tokenize")]:
        monkeypatch.setattr(owner, name, refusing(getattr(owner, name)))

    # 2 MB, eight times the parse limit (the was 8 MB: the same path, 4x the time)
    values = ",".join(str(i) for i in range(320_000))
    sql = f"SELECT count(*) AS n FROM range(10) r(i) WHERE i IN ({values})"
    assert len(sql) > 2_000_000
    reader = Principal("rita", read_only=True, shared=True)
    gw.pipeline.check(Statement(sql, "duck", principal=reader))
    with pytest.raises(GatewayError) as caught:
        gw.pipeline.check(Statement(sql.replace("SELECT", "DELETE FROM t; SELECT", 1), "duck",
                                    principal=reader))
    assert caught.value.kind == "permission"  # unreadable, and not lexically a read
    assert read == []  # (a check that caught AssertionError would hide it: counted too)


def test_a_gateway_process_prints_nothing_of_sqlglot(tmp_path):
    code = ("import gateway; gw = gateway.connect(); "
            "gw.execute('PREPARE p AS SELECT 1').to_arrow(); "
            "gw.execute('RESET threads').to_arrow()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=Path(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_cancel_on_a_lake_stops_exactly_that_query(tmp_path):
    """A one-shot statement on a ducklake engine ran through the engine-wide cancel: one
    query's cancel (or timeout) interrupted every running query of the lake."""
    from tests.lakes import duckdb_file_lake

    slow = "SELECT count(*) AS n FROM range(250000000) r(i) WHERE i % 7 = 3"
    with gateway.connect({"engines": {"lake": duckdb_file_lake(tmp_path)}}) as gw:
        gw.execute("SELECT 1", engine="lake").to_arrow()
        outcomes: dict[int, Any] = {}

        def run(i: int) -> None:
            try:
                outcomes[i] = gw.execute(slow, engine="lake").to_arrow().to_pylist()
            except GatewayError as exc:
                outcomes[i] = exc

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + HANG_GUARD
        while len(gw.running()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(gw.running()) == 3
        victim = gw.running()[0]
        assert gw.cancel(victim.query_id)
        for thread in threads:
            thread.join(120)
    cancelled = [o for o in outcomes.values() if isinstance(o, gateway.errors.Cancelled)]
    answered = [o for o in outcomes.values() if isinstance(o, list)]
    assert len(cancelled) == 1 and len(answered) == 2, outcomes


@pytest.mark.parametrize("sql", [
    "DETACH _arrowgate",
    "ATTACH ':memory:' AS mine",
    "CREATE OR REPLACE SECRET (TYPE http, BEARER_TOKEN 'x')",
    "DROP SECRET anything",
    "LOAD json",
    "INSTALL json",
    "SELECT 1; DETACH _arrowgate",
])
def test_what_changes_the_shared_database_is_refused_to_shared_users(gw, sql):
    """Attached databases, secrets and extensions are DuckDB's per database, not per
    connection: one client's DETACH took the sources from every other client."""
    _denied(gw, sql, SHARED, engine="duck")
    assert gw.execute("SELECT count(*) AS n FROM trips", engine="duck").to_arrow().to_pylist() \
        == [{"n": 400}]


def test_the_process_own_user_still_attaches_and_detaches(gw, tmp_path):
    gw.execute(f"ATTACH '{tmp_path / 'x.duckdb'}' AS x", engine="duck").to_arrow()
    gw.execute("DETACH x", engine="duck").to_arrow()


@pytest.mark.parametrize("sql", [
    "EXPLAIN ANALYZE ATTACH ':memory:' AS mine",
    "EXPLAIN ANALYZE SET GLOBAL threads = 1",
    "EXPLAIN (FORMAT json) ANALYZE DETACH _arrowgate",
])
def test_explain_analyze_is_checked_as_the_statement_it_runs(gw, sql):
    _denied(gw, sql, SHARED, engine="duck")


def test_an_engine_result_subclass_with_fields_of_its_own_is_released_on_close():
    """A closed answer keeps its schema and notes, not the engine's stream: an engine's
    EngineResult subclass whose __init__ takes other arguments than reader and notes is
    released as any other (rebuilding it through its own __init__ failed at close)."""
    import pyarrow as pa

    from gateway.engine import Engine, EngineResult

    class CursorResult(EngineResult):
        __slots__ = ("cursor",)

        def __init__(self, table: pa.Table, cursor: object) -> None:  # no reader taken
            super().__init__(pa.RecordBatchReader.from_batches(
                table.schema, table.to_batches(max_chunksize=10)), {"n": 1})
            self.cursor = cursor

    class Rows(Engine):
        type_name = "rows_with_cursor"

        def execute(self, sql, parameters=None):
            return CursorResult(pa.table({"x": list(range(1000))}), object())

    class Registers:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [Rows]

    with gateway.connect({"engines": {"r": {"type": "rows_with_cursor"}}},
                         plugins=[Registers()]) as gw:
        result = gw.execute("anything")
        result.close()
        assert result.schema == pa.schema([("x", pa.int64())])
        assert result.notes == {"n": 1}
