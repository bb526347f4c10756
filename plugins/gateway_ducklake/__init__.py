"""The ``ducklake`` engine plugin: DuckLake lakehouses through a DuckDB release that has the extension.

This module is the entry point (group ``arrowgate``, name ``ducklake``); it
stays light so that listing engine types and building the command line do not
import DuckDB.
"""

from __future__ import annotations

from typing import Any

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_ducklake.engine import DuckLakeEngine

    return [DuckLakeEngine]


@hookimpl
def arrowgate_register_commands(subparsers: Any) -> None:
    from gateway_ducklake import commands

    commands.register(subparsers)
