"""``arrowgate lake check`` and the catalog strings behind it (PostgreSQL and SQLite for real)."""

from __future__ import annotations

import json
import sys

import pytest

import gateway
from gateway.drivers.odbc import mssql_odbc_string, parse_connection_string
from gateway_ducklake.catalog import CatalogSpec, parse_libpq
from gateway_ducklake.health import (
    DIALECTS,
    MSSQL_CATALOG_COLLATION,
    WARN,
    catalog_queries,
    connect_catalog,
    mssql_collation_query,
    mssql_findings,
)
from tests.lakes import pg_lake, sqlite_lake


# -- catalog strings ---------------------------------------------------------------
def test_catalog_kinds_and_attach_targets(tmp_path):
    assert CatalogSpec.parse("postgres:dbname=l host=h").attach_target == "postgres:dbname=l host=h"
    assert CatalogSpec.parse("postgresql:dbname=l").kind == "postgres"
    assert CatalogSpec.parse("duckdb:meta.ducklake", base_dir=tmp_path).attach_target == \
        str(tmp_path / "meta.ducklake")
    assert CatalogSpec.parse("sqlite:/abs/c.sqlite").attach_target == "sqlite:/abs/c.sqlite"
    spec = CatalogSpec.parse("mssql:Server=h,1433;Database=lake;Password=p")
    assert spec.kind == "mssql" and spec.extensions == ()


def test_libpq_keywords_and_uris():
    assert parse_libpq("dbname=lake host=db port=5433 password='a b' user=u") == {
        "dbname": "lake", "host": "db", "port": "5433", "password": "a b", "user": "u"}
    assert parse_libpq(r"password='a b\' c'")["password"] == "a b' c"
    assert parse_libpq("postgresql://app:s%40cret@db:5433/lake") == {
        "host": "db", "port": "5433", "user": "app", "password": "s@cret", "dbname": "lake"}
    with pytest.raises(gateway.ConfigError, match="not a libpq connection string"):
        parse_libpq("dbname=lake password='it''s'")


def test_printable_catalog_masks_passwords():
    pg = CatalogSpec.parse("postgres:dbname=l password=hunter2 host=h")
    assert "hunter2" not in pg.printable() and pg.secrets() == ["hunter2"]
    ms = CatalogSpec.parse("mssql:Server=h;Pwd={a;b}}c};Database=l")
    assert "a;b" not in ms.printable() and "Database=l" in ms.printable()
    assert ms.secrets() == ["a;b}c"]


def test_mssql_strings_with_braces():
    keys = parse_connection_string("Server=tcp:h,1433; Database=lake ;User Id=app;Password={x;y=}}z};Encrypt=yes")
    assert keys == {"server": "tcp:h,1433", "database": "lake", "user id": "app",
                    "password": "x;y=}z", "encrypt": "yes"}
    with pytest.raises(gateway.ConfigError, match="never closed"):
        parse_connection_string("Server=h;Password={abc")
    assert CatalogSpec.parse("mssql:Server=h;PWD=abc;Database=d").printable() == \
        "mssql:Server=h;PWD=***;Database=d"


def test_mssql_odbc_connection_string():
    odbc = mssql_odbc_string("Server=h,1433;Database=lake;User Id=app;Password=p;"
                             "TrustServerCertificate=yes")
    assert odbc == ("DRIVER={ODBC Driver 18 for SQL Server};SERVER=h,1433;DATABASE=lake;UID=app;"
                    "PWD=p;TrustServerCertificate=yes")
    assert mssql_odbc_string("Server=h;Database=d", driver="FreeTDS").startswith("DRIVER={FreeTDS};")
    assert mssql_odbc_string("Driver={My Driver};Server=h;Database=d").startswith(
        "DRIVER={My Driver};SERVER=h")
    assert "PWD={x;y}" in mssql_odbc_string("Server=h;Database=d;Password={x;y}")
    with pytest.raises(gateway.ConfigError, match="'b' has no '='"):
        mssql_odbc_string("Server=h;Database=d;Password=a;b")
    with pytest.raises(gateway.ConfigError, match="no Server="):
        mssql_odbc_string("Database=d")
    with pytest.raises(gateway.ConfigError, match="no Database="):
        mssql_odbc_string("Server=h")


