"""The ducklake engine through the gateway, on a real PostgreSQL catalog and a SQLite one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gateway
from tests.conftest import DATA
from tests.lakes import duckdb_file_lake, pg_lake, sqlite_lake

SOURCES = {"trips": {"path": str(DATA / "trips.csv")}}


@pytest.fixture(scope="module", params=["postgres", "sqlite"])
def lake(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[tuple[gateway.Gateway, str]]:
    """A gateway whose only engine, ``lake``, is a fresh lake on the parametrised catalog."""
    folder = tmp_path_factory.mktemp(f"lake-{request.param}")
    if request.param == "postgres":
        section = pg_lake(request.getfixturevalue("postgres"), folder)
    else:
        section = sqlite_lake(folder)
    with gateway.connect({"engines": {"lake": section}, "sources": SOURCES}) as gw:
        yield gw, request.param


def rows(gw: gateway.Gateway, sql: str) -> list[dict[str, Any]]:
    return gw.execute(sql).to_arrow().to_pylist()


def scalar(gw: gateway.Gateway, sql: str) -> Any:
    return next(iter(rows(gw, sql)[0].values()))


def test_the_lake_is_the_default_database(lake):
    gw, _ = lake
    assert scalar(gw, "SELECT current_database()") == "lake"
    assert scalar(gw, "SELECT count(*) FROM ducklake_snapshots('lake')") >= 1


def test_ddl_and_dml(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE items (id INTEGER, name VARCHAR)")
    rows(gw, "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    rows(gw, "UPDATE items SET name = 'B' WHERE id = 2")
    rows(gw, "DELETE FROM items WHERE id = 3")
    assert rows(gw, "SELECT * FROM items ORDER BY id") == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "B"}]


def test_insert_select_from_a_mounted_csv(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE green AS SELECT * FROM trips WHERE false")
    rows(gw, "INSERT INTO green SELECT * FROM trips WHERE cab_type = 'green'")
    assert scalar(gw, "SELECT count(*) FROM green") == 113
    assert scalar(gw, "SELECT count(*) FROM lake.main.green") == 113


def test_time_travel_by_version_and_timestamp(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE tt (v INTEGER)")
    rows(gw, "INSERT INTO tt VALUES (1)")
    first = scalar(gw, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")
    at = scalar(gw, "SELECT max(snapshot_time)::VARCHAR FROM ducklake_snapshots('lake')")
    rows(gw, "INSERT INTO tt VALUES (2)")
    rows(gw, "DELETE FROM tt WHERE v = 1")
    assert rows(gw, "SELECT v FROM tt") == [{"v": 2}]
    assert rows(gw, f"SELECT v FROM tt AT (VERSION => {first})") == [{"v": 1}]
    assert rows(gw, f"SELECT v FROM tt AT (TIMESTAMP => '{at}'::TIMESTAMPTZ)") == [{"v": 1}]


def test_snapshot_listing(lake):
    gw, _ = lake
    before = scalar(gw, "SELECT count(*) FROM ducklake_snapshots('lake')")
    rows(gw, "CREATE TABLE snaps (v INTEGER)")
    rows(gw, "INSERT INTO snaps VALUES (1)")
    listing = rows(gw, "SELECT snapshot_id, changes FROM ducklake_snapshots('lake') "
                       "ORDER BY snapshot_id")
    assert len(listing) == before + 2
    assert "tables_created" in dict(listing[-2]["changes"])


def test_catalog_lists_the_lake(lake):
    gw, _ = lake
    rows(gw, "CREATE SCHEMA IF NOT EXISTS sales")
    rows(gw, "CREATE TABLE sales.orders (id BIGINT, amount DECIMAL(10, 2), placed DATE)")
    columns = {(c.schema, c.table, c.column): c for c in gw.catalog("lake")}
    assert pa.types.is_int64(columns[("sales", "orders", "id")].type)
    assert pa.types.is_decimal(columns[("sales", "orders", "amount")].type)
    assert pa.types.is_date32(columns[("sales", "orders", "placed")].type)
    assert ("main", "trips", "trip_id") in columns  # the mounted source is listed too


def test_maintenance_calls(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE m (id INTEGER)")
    for i in range(3):
        rows(gw, f"INSERT INTO m VALUES ({i})")  # below the inlining limit: kept in the catalog
    files = "SELECT coalesce(sum(file_count), 0) FROM ducklake_table_info('lake') WHERE table_name = 'm'"
    assert scalar(gw, files) == 0
    flushed = rows(gw, "CALL ducklake_flush_inlined_data('lake')")
    assert sum(int(r["rows_flushed"]) for r in flushed if r["table_name"] == "m") == 3
    rows(gw, "INSERT INTO m SELECT range FROM range(100, 150)")
    assert scalar(gw, files) == 2
    rows(gw, "CALL ducklake_merge_adjacent_files('lake')")
    assert scalar(gw, files) == 1
    rows(gw, "CALL ducklake_expire_snapshots('lake', older_than => now())")
    assert scalar(gw, "SELECT count(*) FROM ducklake_snapshots('lake')") == 1
    cleaned = rows(gw, "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert len(cleaned) >= 2  # the two files merged away
    assert scalar(gw, "SELECT count(*) FROM m") == 53


def test_schema_evolution(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE ev (id INTEGER, a VARCHAR)")
    rows(gw, "INSERT INTO ev VALUES (1, 'x')")
    old = scalar(gw, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")
    rows(gw, "ALTER TABLE ev ADD COLUMN b DOUBLE")
    rows(gw, "ALTER TABLE ev RENAME COLUMN a TO label")
    rows(gw, "INSERT INTO ev VALUES (2, 'y', 2.5)")
    rows(gw, "ALTER TABLE ev DROP COLUMN b")
    assert rows(gw, "SELECT * FROM ev ORDER BY id") == [
        {"id": 1, "label": "x"}, {"id": 2, "label": "y"}]
    assert rows(gw, f"SELECT * FROM ev AT (VERSION => {old})") == [{"id": 1, "a": "x"}]


def test_reattach_keeps_the_data(lake):
    gw, _ = lake
    rows(gw, "CREATE TABLE ra AS SELECT range AS id FROM range(7)")
    gw.engine("lake").reattach()  # type: ignore[attr-defined]
    assert scalar(gw, "SELECT current_database()") == "lake"
    assert scalar(gw, "SELECT count(*) FROM ra") == 7


def test_duckdb_file_catalog(tmp_path):
    with gateway.connect({"engines": {"lake": duckdb_file_lake(tmp_path)}}) as gw:
        rows(gw, "CREATE TABLE f AS SELECT 1 AS one")
        assert scalar(gw, "SELECT one FROM f") == 1
        assert scalar(gw, "SELECT count(*) FROM ducklake_snapshots('lake')") == 2


def test_options_reach_the_attach(tmp_path):
    section = sqlite_lake(tmp_path, data_inlining_row_limit=0,
                          attach_options={"encrypted": False})
    with gateway.connect({"engines": {"lake": section}}) as gw:
        rows(gw, "CREATE TABLE o (v INTEGER)")
        rows(gw, "INSERT INTO o VALUES (1)")  # one row, yet a Parquet file: inlining is off
        assert scalar(gw, "SELECT sum(file_count) FROM ducklake_table_info('lake')") == 1
        opts = {r["option_name"]: r["value"] for r in rows(gw, "SELECT * FROM ducklake_options('lake')")}
        assert opts["encrypted"] == "false"
        assert scalar(gw, "SELECT v FROM o") == 1


# -- two writers, two processes, one PostgreSQL catalog ----------------------------------
WRITER = textwrap.dedent("""
    import json, sys
    import gateway
    job = json.loads(sys.argv[1])
    errors = []
    with gateway.connect({"engines": {"lake": job["section"]}}) as gw:
        gw.execute("SELECT 1").to_arrow()
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(job["n"]):
            try:
                gw.execute(job["sql"].format(i=i, w=job["writer"])).to_arrow()
            except gateway.GatewayError as exc:
                errors.append({"kind": type(exc).__name__, "message": str(exc),
                               "error_kind": getattr(exc, "kind", "")})
    print(json.dumps(errors), flush=True)
