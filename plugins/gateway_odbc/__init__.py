"""The ``odbc`` engine plugin: SQL Server and any ODBC source, read into Arrow by arrow-odbc.

This module is the entry point (group ``arrowgate``, name ``odbc``); it stays
light so that listing engine types does not import a driver.
"""

from __future__ import annotations

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_odbc.engine import OdbcEngine

    return [OdbcEngine]
