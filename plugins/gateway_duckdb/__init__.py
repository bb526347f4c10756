"""The ``duckdb`` engine plugin: the installed DuckDB, in process.

This module is the entry point (group ``arrowgate``, name ``duckdb``); it
stays light so that listing engine types and building the command line do not
import DuckDB.
"""

from __future__ import annotations

from typing import Any

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_duckdb.engine import DuckDBEngine

    return [DuckDBEngine]


@hookimpl
def arrowgate_register_commands(subparsers: Any) -> None:
    from gateway_duckdb import commands

    commands.register(subparsers)