""")


def run_writers(section: dict[str, Any], sql: str, n: int) -> list[list[dict[str, str]]]:
    """Two gateway processes run ``sql`` n times each, starting together; their errors."""
    procs = [subprocess.Popen([sys.executable, "-c", WRITER,
                               json.dumps({"section": section, "sql": sql, "n": n,
                                           "writer": w})],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for w in range(2)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=180)
        assert p.returncode == 0, stdout
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.postgres
def test_two_processes_write_one_postgres_catalog(postgres, tmp_path):
    section = pg_lake(postgres, tmp_path)
    with gateway.connect({"engines": {"lake": section}}) as gw:
        rows(gw, "CREATE TABLE w (writer INTEGER, i INTEGER)")
        base = scalar(gw, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")
    errors = run_writers(section, "INSERT INTO w VALUES ({w}, {i})", 10)
    assert errors == [[], []]  # DuckLake retried every conflict
    with gateway.connect({"engines": {"lake": section}}) as gw:
        assert rows(gw, "SELECT writer, count(*) AS n, count(DISTINCT i) AS d FROM w "
                        "GROUP BY writer ORDER BY writer") == [
            {"writer": 0, "n": 10, "d": 10}, {"writer": 1, "n": 10, "d": 10}]
        ids = [r["snapshot_id"] for r in rows(
            gw, f"SELECT snapshot_id FROM ducklake_snapshots('lake') WHERE snapshot_id > {base} "
                "ORDER BY 1")]
        assert ids == list(range(base + 1, base + 21))  # one snapshot per commit, no gaps


@pytest.mark.postgres
def test_a_conflict_that_exhausts_retries_is_a_clear_error(postgres, tmp_path):
    section = pg_lake(postgres, tmp_path, max_retry_count=0)
    with gateway.connect({"engines": {"lake": section}}) as gw:
        rows(gw, "CREATE TABLE c AS SELECT range AS id, 0 AS v FROM range(100)")
    errors = run_writers(section, "UPDATE c SET v = v + 1 WHERE id % 2 = {w}", 15)
    failed = [e for per in errors for e in per]
    assert failed, "two writers updating one table 15 times each never conflicted"
    for e in failed:
        assert e["kind"] == "QueryError" and e["error_kind"] == "constraint"
        assert "conflicted with another writer" in e["message"]
        assert "max_retry_count = 0" in e["message"]
    with gateway.connect({"engines": {"lake": section}}) as gw:
        total = scalar(gw, "SELECT sum(v) FROM c")
    succeeded = [15 - len(per) for per in errors]
    assert total == 50 * sum(succeeded)  # a failed commit left nothing behind


@pytest.mark.postgres
def test_a_transaction_that_loses_a_commit_race_is_a_conflict_to_run_again(postgres, tmp_path):
    """Two gateways' transactions update one row; the second COMMIT conflicts. DuckDB calls
    it a TransactionContext error, which had no kind: a client could not tell it from a
    bug. It is ``constraint`` (as a conflict whose retries ran out), says nothing of the
    transaction was committed and what to do, and keeps DuckLake's reason."""
    section = pg_lake(postgres, tmp_path)
    with gateway.connect({"engines": {"lake": section}}) as one, \
            gateway.connect({"engines": {"lake": section}}) as two:
        rows(one, "CREATE TABLE acct AS SELECT 1 AS id, 100 AS balance")
        with one.session("lake") as a, two.session("lake") as b:
            for session in (a, b):
                session.execute("BEGIN").to_arrow()
            a.execute("UPDATE acct SET balance = balance - 1 WHERE id = 1").to_arrow()
            b.execute("UPDATE acct SET balance = balance + 5 WHERE id = 1").to_arrow()
            a.execute("COMMIT").to_arrow()
            with pytest.raises(gateway.QueryError) as info:
                b.execute("COMMIT").to_arrow()
        assert info.value.kind == "constraint"
        message = str(info.value)
        assert "conflicted with another writer" in message, message
        assert "nothing of the transaction was committed" in message
        assert "Transaction conflict" in message  # DuckLake's own reason
        assert "again" in (info.value.hint or "")
        assert scalar(two, "SELECT balance FROM acct") == 99


