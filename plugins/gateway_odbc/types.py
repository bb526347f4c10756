"""Arrow types for ODBC result columns, where the driver's own report misleads arrow-odbc.

arrow-odbc chooses a type from the SQL type the driver reports; the
:class:`~gateway_odbc.describe.ColumnInfo` of each column (with the driver's
type *name*) corrects it:

- ``SQL_FLOAT``/``SQL_DOUBLE`` are read as float64 (psqlODBC reports float8
  as ``SQL_FLOAT`` with a column size in digits, which arrow-odbc reads as
  bits of precision and fetches as float32, losing digits);
- a column whose type name is ``bool``/``boolean`` is boolean (psqlODBC
  with its default ``BoolsAsChar=1`` reports it as text holding '1'/'0');
- ``SQL_BINARY(n)`` is read as variable-length binary (SQLite's driver
  reports BLOB as ``SQL_BINARY(255)``, and arrow-odbc aborts the process when
  a value is not exactly n bytes long);
- ``timestamptz``/``timestamp with time zone``/``datetimeoffset`` are
  timestamps in UTC (the engine sets the session's zone to UTC where the
  driver converts to the session's zone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway_odbc.describe import (
    SQL_DOUBLE,
    SQL_FLOAT,
    SQL_GUID,
    SQL_SS_TIMESTAMPOFFSET,
    ColumnInfo,
)

_ZONED = ("timestamptz", "timestamp with time zone", "datetimeoffset")
_BOOL = ("bool", "boolean")


def is_zoned(col: ColumnInfo) -> bool:
    return col.sql_type == SQL_SS_TIMESTAMPOFFSET or col.type_name.lower() in _ZONED


def fetch_schema(reported: Any, columns: Sequence[ColumnInfo]) -> Any:
    """The schema arrow-odbc should fetch into: ``reported`` with floats and booleans fixed."""
    import pyarrow as pa

    fields = []
    for fld, col in zip(reported, columns, strict=False):
        if col.sql_type in (SQL_FLOAT, SQL_DOUBLE) and pa.types.is_floating(fld.type):
            fld = fld.with_type(pa.float64())
        elif col.type_name.lower() in _BOOL:
            fld = fld.with_type(pa.bool_())
        elif pa.types.is_fixed_size_binary(fld.type):
            fld = fld.with_type(pa.binary())
        fields.append(fld)
    return pa.schema(fields)


def is_uuid(col: ColumnInfo) -> bool:
    return col.sql_type == SQL_GUID or col.type_name.lower() in ("uuid", "uniqueidentifier")


def answer_schema(fetched: Any, columns: Sequence[ColumnInfo]) -> Any:
    """The schema callers see: zoned timestamps labelled UTC, uuids marked for lower case."""
    import pyarrow as pa

    fields = []
    for fld, col in zip(fetched, columns, strict=False):
        if is_zoned(col) and pa.types.is_timestamp(fld.type) and fld.type.tz is None:
            fld = fld.with_type(pa.timestamp(fld.type.unit, tz="UTC"))
        elif is_zoned(col) and pa.types.is_string(fld.type):  # arrow-odbc reads it as text
            fld = fld.with_type(pa.timestamp("ns", tz="UTC"))
        elif is_uuid(col) and pa.types.is_string(fld.type):
            fld = fld.with_metadata({b"arrowgate:uuid": b"1"})
        fields.append(fld)
    return pa.schema(fields)


def to_answer(batch: Any, schema: Any) -> Any:
    """``batch`` in ``schema``: a naive UTC timestamp relabelled zoned, a uuid in lower case
    (drivers hand GUIDs over in upper case; PostgreSQL and DuckDB print them lower)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch.schema.equals(schema, check_metadata=True):
        return batch
    columns = []
    for col, fld in zip(batch.columns, schema, strict=True):
        if pa.types.is_string(col.type) and pa.types.is_timestamp(fld.type):
            col = offset_timestamps(col)
        elif col.type != fld.type:
            col = col.cast(fld.type)
        elif fld.metadata and b"arrowgate:uuid" in fld.metadata:
            col = pc.utf8_lower(col)
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def arrow_type(col: ColumnInfo) -> Any:
    """An Arrow type for a described column, where arrow-odbc does not read it (pyodbc rows,
    the catalog)."""
    import pyarrow as pa

    t = col.sql_type
    if col.type_name.lower() in _BOOL or t == -7:
        return pa.bool_()
    if t == SQL_SS_TIMESTAMPOFFSET:
        return pa.timestamp("ns", tz="UTC")
    # the unit arrow-odbc picks from the fraction digits, so both paths agree
    unit = "s" if col.digits <= 0 else "ms" if col.digits <= 3 else "us" if col.digits <= 6 \
        else "ns"
    if is_zoned(col):
        return pa.timestamp(unit, tz="UTC")
    simple = {-6: pa.int16(), 5: pa.int16(), 4: pa.int32(), -5: pa.int64(), 7: pa.float32(),
              SQL_FLOAT: pa.float64(), SQL_DOUBLE: pa.float64(), 91: pa.date32(),
              92: pa.time64("us"), 93: pa.timestamp(unit), -2: pa.binary(), -3: pa.binary(),
              -4: pa.binary()}
    if t in simple:
        return simple[t]
    if t in (2, 3):
        if 0 < col.size <= 38:
            return pa.decimal128(col.size, max(col.digits, 0))
        return pa.float64()
    return pa.string()


_OFFSET_TEXT = None


def offset_timestamps(texts: Any) -> Any:
    """SQL Server's DATETIMEOFFSET text (``2024-01-02 03:04:05.1234567 +02:00``) as UTC instants.

    arrow-odbc reads the type (ODBC type -155, not in the ODBC standard) as
    text; the fraction keeps all seven digits (nanoseconds).
    """
    import datetime
    import re

    import pyarrow as pa

    global _OFFSET_TEXT
    if _OFFSET_TEXT is None:
        _OFFSET_TEXT = re.compile(
            r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\s*"
            r"(?:([+-])(\d\d):?(\d\d)|Z)?$")
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    out: list[int | None] = []
    for text in texts.to_pylist():
        if text is None:
            out.append(None)
            continue
        m = _OFFSET_TEXT.match(text.strip())
        if m is None:
            raise ValueError(f"not a DATETIMEOFFSET value: {text!r}")
        y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
        offset = datetime.timedelta(hours=int(m.group(9) or 0), minutes=int(m.group(10) or 0))
        if m.group(8) == "-":
            offset = -offset
        moment = datetime.datetime(y, mo, d, h, mi, sec, tzinfo=datetime.timezone(offset))
        whole = (moment - epoch) // datetime.timedelta(seconds=1)
        out.append(whole * 1_000_000_000 + int((m.group(7) or "0").ljust(9, "0")))
    return pa.array(out, pa.timestamp("ns", tz="UTC"))


def datetimeoffset_from_bytes(value: bytes | None) -> Any:
    """pyodbc's output converter for SQL Server's DATETIMEOFFSET (a SQL_SS_TIMESTAMPOFFSET_STRUCT):
    year, month, day, hour, minute, second (int16), fraction in ns (uint32), offset hours and
    minutes (int16)."""
    import datetime
    import struct

    if value is None:
        return None
    y, mo, d, h, mi, sec, ns, oh, om = struct.unpack("<6hI2h", value)
    zone = datetime.timezone(datetime.timedelta(hours=oh, minutes=om))
    return datetime.datetime(y, mo, d, h, mi, sec, ns // 1000, tzinfo=zone)
