"""DuckDB's names of the types of the csv engine's columns, of each column of a file,
and the Arrow type DuckDB answers each with.

:mod:`gateway_csv.native` types its operations by these names; a projection of
columns (:mod:`gateway_csv.shape`) needs only them, not its table of operations
(a one-row ``arrowgate query``: 1 ms, see :mod:`gateway.cli.startup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from gateway_csv.layout import BOOL, FLOAT, HUGE, INT, STR, TS, TSTZ
from gateway_csv.layout import DATE as DATE_KIND
from gateway_csv.layout import TIME as TIME_KIND

if TYPE_CHECKING:
    from gateway_csv.layout import Layout

BOOLEAN, INTEGER, BIGINT, HUGEINT, DOUBLE = "BOOLEAN", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE"
VARCHAR, DATE, TIMESTAMP, TIMESTAMPTZ, TIME = "VARCHAR", "DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIME"
DECIMAL = "DECIMAL"


def column_types(layout: Layout | None) -> dict[str, str]:
    """DuckDB's type of each column of ``layout`` (lower-case names)."""
    if layout is None:
        return {}
    return {name.lower(): _KIND_TYPES[kind] for name, kind in zip(layout.names, layout.kinds,
                                                                   strict=True)}


def kind_type(kind: int) -> str:
    """DuckDB's name of the type of a column the scanner reads as ``kind``."""
    return _KIND_TYPES[kind]


_KIND_TYPES = {STR: VARCHAR, INT: BIGINT, FLOAT: DOUBLE, TS: TIMESTAMP, TSTZ: TIMESTAMPTZ,
               BOOL: BOOLEAN, DATE_KIND: DATE, HUGE: HUGEINT, TIME_KIND: TIME}


def arrow_type(name: str) -> pa.DataType | None:
    """The Arrow type DuckDB's Arrow export gives a type (None: leave the answer's own)."""
    return {BOOLEAN: pa.bool_(), INTEGER: pa.int32(), BIGINT: pa.int64(),
            HUGEINT: pa.decimal128(38, 0), DOUBLE: pa.float64(), VARCHAR: pa.string(),
            DATE: pa.date32(), TIMESTAMP: pa.timestamp("us"),
            TIMESTAMPTZ: pa.timestamp("us", tz="Etc/UTC"), TIME: pa.time64("us")}.get(name)
