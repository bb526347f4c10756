"""Bad input to the ducklake engine: each a gateway error that says what was wrong and what to do."""

from __future__ import annotations

import sqlite3

import pytest

import gateway
from tests.lakes import DUCKDB, pg_lake, sqlite_lake
from tests.pg import free_port


def first_query(section: dict, name: str = "lake") -> None:
    with gateway.connect({"engines": {name: section}}) as gw:
        gw.execute("SELECT 1").to_arrow()


@pytest.mark.postgres
def test_unreachable_catalog(tmp_path):
    port = free_port()  # nothing listens there
    section = {"type": "ducklake", "duckdb": DUCKDB, "data_path": str(tmp_path / "d") + "/",
               "catalog": f"postgres:dbname=lake host=127.0.0.1 port={port} user=postgres "
                          "connect_timeout=5"}
    with pytest.raises(gateway.EngineConnectionError) as info:
        first_query(section)
    err = info.value
    assert err.engine == "lake"
    assert "cannot reach the catalog database" in err.message
    assert str(port) in err.message
    assert "host=" in (err.hint or "") and "port=" in (err.hint or "")


@pytest.mark.postgres
def test_wrong_password_is_never_printed(postgres, tmp_path, monkeypatch):
    section = pg_lake(postgres, tmp_path)
    wrong = "not-the-password-4711"
    monkeypatch.setenv("LAKE_PASSWORD", wrong)
    section["catalog"] = section["catalog"].replace(f"password={postgres.password}",
                                                    "password=${LAKE_PASSWORD}")
    with pytest.raises(gateway.EngineConnectionError) as info:
        first_query(section)
    text = str(info.value)
    assert "refused the login" in text and "password authentication failed" in text
    assert "PGPASSWORD" in (info.value.hint or "")
    assert wrong not in text and postgres.password not in text
    assert "password=" not in text  # the password is in a DuckDB secret, not the catalog path


@pytest.mark.postgres
def test_password_from_the_libpq_environment(postgres, tmp_path, monkeypatch):
    section = pg_lake(postgres, tmp_path)
    section["catalog"] = section["catalog"].replace(f" password={postgres.password}", "")
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    with gateway.connect({"engines": {"lake": section}}) as gw:
        assert gw.execute("SELECT current_database() AS db").to_arrow().to_pylist() == [
            {"db": "lake"}]


@pytest.mark.postgres
def test_missing_catalog_database(postgres, tmp_path):
    section = pg_lake(postgres, tmp_path)
    section["catalog"] = section["catalog"].replace("dbname=lake_", "dbname=nosuch_")
    with pytest.raises(gateway.EngineConnectionError) as info:
        first_query(section)
    assert "does not exist" in info.value.message
    assert "createdb" in (info.value.hint or "")


def set_catalog_version(section: dict, version: str) -> None:
    path = section["catalog"].removeprefix("sqlite:")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE ducklake_metadata SET value = ? WHERE key = 'version'", (version,))


def test_catalog_written_by_a_newer_ducklake(tmp_path):
    section = sqlite_lake(tmp_path)
    first_query(section)  # creates the catalog
    set_catalog_version(section, "9.9")
    with pytest.raises(gateway.ConfigError) as info:
        first_query(section)
    err = info.value
    assert err.key == "engines.lake.duckdb"
    assert "format 9.9" in err.message and "reads 1.0" in err.message
    assert "newer DuckLake" in (err.hint or "")


def test_catalog_written_by_an_older_ducklake_needs_migration(tmp_path):
    section = sqlite_lake(tmp_path)
    first_query(section)
    set_catalog_version(section, "0.3")
    with pytest.raises(gateway.ConfigError) as info:
        first_query(section)
    assert "automatic_migration = true" in (info.value.hint or "")


def test_missing_data_path(tmp_path):
    section = sqlite_lake(tmp_path)
    del section["data_path"]
    with pytest.raises(gateway.ConfigError) as info:
        first_query(section)
    assert info.value.key == "engines.lake.data_path"
    assert "data_path" in (info.value.hint or "")


def test_extension_built_for_another_duckdb(tmp_path):
    from gateway_duckdb.install import ensure_installed

    built_for_155 = ensure_installed(DUCKDB, ["ducklake"]).extensions["ducklake"]
    section = sqlite_lake(tmp_path, duckdb="1.4.4", extension_path=str(built_for_155))
    with pytest.raises(gateway.ConfigError) as info:
        first_query(section)
    err = info.value
    assert err.key == "engines.lake.extension_path"
    assert "built for DuckDB 1.5.5" in err.message and "runs DuckDB 1.4.4" in err.message
    assert 'duckdb = "1.5.5"' in (err.hint or "")


def test_extension_file_that_does_not_exist(tmp_path):
    section = sqlite_lake(tmp_path, extension_path=[str(tmp_path / "nope.duckdb_extension")])
    with pytest.raises(gateway.ConfigError) as info:
        first_query(section)
    assert "does not exist" in info.value.message


def test_own_ducklake_build_replaces_the_bundled_one(tmp_path):
    from gateway_duckdb.install import ensure_installed

    own = ensure_installed(DUCKDB, ["ducklake"]).extensions["ducklake"]
    section = sqlite_lake(tmp_path, extension_path=str(own))
    with gateway.connect({"engines": {"lake": section}}) as gw:
        engine = gw.engine("lake")
        assert "ducklake" not in engine.extensions  # type: ignore[attr-defined]
        assert gw.execute("SELECT count(*) AS n FROM ducklake_snapshots('lake')").to_arrow() \
            .to_pylist() == [{"n": 1}]


@pytest.mark.parametrize("catalog, words", [
    ("lake.sqlite", "cannot tell where the catalog lives"),
    ("oracle:scott/tiger", "cannot tell where the catalog lives"),
    ("postgres:", "names nothing"),
])
def test_bad_catalog_strings(catalog, words, tmp_path):
    with pytest.raises(gateway.ConfigError) as info:
        first_query({"type": "ducklake", "catalog": catalog})
    assert words in info.value.message
    assert info.value.key == "engines.lake.catalog"


def test_secrets_are_masked_in_the_engine_listing(cli, tmp_path):
    config = tmp_path / "arrowgate.toml"
    config.write_text('[engines.lake]\ntype = "ducklake"\n'
                      'catalog = "postgres:dbname=l host=h user=u password=hunter2"\n')
    run = cli("--config", str(config), "engines")
    assert run.code == 0, run.err
    assert "hunter2" not in run.out + run.err
    assert "password=***" in run.out
