"""What one user of a shared DuckDB database may not change for the others
(gateway/sql/reach.py, shared_catalog): the log, the sources' views, macros, and the
table functions that act on the whole database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

import gateway
from gateway.errors import GatewayError
from gateway.sql import reach
from gateway.statement import Principal
from tests.conftest import DATA

CONFIG: dict[str, Any] = {
    "engines": {"duck": {"type": "duckdb"}},
    "sources": {"trips": {"path": str(DATA / "trips.csv")}},
}
ALICE = Principal("alice", shared=True)
BOB = Principal("bob", shared=True)
READER = Principal("rita", shared=True, read_only=True)


@pytest.fixture
def gw() -> Iterator[gateway.Gateway]:
    with gateway.connect(CONFIG) as gw:
        yield gw


def _rows(gw: gateway.Gateway, sql: str, principal: Principal = BOB) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = gw.execute(sql, engine="duck", principal=principal) \
        .to_arrow().to_pylist()
    return rows


def _refused(gw: gateway.Gateway, sql: str, principal: Principal = ALICE) -> str:
    with pytest.raises(GatewayError) as caught:
        gw.execute(sql, engine="duck", principal=principal).to_arrow()
    assert caught.value.kind == "permission", caught.value
    return caught.value.message


def test_every_table_function_of_the_installed_duckdb_is_judged():
    """A function DuckDB adds in a new version is refused to no one until someone has
    decided whether it acts on the connection or on the whole database."""
    found = {name for (name,) in duckdb.sql(
        "SELECT DISTINCT function_name FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'pragma')").fetchall()}
    judged = reach.DATABASE_WIDE_FUNCTIONS | reach.SETTING_PRAGMAS | reach.SHARED_FUNCTIONS
    assert found - judged == set()
    assert not reach.DATABASE_WIDE_FUNCTIONS & reach.SHARED_FUNCTIONS
    assert not reach.SETTING_PRAGMAS & reach.SHARED_FUNCTIONS


def test_every_system_view_read_without_a_schema_is_reserved():
    found = {name for (name,) in duckdb.sql(
        "SELECT view_name FROM duckdb_views() "
        "WHERE internal AND schema_name IN ('main', 'pg_catalog')").fetchall()}
    assert found - reach.SYSTEM_VIEWS == set()


def test_the_sources_catalog_is_the_one_the_duckdb_engine_mounts():
    import inspect

    from gateway_duckdb.mount import SOURCES_CATALOG

    assert inspect.signature(reach.shared_catalog).parameters["catalog"].default \
        == SOURCES_CATALOG


@pytest.mark.parametrize("principal", [ALICE, READER])
def test_no_user_turns_on_the_log_of_every_users_statements(gw, principal):
    for sql in ["SELECT * FROM enable_logging()", "CALL enable_logging()",
                "CALL enable_logging(level := 'trace')",
                "SELECT * FROM query('SELECT * FROM enable_logging()')"]:
        _refused(gw, sql, principal)
    _rows(gw, "SELECT 'bob-private' AS s")
    assert _rows(gw, "SELECT current_setting('enable_logging') AS on", ALICE) == [{"on": False}]
    for sql in ["SELECT message FROM duckdb_logs", "SELECT * FROM duckdb_log_contexts()",
                "CALL truncate_duckdb_logs()", "CALL disable_logging()"]:
        _refused(gw, sql, principal)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM enable_profiling()",
    "CALL disable_optimizer()",
    "SELECT * FROM enable_object_cache()",
    "CALL disable_checkpoint_on_shutdown()",
    "CALL force_checkpoint()",
    "CALL add_parquet_key('k', '0123456789112345')",
    "CALL copy_database('memory', '_arrowgate')",
])
def test_the_function_forms_of_database_pragmas_are_refused(gw, sql):
    _refused(gw, sql)


@pytest.mark.parametrize("sql", [
    "CREATE OR REPLACE VIEW _arrowgate.main.trips AS SELECT 'hijacked' AS cab_type",
    "DROP VIEW _arrowgate.main.trips",
    "USE _arrowgate",
    "CREATE VIEW main.trips AS SELECT 'shadow' AS cab_type",
    "CREATE TABLE TRIPS AS SELECT 'shadow' AS cab_type",
    "CREATE TABLE \"Trips\" (cab_type VARCHAR)",
    # unqualified, DROP found the source's view on the search path: gone for everyone
    "DROP VIEW trips",
    "DROP VIEW IF EXISTS TRIPS CASCADE",
    "ALTER VIEW trips RENAME TO mine",
    "COMMENT ON VIEW trips IS 'mine'",
    # EXPLAIN ANALYZE runs what it explains
    "EXPLAIN ANALYZE CREATE TABLE main.trips AS SELECT 'shadow' AS cab_type",
    "EXPLAIN ANALYZE DROP VIEW trips",
])
def test_no_user_makes_a_source_read_something_else(gw, sql):
    before = _rows(gw, "SELECT count(*) AS n FROM trips")
    _refused(gw, sql)
    assert _rows(gw, "SELECT count(*) AS n FROM trips") == before


@pytest.mark.parametrize("name", ["duckdb_tables", "pg_class", "sqlite_master"])
def test_no_user_makes_a_system_view_read_their_table(gw, name):
    before = _rows(gw, f"SELECT count(*) AS n FROM {name}")
    _refused(gw, f"CREATE TABLE main.{name} AS SELECT 1 AS x")
    assert _rows(gw, f"SELECT count(*) AS n FROM {name}") == before


def test_a_renamed_table_cannot_take_a_sources_name(gw):
    _rows(gw, "CREATE TABLE mine AS SELECT 1 AS x", ALICE)
    _refused(gw, "ALTER TABLE mine RENAME TO trips")
    _refused(gw, "ALTER VIEW mine RENAME TO trips")


@pytest.mark.parametrize("sql", [
    "CREATE MACRO lower(x) AS 'pwned'",
    "CREATE OR REPLACE MACRO mine(x) AS x + 1",
    "CREATE FUNCTION f(x) AS x",
    "CREATE MACRO range(n) AS TABLE SELECT 1 AS x",
    "EXPLAIN ANALYZE CREATE MACRO lower(x) AS 'pwned'",
])
def test_no_user_redefines_a_function_for_the_others(gw, sql):
    _refused(gw, sql)
    assert _rows(gw, "SELECT lower('A') AS l") == [{"l": "a"}]


def test_a_users_own_objects_still_work(gw):
    with gw.session("duck", principal=ALICE) as mine:
        for sql in ["CREATE TEMP MACRO twice(x) AS 2 * x",
                    "CREATE TEMP VIEW trips AS SELECT 'mine' AS cab_type",
                    "CREATE TABLE notes AS SELECT 1 AS x",
                    "SET enable_progress_bar = false",
                    "CHECKPOINT"]:
            mine.execute(sql).to_arrow()
        assert mine.execute("SELECT twice(x) AS y FROM notes").to_arrow().to_pylist() \
            == [{"y": 2}]
        assert mine.execute("SELECT cab_type FROM trips").to_arrow().to_pylist() \
            == [{"cab_type": "mine"}]
        mine.execute("DROP VIEW temp.main.trips").to_arrow()
    # the temp view was the session's own: the source is whole for everyone else
    assert _rows(gw, "SELECT count(*) > 1 AS whole FROM trips") == [{"whole": True}]


def test_the_process_own_user_keeps_full_control(gw):
    gw.execute("CREATE MACRO plus_one(x) AS x + 1", engine="duck").to_arrow()
    assert gw.execute("SELECT plus_one(1) AS y", engine="duck").to_arrow().to_pylist() \
        == [{"y": 2}]


# -- a lake ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Iterator[gateway.Gateway]:
    from tests.lakes import duckdb_file_lake

    section = duckdb_file_lake(tmp_path_factory.mktemp("lake"))
    with gateway.connect({"engines": {"lake": section}}) as gw:
        for sql in ["CREATE TABLE t AS SELECT range AS i FROM range(10)",
                    "INSERT INTO t VALUES (100)", "DELETE FROM t WHERE i = 100"]:
            gw.execute(sql, engine="lake").to_arrow()
        yield gw


def test_every_table_function_of_the_lakes_duckdb_is_judged(lake):
    """The ducklake engine runs DuckDB 1.5.5 with the ducklake extension: its functions
    are judged too (a DuckLake writer called by a SELECT is no read)."""
    found = {row["f"] for row in lake.execute(
        "SELECT DISTINCT function_name AS f FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'pragma', 'table_macro')", engine="lake")
        .to_arrow().to_pylist()}
    judged = reach.DATABASE_WIDE_FUNCTIONS | reach.SETTING_PRAGMAS | reach.SHARED_FUNCTIONS
    assert found - judged == set()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM ducklake_expire_snapshots('lake', older_than => now())",
    "SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)",
    "SELECT * FROM ducklake_merge_adjacent_files('lake')",
    "SELECT * FROM ducklake_rewrite_data_files('lake')",
    "SELECT * FROM ducklake_flush_inlined_data('lake')",
    "SELECT * FROM query('SELECT * FROM ducklake_expire_snapshots(''lake'', "
    "older_than => now())')",
])
def test_a_read_only_user_changes_no_lake_through_a_select(lake, sql):
    """A SELECT of a DuckLake table function that writes counted as a query: a read-only
    user expired every snapshot of the lake."""
    before = lake.execute("SELECT count(*) AS n FROM ducklake_snapshots('lake')",
                          engine="lake", principal=READER).to_arrow().to_pylist()
    with pytest.raises(GatewayError, match="read-only") as caught:
        lake.execute(sql, engine="lake", principal=READER).to_arrow()
    assert caught.value.kind == "permission"
    assert lake.execute("SELECT count(*) AS n FROM ducklake_snapshots('lake')",
                        engine="lake", principal=READER).to_arrow().to_pylist() == before


def test_no_user_changes_the_lakes_options(lake):
    with pytest.raises(GatewayError, match="every user") as caught:
        lake.execute("SELECT * FROM ducklake_set_option('lake', 'parquet_compression', "
                     "'uncompressed')", engine="lake", principal=ALICE).to_arrow()
    assert caught.value.kind == "permission"


# -- a server's other sessions -----------------------------------------------------------
@pytest.mark.postgres
def test_no_user_reads_or_cancels_anothers_statements_on_postgresql(postgres):
    """Every user reaches the server as the engine's one role, and a role sees the text of
    its other sessions' statements in pg_stat_activity and may cancel them: a read-only
    user read another's statement and cancelled it."""
    import threading
    import time

    from tests import sql_databases as db

    bob = Principal("bob", shared=True)
    with gateway.connect({"engines": {"pg": db.adbc_pg(postgres, db.new_pg_database(
            postgres))}}) as gw:
        done: list[Any] = []
        slow = threading.Thread(target=lambda: done.append(gw.execute(
            "SELECT 'bob-private' AS s, pg_sleep(1.5) AS z", engine="pg",
            principal=bob).to_arrow().to_pylist()))
        slow.start()
        time.sleep(0.5)
        for sql in ["SELECT query FROM pg_stat_activity",
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid <> "
                    "pg_backend_pid()",
                    "SELECT pg_terminate_backend(123)",
                    "SELECT * FROM pg_catalog.pg_stat_get_activity(NULL)",
                    "SELECT query_to_xml('SELECT query FROM pg_stat_activity', true, true, '')"]:
            for who in (READER, ALICE):
                with pytest.raises(GatewayError, match="other sessions") as caught:
                    gw.execute(sql, engine="pg", principal=who).to_arrow()
                assert caught.value.kind == "permission"
        slow.join()
        assert [row["s"] for row in done[0]] == ["bob-private"]  # not cancelled
        # the process's own user keeps full control
        assert gw.execute("SELECT count(*) AS n FROM pg_stat_activity", engine="pg") \
            .to_arrow().num_rows == 1