@pytest.mark.postgres
def test_a_commit_race_lost_through_flight_reaches_the_client_as_a_conflict(postgres, tmp_path):
    """The same race through ``arrowgate serve``: the ADBC driver prepares every statement,
    and the prepared statement's errors were not explained (kind missing from the trailer)."""
    import adbc_driver_flightsql.dbapi as dbapi
    import adbc_driver_manager

    from gateway.drivers.error_kinds import trailer_kind
    from tests.serve_process import served

    section = pg_lake(postgres, tmp_path)
    toml = 'default_engine = "lake"\n[engines.lake]\n' + "\n".join(
        f"{k} = {json.dumps(v)}" for k, v in section.items())
    with gateway.connect({"engines": {"lake": section}}) as gw:
        rows(gw, "CREATE TABLE acct AS SELECT 1 AS id, 100 AS balance")
        with served(tmp_path, toml) as service, gw.session("lake") as winner, \
                dbapi.connect(service.location, autocommit=True, db_kwargs={
                    "adbc.flight.sql.rpc.with_cookie_middleware": "true"}) as conn, \
                conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("UPDATE acct SET balance = balance + 5 WHERE id = 1")
            winner.execute("BEGIN").to_arrow()
            winner.execute("UPDATE acct SET balance = balance - 1 WHERE id = 1").to_arrow()
            winner.execute("COMMIT").to_arrow()
            with pytest.raises(adbc_driver_manager.Error) as info:
                cur.execute("COMMIT")
            assert trailer_kind(info.value.details or []) == "constraint"
            assert "nothing of the transaction was committed" in str(info.value)
            cur.execute("SELECT balance FROM acct")
            assert cur.fetchall() == [(99,)]


