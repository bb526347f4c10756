"""Every type PostgreSQL and SQLite return, through the adbc and odbc engines, against DuckDB's scanners.

DuckDB 1.5.5 with its ``postgres_scanner``/``sqlite_scanner`` extension
packages reads the same rows; each engine must give the same values with the
same Arrow types, except where a difference is listed here (and in
docs/adbc.md, docs/odbc.md) with its reason.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pyarrow as pa
import pytest

import gateway
from tests import sql_databases as db

PG_TABLE = """
CREATE TABLE every_type (id int, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n numeric(12,3), nu numeric, b bool, t text, vc varchar(10), ch char(3), d date, tm time,
  ts timestamp, tstz timestamptz, by bytea, u uuid, j json, jb jsonb, iv interval);
INSERT INTO every_type VALUES
 (1, -32768, 2147483647, -9223372036854775808, 0.1, 0.1, 123456789.125, 1.5, true, 'héllo',
  'abc', 'ab', '2024-02-29', '23:59:59.999999', '2024-02-29 12:34:56.789012',
  '2024-02-29 12:34:56.789012+02', '\\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '{"a": 1}', '{"b": [1, 2]}', '1 day 02:03:04'),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL);
"""

#: Where an engine differs from DuckDB's postgres scanner, by design: column -> reason.
PG_DIFFERENCES: dict[str, dict[str, str]] = {
    "adbc": {
        "ch": "char(n) keeps PostgreSQL's blank padding ('ab '); DuckDB's scanner trims it",
    },
    "odbc": {
        "ch": "char(n) keeps PostgreSQL's blank padding ('ab '); DuckDB's scanner trims it",
        "nu": "psqlODBC describes an unconstrained numeric as NUMERIC(28,6), so it arrives "
              "as decimal128(28, 6); DuckDB reads it as double",
        "iv": "psqlODBC hands interval over as text ('1 day 02:03:04'); ODBC has no "
              "month-day-nano interval",
    },
}


def _same_instant(a: pa.DataType, b: pa.DataType) -> bool:
    # 'UTC' and 'Etc/UTC' name the same zone
    return pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.unit == b.unit and \
        {a.tz, b.tz} <= {"UTC", "Etc/UTC"}


def _compare(got: pa.Table, expected: pa.Table, differences: dict[str, str]) -> None:
    assert got.column_names == expected.column_names
    for name in expected.column_names:
        g, e = got.schema.field(name).type, expected.schema.field(name).type
        if name in differences:  # the list stays true: a listed difference must still be one
            assert g != e or got.column(name).to_pylist() != expected.column(name).to_pylist(), \
                f"{name} is no longer different: {differences[name]}"
            continue
        assert g == e or _same_instant(g, e), f"{name}: {g} here, {e} from DuckDB"
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name


@pytest.fixture(scope="module")
def pg_types(postgres) -> Any:
    name = db.new_pg_database(postgres)
    postgres.psql(PG_TABLE, dbname=name)
    return postgres, name


@pytest.mark.postgres
@pytest.mark.parametrize("engine", ["adbc", pytest.param("odbc", marks=pytest.mark.odbc)])
def test_postgres_types_match_duckdb_postgres_scanner(pg_types, engine):
    postgres, name = pg_types
    section = db.adbc_pg(postgres, name) if engine == "adbc" else db.odbc_pg(postgres, name)
    config = {"engines": {engine: section, "duck": {
        "type": "duckdb", "version": "1.5.5", "extensions": ["postgres_scanner"]}}}
    with gateway.connect(config) as gw:
        gw.execute(f"ATTACH '{postgres.dsn(name)}' AS pg (TYPE postgres, READ_ONLY)",
                   engine="duck").to_arrow()
        expected = gw.execute("SELECT * FROM pg.public.every_type ORDER BY id",
                              engine="duck").to_arrow()
        got = gw.execute("SELECT * FROM every_type ORDER BY id", engine=engine).to_arrow()
    _compare(got, expected, PG_DIFFERENCES[engine])
    # the pitfalls psqlODBC sets, fixed: float8 stays float64, bool is boolean, the zone is kept
    assert got.schema.field("f8").type == pa.float64()
    assert got.column("f8")[0].as_py() == 0.1
    assert got.column("b").to_pylist() == [True, False]
    assert got.schema.field("tstz").type.tz == "UTC"
    assert str(got.column("tstz")[0].as_py()) == "2024-02-29 10:34:56.789012+00:00"


@pytest.mark.postgres
@pytest.mark.odbc
def test_odbc_typed_parameters_give_the_same_types(pg_types):
    """A statement with non-text parameters runs through pyodbc; its answer has the same types."""
    postgres, name = pg_types
    with gateway.connect({"engines": {"o": db.odbc_pg(postgres, name)}}) as gw:
        plain = gw.execute("SELECT f8, b, tstz, n, u FROM every_type WHERE id = 1").to_arrow()
        typed = gw.execute("SELECT f8, b, tstz, n, u FROM every_type WHERE id = ?",
                           parameters=[1]).to_arrow()
    assert typed.schema == plain.schema
    assert typed.to_pylist() == plain.to_pylist()


SQLITE_TABLE = """
CREATE TABLE every_type (id INTEGER, i INTEGER, big BIGINT, r REAL, d DOUBLE, t TEXT,
  vc VARCHAR(10), bl BLOB, nothing_declared);
INSERT INTO every_type VALUES (1, -5, 9007199254740993, 0.1, 2.5, 'héllo', 'abc', x'00ff', 7),
                              (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""

SQLITE_DIFFERENCES: dict[str, dict[str, str]] = {
    "adbc": {
        "nothing_declared": "the SQLite driver types a column by its values (int64 here); "
                            "DuckDB's scanner reads an undeclared column as text",
    },
    "odbc": {
        "i": "SQLite's ODBC driver reports INTEGER as SQL_INTEGER (int32); DuckDB reads int64",
        "id": "SQLite's ODBC driver reports INTEGER as SQL_INTEGER (int32); DuckDB reads int64",
        "nothing_declared": "SQLite's ODBC driver reports an undeclared column as text",
    },
}


@pytest.mark.parametrize("engine", ["adbc", pytest.param("odbc", marks=pytest.mark.odbc)])
def test_sqlite_types_match_duckdb_sqlite_scanner(tmp_path, engine):
    path = tmp_path / "types.sqlite"
    with sqlite3.connect(path) as con:
        con.executescript(SQLITE_TABLE)
    section = db.adbc_sqlite(path) if engine == "adbc" else db.odbc_sqlite(path)
    config = {"engines": {engine: section, "duck": {
        "type": "duckdb", "version": "1.5.5", "extensions": ["sqlite_scanner"]}}}
    with gateway.connect(config) as gw:
        gw.execute(f"ATTACH '{path}' AS lite (TYPE sqlite, READ_ONLY)", engine="duck").to_arrow()
        expected = gw.execute("SELECT * FROM lite.every_type ORDER BY id",
                              engine="duck").to_arrow()
        got = gw.execute("SELECT * FROM every_type ORDER BY id", engine=engine).to_arrow()
    _compare(got, expected, SQLITE_DIFFERENCES[engine])
