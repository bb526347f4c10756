"""The ``ducklake`` engine plugin: DuckLake lakehouses through a DuckDB release that has the extension.

This module is the entry point (group ``arrowgate``, name ``ducklake``); it
stays light so that listing engine types does not import DuckDB.
"""

from __future__ import annotations

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_ducklake.engine import DuckLakeEngine

    return [DuckLakeEngine]
