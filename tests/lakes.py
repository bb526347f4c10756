"""Fresh DuckLake lakes for tests: engine sections on a new catalog, and loading data into them."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

import gateway
from tests.pg import PostgresCluster

DUCKDB = "1.5.5"


def pg_lake(postgres: PostgresCluster, folder: Path, **options: Any) -> dict[str, Any]:
    """A ducklake section on a new, empty PostgreSQL database."""
    dbname = f"lake_{secrets.token_hex(4)}"
    dsn = postgres.create_database(dbname)
    return {"type": "ducklake", "catalog": f"postgres:{dsn}", "duckdb": DUCKDB,
            "data_path": str(folder / f"{dbname}-data") + "/", **options}


def sqlite_lake(folder: Path, **options: Any) -> dict[str, Any]:
    """A ducklake section on a new SQLite catalog file."""
    name = f"lake_{secrets.token_hex(4)}"
    return {"type": "ducklake", "catalog": f"sqlite:{folder / name}.sqlite", "duckdb": DUCKDB,
            "data_path": str(folder / f"{name}-data") + "/", **options}


def duckdb_file_lake(folder: Path, **options: Any) -> dict[str, Any]:
    name = f"lake_{secrets.token_hex(4)}"
    return {"type": "ducklake", "catalog": f"duckdb:{folder / name}.ducklake", "duckdb": DUCKDB,
            "data_path": str(folder / f"{name}-data") + "/", **options}


def load_sources(name: str, section: dict[str, Any], sources: dict[str, Any]) -> None:
    """Copy every source into the lake as a table of the same name (one commit each)."""
    with gateway.connect({"engines": {name: section}, "sources": sources}) as gw:
        for source in sources:
            gw.execute(f'CREATE OR REPLACE TABLE main."{source}" AS '
                       f'SELECT * FROM _arrowgate.main."{source}"', engine=name).to_arrow()


def conformance_lake(name: str, kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """A lake holding the conformance corpus' sources, for ``tests/conformance``."""
    from tests.conformance.corpus import SOURCES

    folder = request.getfixturevalue("tmp_path_factory").mktemp(name)
    if kind == "postgres":
        section = pg_lake(request.getfixturevalue("postgres"), folder)
    else:
        section = sqlite_lake(folder)
    load_sources(name, section, SOURCES)
    return section
