"""The adbc engine against a real PostgreSQL (the throwaway cluster) and SQLite files."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import gateway
from tests import sql_databases as db
from tests.hang_guard import HANG_GUARD
from tests.pg import find_bin_dir, free_port, start_cluster

pytestmark = pytest.mark.adbc


@pytest.fixture(scope="module")
def pg(postgres):
    name = db.new_pg_database(postgres)
    postgres.psql("CREATE TABLE t (a int, b text); INSERT INTO t VALUES (1, 'x'), (2, 'y')",
                  dbname=name)
    return postgres, name


def _answer(gw, sql, **kw):
    return gw.execute(sql, **kw).to_arrow().to_pylist()


# -- configuration and bad input -------------------------------------------------
@pytest.mark.parametrize("section", [{}, {"driver": "sqlite", "driver_path": "/x.so"}])
def test_driver_or_driver_path_is_required(section):
    with gateway.connect({"engines": {"a": {"type": "adbc", **section}}}) as gw, \
            pytest.raises(gateway.ConfigError, match="not both and not neither"):
        gw.execute("SELECT 1")


def test_missing_driver_package_says_what_to_install():
    with gateway.connect({"engines": {"a": {"type": "adbc", "driver": "nosuchdb"}}}) as gw, \
            pytest.raises(gateway.ConfigError, match="pip install adbc-driver-nosuchdb"):
        gw.execute("SELECT 1")


def test_missing_driver_library_is_a_config_error(tmp_path):
    section = {"type": "adbc", "driver_path": str(tmp_path / "libnothing.so")}
    with gateway.connect({"engines": {"a": section}}) as gw, \
            pytest.raises(gateway.ConfigError, match="cannot load the ADBC driver"):
        gw.execute("SELECT 1")


@pytest.mark.postgres
def test_wrong_password_is_a_connection_error_without_the_password(postgres):
    uri = f"postgresql://postgres:not-the-password@127.0.0.1:{postgres.port}/postgres"
    section = {"type": "adbc", "driver": "postgresql", "uri": uri}
    with gateway.connect({"engines": {"a": section}}) as gw, \
            pytest.raises(gateway.EngineConnectionError) as info:
        gw.execute("SELECT 1")
    assert "password" in str(info.value).lower()
    assert "not-the-password" not in str(info.value)


def test_unreachable_host_fails_fast():
    uri = f"postgresql://postgres:pw@127.0.0.1:{free_port()}/postgres?connect_timeout=5"
    started = time.monotonic()
    section = {"type": "adbc", "driver": "postgresql", "uri": uri}
    with gateway.connect({"engines": {"a": section}}) as gw, \
            pytest.raises(gateway.EngineConnectionError, match="cannot connect"):
        gw.execute("SELECT 1")
    assert time.monotonic() - started < HANG_GUARD


@pytest.mark.postgres
def test_a_server_that_stops_mid_answer_gives_an_error_not_a_hang():
    cluster = start_cluster(find_bin_dir())
    outcome: list[BaseException | str] = []
    try:
        with gateway.connect({"engines": {"a": db.adbc_pg(cluster, "postgres")}}) as gw:
            result = gw.execute("SELECT g, repeat('x', 100) AS pad "
                                "FROM generate_series(1, 20000000) g")
            reader = result.reader()
            reader.read_next_batch()

            def read_rest():
                try:
                    for _ in reader:
                        pass
                    outcome.append("finished")
                except BaseException as exc:
                    outcome.append(exc)

            worker = threading.Thread(target=read_rest, daemon=True)
            cluster.stop()
            worker.start()
            worker.join(60)
            assert not worker.is_alive(), "reading hung after the server stopped"
    finally:
        cluster.stop()
    assert len(outcome) == 1 and isinstance(outcome[0], gateway.GatewayError), outcome
    assert outcome[0].engine == "a"


# -- queries -------------------------------------------------------------------
@pytest.mark.postgres
def test_placeholder_styles_on_postgres(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        assert _answer(gw, "SELECT b FROM t WHERE a = ?", parameters=[2]) == [{"b": "y"}]
        assert _answer(gw, "SELECT b FROM t WHERE a = $1", parameters=[2]) == [{"b": "y"}]
        assert _answer(gw, "SELECT b FROM t WHERE a = ? OR b = ? ORDER BY a",
                       parameters=[1, "y"]) == [{"b": "x"}, {"b": "y"}]
        with pytest.raises(gateway.QueryError, match="takes 1 parameter"):
            gw.execute("SELECT b FROM t WHERE a = ?", parameters=[1, 2])


@pytest.mark.postgres
def test_timeout_cancels_the_query(pg):
    postgres, name = pg
    section = db.adbc_pg(postgres, name, timeout=0.5)
    with gateway.connect({"engines": {"a": section}}) as gw:
        started = time.monotonic()
        with pytest.raises(gateway.QueryTimeout):
            gw.execute("SELECT pg_sleep(30)").to_arrow()
        assert time.monotonic() - started < HANG_GUARD
        assert _answer(gw, "SELECT 1 AS one") == [{"one": 1}]  # the connection still works


@pytest.mark.postgres
def test_cancel_from_another_thread(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        engine = gw.engine("a")
        timer = threading.Timer(0.5, engine.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(gateway.Cancelled):
            gw.execute("SELECT pg_sleep(30)").to_arrow()
        assert time.monotonic() - started < HANG_GUARD


@pytest.mark.postgres
def test_answers_stream_in_batches(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        result = gw.execute("SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 300000) g")
        batches = list(result.reader())
    assert len(batches) > 1  # the driver's batches are about 16 MB
    assert sum(b.num_rows for b in batches) == 300000


def test_sqlite_ingest_catalog_and_dml(tmp_path):
    with gateway.connect({"engines": {"a": db.adbc_sqlite(tmp_path / "x.sqlite")}}) as gw:
        engine = gw.engine("a")
        assert engine.ingest("people", pa.table({"id": [1, 2], "name": ["ann", "bo"]})) == 2
        assert engine.ingest("people", pa.table({"id": [3], "name": ["cy"]}), mode="append") == 1
        gw.execute("INSERT INTO people VALUES (?, ?)", parameters=[4, "di"]).to_arrow()
        assert _answer(gw, "SELECT count(*) AS n FROM people") == [{"n": 4}]
        columns = {(c.table, c.column): c.type for c in engine.catalog()}
        assert columns == {("people", "id"): pa.int64(), ("people", "name"): pa.string()}
        assert [t.table for t in engine.tables(pattern="peo%")] == ["people"]


def test_a_refused_load_extension_is_a_permission_error_not_a_lost_database(tmp_path):
    # SQLite's ADBC driver reports its authorizer's refusal as IO ("not authorized"), which
    # read as "the database went away; check that it runs"
    with gateway.connect({"engines": {"s": db.adbc_sqlite(tmp_path / "x.sqlite")}}) as gw:
        with pytest.raises(gateway.GatewayError) as caught:
            gw.execute("SELECT load_extension('/nowhere/none.so')").to_arrow()
        assert caught.value.kind == "permission" and "went away" not in str(caught.value)
        assert gw.execute("SELECT 1 AS one").to_arrow().to_pylist() == [{"one": 1}]


def test_dialect_defaults_from_the_driver(tmp_path):
    config = {"engines": {"lite": db.adbc_sqlite(tmp_path / "x.sqlite"),
                          "pgish": {"type": "adbc", "driver": "postgresql", "uri": "x"},
                          "own": {"type": "adbc", "driver": "sqlite", "dialect": "mysql"}}}
    with gateway.connect(config) as gw:
        assert gw.engine_types["adbc"]  # listed without importing a driver
        dialects = {name: gw.engine_types["adbc"](name, {**gw.engine_config(name).options},
                                                  {}).dialect
                    for name in config["engines"]}
    assert dialects == {"lite": "sqlite", "pgish": "postgres", "own": "mysql"}


def test_transpile_error_says_sqlglot_cannot(tmp_path):
    section = db.adbc_sqlite(tmp_path / "x.sqlite", transpile_from="duckdb", dialect="tsql")
    with gateway.connect({"engines": {"a": section}}) as gw, \
            pytest.raises(gateway.Unsupported, match="sqlglot cannot write"):
        gw.execute("SELECT 1 AS a ORDER BY 1 NULLS LAST")


@pytest.mark.postgres
def test_transpiled_query_error_shows_the_sql_it_ran(pg):
    postgres, name = pg
    section = db.adbc_pg(postgres, name, transpile_from="duckdb")
    with gateway.connect({"engines": {"a": section}}) as gw:
        assert _answer(gw, "SELECT list_value(1, 2) AS l") == [{"l": [1, 2]}]
        with pytest.raises(gateway.QueryError) as info:
            gw.execute("SELECT hour(now()) AS h")
    assert "transpiled from duckdb" in str(info.value)


# -- sessions, prepared statements, per-query cancel, the catalog tree ------------------
@pytest.mark.postgres
def test_a_session_keeps_its_connection_state(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        with gw.session("a") as s:
            assert {"settings", "temp_tables", "transactions"} <= s.keeps
            s.execute("CREATE TEMP TABLE picks (id int)").to_arrow()
            s.execute("SET application_name = 'arrowgate-test'").to_arrow()
            s.execute("INSERT INTO picks VALUES (1), (2)").to_arrow()
            assert _answer_s(s, "SELECT count(*) AS n FROM picks") == [{"n": 2}]
            assert _answer_s(s, "SELECT current_setting('application_name') AS n") == [
                {"n": "arrowgate-test"}]
        with pytest.raises(gateway.QueryError, match="picks"):
            gw.execute("SELECT * FROM picks").to_arrow()  # another connection


def _answer_s(session, sql, *args):
    return session.execute(sql, *args).to_arrow().to_pylist()


@pytest.mark.postgres
def test_prepared_statement_schema_before_running_and_many_rows(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw, \
            gw.session("a") as s:
        lookup = s.prepare("SELECT a, b FROM t WHERE a = ?")
        assert lookup.schema.names == ["a", "b"]
        assert lookup.schema.field("a").type == pa.int32()
        assert lookup.parameter_schema.names == ["$1"]
        assert lookup.parameter_schema.field(0).type == pa.int32()
        assert lookup.execute([2]).to_arrow().to_pylist() == [{"a": 2, "b": "y"}]
        many = lookup.execute(pa.table({"a": [1, 2]})).to_arrow()
        assert many.column("b").to_pylist() == ["x", "y"]


def test_prepared_statement_on_a_driver_without_execute_schema(tmp_path):
    with gateway.connect({"engines": {"a": db.adbc_sqlite(tmp_path / "x.sqlite")}}) as gw:
        gw.execute("CREATE TABLE t (a INTEGER, b TEXT)").to_arrow()
        gw.execute("INSERT INTO t VALUES (1, 'x')").to_arrow()
        with gw.session("a") as s:
            lookup = s.prepare("SELECT b FROM t WHERE a = $1")
            assert lookup.schema.names == ["b"]
            assert lookup.execute([1]).to_arrow().to_pylist() == [{"b": "x"}]


@pytest.mark.slow
@pytest.mark.postgres
def test_cancel_stops_that_query_only(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        slow = gw.execute("SELECT pg_sleep(30)")
        other = gw.execute("SELECT g FROM generate_series(1, 3) g")
        assert gw.cancel(slow.query_id)
        with pytest.raises(gateway.Cancelled):
            slow.to_arrow()
        assert other.to_arrow().num_rows == 3


@pytest.mark.postgres
def test_catalog_tree(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        assert name in gw.catalogs("a")
        assert ("public" in {s.schema for s in gw.schemas("a", catalog=name, pattern="pub%")})
        tables = gw.tables("a", catalog=name, schema="public", pattern="t")
        assert [t.table for t in tables] == ["t"]
        columns = gw.columns("a", table="t", catalog=name, schema="public")
        assert [(c.column, c.type) for c in columns] == [("a", pa.int32()), ("b", pa.string())]
        assert columns[0].catalog == name


@pytest.mark.postgres
def test_a_write_on_a_second_pooled_connection_is_committed(pg):
    postgres, name = pg
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        gw.execute("CREATE TABLE pooled (a int)").to_arrow()
        held = gw.execute("SELECT generate_series(1, 10) AS i")  # keeps the first connection
        gw.execute("INSERT INTO pooled VALUES (1)").to_arrow()  # so this runs on a clone
        assert held.to_arrow().num_rows == 10
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        assert _answer(gw, "SELECT count(*) AS n FROM pooled") == [{"n": 1}]


@pytest.mark.postgres
def test_a_one_shot_query_sends_nothing_after_it_and_a_statement_leaves_no_state(pg):
    postgres, name = pg
    clients = f"FROM pg_stat_activity WHERE datname = '{name}' " \
              "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    with gateway.connect({"engines": {"a": db.adbc_pg(postgres, name)}}) as gw:
        assert _answer(gw, "SELECT 42 AS marker") == [{"marker": 42}]
        assert "SELECT 42 AS marker" in postgres.psql(f"SELECT query {clients}",
                                                      dbname=name)  # no ROLLBACK after
        gw.execute("BEGIN").to_arrow()  # a one-shot transaction must not outlive its session
        gw.execute("SET TimeZone = 'Asia/Tokyo'").to_arrow()  # nor a setting
        gw.execute("SELECT set_config('DateStyle', 'SQL, DMY', false)").to_arrow()  # a SELECT's
        gw.execute("CREATE TEMP TABLE left_behind AS SELECT 1 AS a").to_arrow()  # nor a table
        # their connections were closed, not lent again
        assert postgres.psql(f"SELECT count(*) {clients} AND state <> 'idle'",
                             dbname=name) == "0"
        assert _answer(gw, "SELECT current_setting('TimeZone') AS tz") != \
            [{"tz": "Asia/Tokyo"}]
        assert _answer(gw, "SELECT current_setting('DateStyle') AS ds") != \
            [{"ds": "SQL, DMY"}]
        with pytest.raises(gateway.QueryError, match="left_behind"):
            gw.execute("SELECT * FROM left_behind").to_arrow()
        gw.execute("CREATE TABLE after_begin (a int)").to_arrow()
    assert postgres.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'after_begin'",
                         dbname=name) == "1"