@pytest.mark.parametrize("sql", [
    "DELETE FROM __ducklake_metadata_lake.ducklake_snapshot",
    "UPDATE __ducklake_metadata_lake.ducklake_metadata SET value = '/tmp/' "
    "WHERE key = 'data_path'",
    'DROP TABLE "__ducklake_metadata_lake".main.ducklake_table',
    "USE __ducklake_metadata_lake",
])
def test_no_user_writes_the_lakes_own_catalog(lake, sql):
    """A shared writer deleted ducklake_snapshot through the metadata catalog DuckLake
    attaches, and the lake answered "No snapshot found" to everyone from then on."""
    with pytest.raises(GatewayError, match="lake's catalog database") as caught:
        lake.execute(sql, engine="lake", principal=ALICE).to_arrow()
    assert caught.value.kind == "permission"
    assert lake.execute("SELECT count(*) AS n FROM t", engine="lake",
                        principal=ALICE).to_arrow().to_pylist() == [{"n": 10}]


@pytest.mark.parametrize("sql", [
    "SELECT 1 AS x; {pad} CREATE MACRO lower(x) AS 'pwned'",
    "CREATE TEMP TABLE mine (a INT); {pad} CREATE VIEW trips AS SELECT 1 AS x",
])
def test_an_unreadable_statement_hides_no_change_after_it(gw, sql):
    """Past gateway.sql.PARSE_LIMIT sqlglot does not read a statement, and the checks read
    its start only: a change after a long comment went through."""
    from gateway.sql import PARSE_LIMIT

    sql = sql.format(pad="/* " + "x" * PARSE_LIMIT + " */")
    _refused(gw, sql)
    assert _rows(gw, "SELECT lower('A') AS l") == [{"l": "a"}]


