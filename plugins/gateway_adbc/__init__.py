"""The ``adbc`` engine plugin: any database with an ADBC driver, Arrow end to end.

This module is the entry point (group ``arrowgate``, name ``adbc``); it stays
light so that listing engine types does not import a driver.
"""

from __future__ import annotations

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_adbc.engine import AdbcEngine

    return [AdbcEngine]
