"""Databases holding given sources, and engine sections reaching them.

The sources are read through DuckDB (the reference engine, so each table has
the types the reference sees) and written with the adbc engine's bulk ingest.
The adbc and odbc engines then query the same tables through their drivers.
A Flight SQL server (``arrowgate serve``) needs no copy: its DuckDB engine
mounts the sources as any gateway does.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import gateway
from tests.pg import SUPERUSER, PostgresCluster

PG_ODBC_DRIVER = "PostgreSQL Unicode"
SQLITE_ODBC_DRIVER = "SQLite3"


def new_pg_database(postgres: PostgresCluster) -> str:
    """A new, empty database on the cluster; returns its name."""
    name = f"db_{secrets.token_hex(4)}"
    postgres.create_database(name)
    return name


def adbc_pg(postgres: PostgresCluster, dbname: str, **options: Any) -> dict[str, Any]:
    return {"type": "adbc", "driver": "postgresql", "uri": postgres.uri(dbname), **options}


def odbc_pg(postgres: PostgresCluster, dbname: str, **options: Any) -> dict[str, Any]:
    return {"type": "odbc", "connection": f"DRIVER={{{PG_ODBC_DRIVER}}};SERVER=127.0.0.1;"
            f"PORT={postgres.port};DATABASE={dbname};UID={SUPERUSER};PWD={postgres.password}",
            **options}


def adbc_sqlite(path: Path, **options: Any) -> dict[str, Any]:
    return {"type": "adbc", "driver": "sqlite", "uri": str(path), **options}


def odbc_sqlite(path: Path, **options: Any) -> dict[str, Any]:
    return {"type": "odbc", "connection": f"DRIVER={{{SQLITE_ODBC_DRIVER}}};Database={path}",
            **options}


def adbc_flight(location: str, **options: Any) -> dict[str, Any]:
    """The adbc engine on a Flight SQL server (arrowgate's own ``serve`` in the tests), whose
    default engine is a DuckDB: queries are DuckDB's dialect."""
    return {"type": "adbc", "driver": "flightsql", "uri": location, "dialect": "duckdb",
            **options}


def load_sources(section: dict[str, Any], sources: dict[str, Any]) -> None:
    """Copy every source, as DuckDB reads it, into the database ``section`` (an adbc engine) reaches."""
    config = {"engines": {"duck": {"type": "duckdb"}, "target": section}, "sources": sources}
    with gateway.connect(config) as gw:
        target = gw.engine("target")
        for name in sources:
            table = gw.execute(f'SELECT * FROM "{name}"', engine="duck").to_arrow()
            target.ingest(name, table, mode="replace")  # type: ignore[attr-defined]