# -- a SQLite file -------------------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "PRAGMA writable_schema = 1",
    "pragma main.journal_mode(OFF)",
    "SELECT 1; /* then */ PRAGMA user_version = 7",
    "-- a note\nPRAGMA schema_version = 9",
])
def test_no_user_changes_the_sqlite_file_through_a_pragma(tmp_path, sql):
    """One file is every user's database: PRAGMA writable_schema = 1 let a shared writer
    rewrite sqlite_master and leave the file unreadable for everyone."""
    from tests import sql_databases as db

    with gateway.connect({"engines": {"sq": db.adbc_sqlite(tmp_path / "db.sqlite")}}) as gw:
        gw.execute("CREATE TABLE t (a INTEGER)", engine="sq").to_arrow()
        with pytest.raises(GatewayError, match="may only read") as caught:
            gw.execute(sql, engine="sq", principal=ALICE).to_arrow()
        assert caught.value.kind == "permission"
        for reading in ("PRAGMA journal_mode", "PRAGMA table_info(t)",
                        "SELECT * FROM pragma_table_info('t')"):
            assert gw.execute(reading, engine="sq", principal=ALICE).to_arrow().num_rows == 1


def test_a_query_is_not_parsed_again_for_the_catalog_check(monkeypatch):
    """Every statement a shared user sends passes shared_catalog: a query naming nothing
    it guards returns before sqlglot reads it (the service's per-call cost)."""
    from gateway.sql import kinds

    def unread(*args: Any) -> bool:
        raise AssertionError("parsed")

    monkeypatch.setattr(kinds, "is_read", unread)
    assert reach.shared_catalog("SELECT count(*) FROM trips WHERE x = 'a'", "duckdb",
                                ["trips"]) is None
    with pytest.raises(AssertionError, match="parsed"):
        reach.shared_catalog("DROP VIEW trips", "duckdb", ["trips"])
