"""``files = "sources"``: SQL reaches the configured sources and nothing else, on every path.

``arrowgate serve`` sets it on every duckdb and ducklake engine, so a remote user cannot read
``/etc/passwd`` or write files through the gateway.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pytest

import gateway
from tests.duckdb_support import V155, cli_binary, use_shared_home
from tests.flight_support import serving
from tests.lakes import duckdb_file_lake, pg_lake, sqlite_lake
from tests.sql_databases import adbc_sqlite, odbc_sqlite

DATA = Path(__file__).resolve().parent.parent / "examples" / "data"

PATHS = {
    "in_process": {},
    "adbc": {"version": V155},
    "worker": {"isolation": "process"},
    "cli": {"cli": "duckdb-cli"},
}


def _outside(tmp_path: Path) -> list[str]:
    """Statements that reach past the sources: a system file, a file beside a source, a write."""
    beside = tmp_path / "data" / "secret.csv"
    return [
        "SELECT * FROM read_csv_auto('/etc/passwd')",
        f"SELECT * FROM read_csv_auto('{beside}')",
        f"COPY (SELECT 1 AS x) TO '{tmp_path / 'out.csv'}'",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
    ]


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Any]:
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(DATA / "trips.csv", folder / "trips.csv")
    (folder / "secret.csv").write_text("password\nhunter2\n")
    zones = tmp_path / "zones"
    zones.mkdir()
    shutil.copy(DATA / "zones.csv", zones / "part1.csv")
    return {"trips": {"path": str(folder / "trips.csv")},
            "zones": {"path": str(zones)}}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_duckdb_path_refuses_files_outside_the_sources(
        path: str, sources: dict[str, Any], tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    section: dict[str, Any] = {"type": "duckdb", "files": "sources", **PATHS[path]}
    if path in ("adbc", "cli"):
        use_shared_home(tmp_path_factory)
    if path == "cli":
        section["cli"] = cli_binary()
    with gateway.connect({"engines": {"d": section}, "sources": sources}) as gw:
        assert gw.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py() == 400
        assert gw.execute("SELECT count(*) AS n FROM zones").to_arrow()["n"][0].as_py() > 0
        for sql in _outside(tmp_path):
            with pytest.raises(gateway.GatewayError, match=r"(?i)permission|disabled"):
                gw.execute(sql).to_arrow()
    assert not (tmp_path / "out.csv").exists()


def test_any_is_the_default_for_local_use(sources: dict[str, Any], tmp_path: Path) -> None:
    with gateway.connect({"engines": {"d": {"type": "duckdb"}}, "sources": sources}) as gw:
        beside = tmp_path / "data" / "secret.csv"
        assert gw.execute(f"SELECT * FROM read_csv_auto('{beside}')").to_arrow().num_rows == 1


def test_the_csv_engine_cannot_reach_past_the_sources_through_its_fallback(
        sources: dict[str, Any], tmp_path: Path) -> None:
    config = {"engines": {"scan": {"type": "csv", "fallback": "duck", "files": "sources"},
                          "duck": {"type": "duckdb", "files": "sources"}},
              "sources": sources}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT count(*) AS n FROM trips", engine="scan").to_arrow() \
            .column(0)[0].as_py() == 400
        for sql in ("SELECT * FROM read_csv_auto('/etc/passwd')", "SELECT * FROM '/etc/passwd'",
                    "SELECT * FROM read_parquet('/etc/passwd')"):
            with pytest.raises(gateway.GatewayError, match=r"(?i)not allowed|permission|disab"):
                gw.execute(sql, engine="scan").to_arrow()


def test_the_flight_service_keeps_remote_users_to_the_sources(
        sources: dict[str, Any], tmp_path: Path) -> None:
    config = {"default_engine": "duck", "engines": {"duck": {"type": "duckdb"}},
              "sources": sources}
    with serving(config) as server, dbapi.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM trips")
        assert cur.fetchall() == [(400,)]
        with pytest.raises(Exception, match=r"(?i)permission|disabled"):
            cur.execute("SELECT * FROM read_csv_auto('/etc/passwd')")
            cur.fetchall()


def test_any_file_leaves_the_service_open_when_asked(sources: dict[str, Any]) -> None:
    config = {"default_engine": "duck", "engines": {"duck": {"type": "duckdb"}},
              "sources": sources, "serve": {"any_file": True}}
    with serving(config) as server, dbapi.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM read_csv_auto('/etc/passwd', header = false, "
                    "sep = '|')")
        assert cur.fetchall()[0][0] > 0


LAKES = {"sqlite": sqlite_lake, "duckdb": duckdb_file_lake, "postgres": pg_lake}


@pytest.mark.parametrize("kind", list(LAKES))
def test_a_locked_down_lake_still_writes_and_reads_its_own_files_and_nothing_else(
        kind: str, sources: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    use_shared_home(tmp_path_factory)
    folder = tmp_path / "lake"
    args = (request.getfixturevalue("postgres"), folder) if kind == "postgres" else (folder,)
    section = LAKES[kind](*args, files="sources", data_inlining_row_limit=0)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE s AS SELECT 42 AS x")
    with gateway.connect({"engines": {"lake": section}, "sources": sources}) as gw:
        def run(sql: str) -> list[tuple[Any, ...]]:
            table = gw.execute(sql, engine="lake").to_arrow()
            return [tuple(row.values()) for row in table.to_pylist()]

        # Parquet files written, rewritten, merged and deleted under the lockdown
        run("CREATE TABLE t AS SELECT range AS x FROM range(10)")
        run("INSERT INTO t SELECT range FROM range(10, 20)")
        run("UPDATE t SET x = -x WHERE x < 3")
        run("DELETE FROM t WHERE x = 5")
        run("CALL ducklake_merge_adjacent_files('lake')")
        run("CALL ducklake_expire_snapshots('lake', older_than => now())")
        assert run("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        assert run("SELECT count(*), sum(x) FROM t") == [(19, 179)]
        assert run("SELECT count(*) FROM trips") == [(400,)]
        refused = [*_outside(tmp_path), "SELECT * FROM read_text('/etc/passwd')",
                   f"SELECT * FROM sqlite_scan('{other}', 's')",
                   f"ATTACH '{other}' AS o (TYPE sqlite)",
                   f"ATTACH 'ducklake:sqlite:{tmp_path / 'l2.sqlite'}' AS l2 "
                   f"(DATA_PATH '{tmp_path}/')",
                   "SELECT * FROM query('SELECT * FROM sqlite_' || 'scan(''x'', ''s'')')"]
        if kind == "postgres":
            refused.append("SELECT * FROM postgres_query('__ducklake_metadata_lake', "
                           "'SELECT pg_read_file(''/etc/passwd'')')")
        for sql in refused:
            with pytest.raises(gateway.GatewayError, match=r"(?i)permission|disabled|not allowed"):
                run(sql)
        assert run("SELECT count(*) FROM t") == [(19,)]
    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "l2.sqlite").exists()


def test_the_flight_service_locks_a_lake_down(sources: dict[str, Any], tmp_path: Path,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    use_shared_home(tmp_path_factory)
    config = {"default_engine": "lake", "engines": {"lake": sqlite_lake(tmp_path / "lake")},
              "sources": sources}
    with serving(config) as server, dbapi.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("CREATE TABLE t AS SELECT 1 AS x")
        cur.execute("SELECT count(*) FROM t")
        assert cur.fetchall() == [(1,)]
        for sql in ("SELECT * FROM read_csv_auto('/etc/passwd')",
                    "SELECT * FROM read_text('/etc/passwd')",
                    f"COPY (SELECT 1 AS x) TO '{tmp_path / 'out.csv'}'",
                    f"ATTACH '{tmp_path / 'x.sqlite'}' AS x (TYPE sqlite)"):
            with pytest.raises(Exception, match=r"(?i)permission|disabled|not allowed"):
                cur.execute(sql)
                cur.fetchall()
    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize("make", [adbc_sqlite, pytest.param(odbc_sqlite, marks=pytest.mark.odbc)],
                         ids=["adbc", "odbc"])
def test_a_sqlite_database_through_a_driver_reaches_no_other_file(make: Any,
                                                                   tmp_path: Path) -> None:
    config = {"default_engine": "s", "engines": {"s": make(tmp_path / "db.sqlite")}}
    with serving(config) as server, dbapi.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("CREATE TABLE t AS SELECT 1 AS x")
        cur.execute("SELECT count(*) FROM t")
        assert cur.fetchall() == [(1,)]
        for sql in (f"ATTACH DATABASE '{tmp_path / 'new.db'}' AS n",
                    f"vacuum\n main INTO '{tmp_path / 'copy.db'}'",
                    "SELECT load_extension('/tmp/nothing.so')"):
            with pytest.raises(Exception, match=r"not allowed"):
                cur.execute(sql)
                cur.fetchall()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]