def test_listing_engines_does_not_start_duckdb(cli, tmp_path):
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'[engines.lake]\ntype = "ducklake"\ncatalog = "sqlite:{tmp_path}/c.sqlite"\n'
                      'data_path = "/tmp/x/"\n')
    run = cli("--config", str(config), "engines")
    assert run.code == 0, run.err
    assert "ducklake" in run.out and "1.5.5" in run.out
    assert not Path(tmp_path / "c.sqlite").exists()


def test_location_is_the_versioned_release_not_the_installed_module():
    from gateway_ducklake.engine import DuckLakeEngine

    where = DuckLakeEngine.describe_location({"catalog": "sqlite:x.sqlite"})
    assert where["runs"] == "ADBC in process"
    assert "1.5.5" in where["where"] or where["where"].startswith("not installed")


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_8_concurrent_sessions_on_a_lake_all_succeed(kind, request, tmp_path):
    """Each new pooled connection used to re-run the source views: 2 of 4 concurrent
    queries failed with a catalog write-write conflict. (A fresh lake: after the module
    lake's reattach, a PostgreSQL lake's later sessions did not find its tables; see the
    session note.)"""
    from concurrent.futures import ThreadPoolExecutor

    section = pg_lake(request.getfixturevalue("postgres"), tmp_path) if kind == "postgres" \
        else sqlite_lake(tmp_path)
    gw = gateway.connect({"engines": {"lake": section}, "sources": SOURCES})
    request.addfinalizer(gw.close)
    rows(gw, "CREATE OR REPLACE TABLE shared AS SELECT range AS i FROM range(1000)")

    def one(k: int) -> tuple[int, int]:
        with gw.session("lake") as s:
            trips = s.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py()
            total = s.execute(f"SELECT sum(i) + {k} AS t FROM shared").to_arrow()["t"][0]
            return trips, total.as_py() - k

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(8)))
    assert answers == [(400, sum(range(1000)))] * 8