# -- SQL Server checks, offline ------------------------------------------------------
def test_mssql_catalog_queries_quote_for_tsql():
    queries = catalog_queries(DIALECTS["mssql"], "lake]x")
    assert "FROM [lake]]x].[ducklake_metadata]" in queries["metadata"]
    assert "[key]" in queries["metadata"]
    assert "N'it''s'" in mssql_collation_query("it's")


GOOD = {"product_version": "16.0.4135.4", "compatibility_level": 160,
        "collation_name": "SQL_Latin1_General_CP1_CI_AS", "is_parameterization_forced": True,
        "is_auto_create_stats_on": True, "is_auto_update_stats_on": True,
        "is_auto_update_stats_async_on": True, "is_read_committed_snapshot_on": False}


def test_mssql_findings_when_the_database_is_shaped():
    findings = mssql_findings(GOOD, {MSSQL_CATALOG_COLLATION: 120})
    assert not [f for f in findings if f.status == WARN]
    assert {f.name: f.value for f in findings}["forced_parameterization"] == "on"


def test_mssql_findings_name_what_to_change():
    row = dict(GOOD, is_parameterization_forced=0, is_auto_update_stats_async_on=0)
    findings = {f.name: f for f in mssql_findings(row, {"SQL_Latin1_General_CP1_CI_AS": 7,
                                                        MSSQL_CATALOG_COLLATION: 3})}
    assert findings["forced_parameterization"].status == WARN
    assert "SET PARAMETERIZATION FORCED" in findings["forced_parameterization"].advice
    assert findings["auto_update_statistics_async"].status == WARN
    assert "AUTO_UPDATE_STATISTICS_ASYNC ON" in findings["auto_update_statistics_async"].advice
    assert findings["catalog_collation"].status == WARN
    assert "SQL_Latin1_General_CP1_CI_AS (7 columns)" in findings["catalog_collation"].value


def test_mssql_check_without_pyodbc_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    with pytest.raises(gateway.ConfigError) as info:
        connect_catalog(CatalogSpec.parse("mssql:Server=h;Database=d"), "lake")
    assert "pyodbc" in (info.value.hint or "") and "ducklake extra" in (info.value.hint or "")


