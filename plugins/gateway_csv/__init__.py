"""The ``csv`` engine plugin: a compiled mmap scanner that queries raw CSV in place.

This module is the entry point (group ``arrowgate``, name ``csv``); it stays
light so that listing engine types imports neither the scanner nor pyarrow.
"""

from __future__ import annotations

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_csv.engine import CsvEngine

    return [CsvEngine]