# -- lake check, for real --------------------------------------------------------------
def write_config(path, section: dict) -> str:
    lines = ["[engines.lake]"] + [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    path.write_text("\n".join(lines) + '\n\n[engines.plain]\ntype = "duckdb"\n')
    return str(path)


def make_lake(section: dict) -> None:
    with gateway.connect({"engines": {"lake": section}}) as gw:
        for sql in ("CREATE TABLE a (v INTEGER)", "INSERT INTO a VALUES (1), (2)",
                    "CREATE TABLE b AS SELECT range AS v FROM range(50)"):
            gw.execute(sql).to_arrow()


@pytest.mark.postgres
def test_lake_check_on_postgres(postgres, tmp_path, cli):
    section = pg_lake(postgres, tmp_path)
    make_lake(section)
    config = write_config(tmp_path / "arrowgate.toml", section)
    run = cli("--config", config, "lake", "check", "lake", "--format", "json")
    assert run.code == 0, run.err
    report = json.loads(run.out)
    found = {f["name"]: f for f in report["findings"]}
    assert found["catalog_version"]["value"] == "1.0" and found["catalog_version"]["status"] == "ok"
    assert found["tables"]["value"] == "2"
    assert found["snapshots"]["value"] == "4"
    # every table gets an inlined-data table; only a's two rows are still in it
    assert found["inlined_data_tables"]["value"] == "2 holding 2 live rows"
    assert "ducklake_flush_inlined_data('lake')" in found["inlined_data_tables"]["advice"]
    assert found["server_version"]["value"].startswith("15")
    assert postgres.password not in run.out
    strict = cli("--config", config, "lake", "check", "lake", "--strict")
    assert strict.code == 1 and "inlined_data_tables" in strict.out


def test_lake_check_on_sqlite_after_a_flush(tmp_path, cli):
    section = sqlite_lake(tmp_path)
    make_lake(section)
    with gateway.connect({"engines": {"lake": section}}) as gw:
        gw.execute("CALL ducklake_flush_inlined_data('lake')").to_arrow()
    config = write_config(tmp_path / "arrowgate.toml", section)
    run = cli("--config", config, "lake", "check", "lake", "--strict")
    assert run.code == 0, run.out + run.err
    assert "2 holding 0 live rows" in run.out
    assert "data_files" in run.out


@pytest.mark.postgres
def test_lake_check_with_a_wrong_password(postgres, tmp_path, cli):
    section = pg_lake(postgres, tmp_path)
    section["catalog"] = section["catalog"].replace(postgres.password, "wrong-pw-99")
    run = cli("--config", write_config(tmp_path / "arrowgate.toml", section),
              "lake", "check", "lake")
    assert run.code == 1
    assert "password authentication failed" in run.err and "wrong-pw-99" not in run.err


def test_lake_check_refuses_other_engines_and_kinds(tmp_path, cli):
    config = write_config(tmp_path / "arrowgate.toml",
                          {"type": "ducklake", "catalog": f"duckdb:{tmp_path}/m.ducklake"})
    plain = cli("--config", config, "lake", "check", "plain")
    assert plain.code == 2 and "not ducklake" in plain.err and "lake" in plain.err
    kind = cli("--config", config, "lake", "check", "lake")
    assert kind.code == 2 and "does not read duckdb catalogs" in kind.err
    missing = cli("--config", config, "lake", "check", "nope")
    assert missing.code == 2 and "no engine named 'nope'" in missing.err


def test_the_attach_string_never_holds_the_password():
    for catalog in ("postgres:dbname=l host=h user=u password='it\\'s a secret' sslmode=require",
                    "postgresql://u:it%27s%20a%20secret@h:5433/l?sslmode=require",
                    "postgres:postgresql://u:it%27s%20a%20secret@h/l"):
        spec = CatalogSpec.parse(catalog)
        assert "secret" not in spec.attach_target, catalog
        assert spec.secret_sql() == \
            "CREATE OR REPLACE SECRET arrowgate_lake_catalog (TYPE postgres, PASSWORD 'it''s a secret')"
        assert spec.metadata_parameters() == {"SECRET": "arrowgate_lake_catalog"}
        keys = parse_libpq(spec.attach_target.removeprefix("postgres:"))
        assert keys["host"] == "h" and keys["user"] == "u" and keys["dbname"] == "l"
        assert keys.get("sslmode", "require") == "require"
    plain = CatalogSpec.parse("postgres:dbname=l host=h")
    assert plain.attach_target == "postgres:dbname=l host=h" and plain.secret_sql() is None
    assert plain.metadata_parameters() == {}


def test_uris_with_several_hosts_and_parameters():
    assert parse_libpq("postgresql://u@h1:5432,[::1]:5433/db?sslmode=verify-full&application_name=ag") \
        == {"user": "u", "host": "h1,::1", "port": "5432,5433", "dbname": "db",
            "sslmode": "verify-full", "application_name": "ag"}


def test_sslpassword_in_a_catalog_is_refused():
    section = {"type": "ducklake", "catalog": "postgres:dbname=l host=h sslpassword=kp1234"}
    with gateway.connect({"engines": {"lake": section}}) as gw, \
            pytest.raises(gateway.ConfigError) as info:
        gw.execute("SELECT 1")
    assert "sslpassword" in info.value.message and "kp1234" not in str(info.value)
