"""The scanner's output as Arrow: column arrays, conversions, an answer's table and its order.

Shared by the planner's path (:mod:`gateway_csv.run`) and the statements read
without the planner (:mod:`gateway_csv.shape`), so both answer alike; nothing
here imports sqlglot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from gateway.cli.startup import LazyModule, sort_functions
from gateway.drivers import arrow_values
from gateway.errors import QueryError
from gateway_csv.layout import BOOL, DATE, FLOAT, HUGE, INT, STR, TIME, TS, TSTZ, Layout
from gateway_csv.scan import Plan, Scanner

pc: Any = LazyModule("pyarrow.compute")
_FALSE = arrow_values.scalar(False, pa.bool_())

_ARROW_TYPES = {STR: pa.string(), INT: pa.int64(), FLOAT: pa.float64(),
                TS: pa.timestamp("us"), TSTZ: pa.timestamp("us", tz="UTC"), BOOL: pa.bool_(),
                DATE: pa.date32(), HUGE: pa.decimal128(38, 0), TIME: pa.time64("us")}


def arrow_type(kind: int) -> pa.DataType:
    return _ARROW_TYPES[kind]


def column_array(kind: int, rows: int, payload: tuple[bytes, bytes, bytes, int]) -> pa.Array:
    """One scanner output column as an Arrow array (buffers wrapped, not copied)."""
    validity, values, data, nulls = payload
    vbuf = pa.py_buffer(validity) if nulls else None
    if kind == STR:
        return pa.Array.from_buffers(pa.string(), rows, [vbuf, pa.py_buffer(values),
                                                         pa.py_buffer(data)], nulls)
    return pa.Array.from_buffers(arrow_type(kind), rows, [vbuf, pa.py_buffer(values)], nulls)


def scanned(scanner: Scanner, slots: tuple[tuple[int, int], ...],
            filters: tuple[tuple[int, int, str, Any], ...], limit: int) \
        -> Iterator[tuple[int, dict[str, pa.Array]]]:
    """(rows, the slots' columns by lower-case name), batch by batch, of one file's scan."""
    layout = scanner.layout
    for rows, payload in scanner.results(Plan(slots=slots, filters=filters), limit):
        columns = {}
        for (col, kind), part in zip(slots, payload, strict=True):
            arr = column_array(kind, rows, part)
            if kind != layout.kinds[col]:
                arr = convert(arr, layout, col, scanner.path)
            columns[layout.names[col].lower()] = arr
        yield rows, columns


def convert(arr: pa.Array, layout: Layout, col: int, path: str) -> pa.Array:
    """A column the scanner read as text, as its sniffed or declared type."""
    kind = layout.kinds[col]
    fmt = layout.formats.get(col) or layout.timestamp_format
    try:
        if kind == HUGE:
            return pc.utf8_trim(arr, characters=" \t").cast(arrow_type(HUGE))
        if kind == TIME:
            # Arrow casts no text to time64: read it as a time of 1970-01-01
            day = pc.binary_join_element_wise(arrow_values.scalar("1970-01-01 ", pa.string()),
                                              pc.utf8_trim(arr, characters=" \t"),
                                              arrow_values.scalar("", pa.string()))
            return day.cast(pa.timestamp("us")).cast(pa.int64()).cast(arrow_type(TIME))
        out = pc.strptime(pc.utf8_trim(arr, characters=" \t"), format=fmt, unit="us",
                          error_is_null=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        what = {HUGE: "an integer of at most 38 digits", TIME: "a time (HH:MM:SS)"}.get(
            kind, f"a value of the format {fmt!r}")
        raise QueryError(f"{path}: column {layout.names[col]!r}: a value is not {what} "
                         f"({str(exc).splitlines()[0]})",
                         hint='declare the column\'s type in the source\'s "columns" table'
                         if kind != TS or not layout.timestamp_format else
                         "fix the source's timestamp_format", kind="type") from None
    return out if kind == TS else out.cast(arrow_type(kind))


def answer_table(names: list[str], columns: list[pa.Array], types: list[str] | None = None) \
        -> pa.Table:
    """The answer's columns, each of DuckDB's Arrow type for it (``types``: the select
    items' DuckDB types; INTEGER constants, HUGEINT sums and zone names differ from
    Arrow's own)."""
    from gateway_csv.typenames import arrow_type as duckdb_arrow_type

    columns = list(columns)
    for i, name in enumerate(types or []):
        target = duckdb_arrow_type(name)
        if target is not None and columns[i].type != target:
            columns[i] = columns[i].cast(target)
    # duplicate output names are legal SQL; Arrow tables allow them too
    return pa.Table.from_arrays(columns, names=names)


def ordered(table: pa.Table, arrays: list[pa.Array], directions: list[tuple[bool, bool]]) \
        -> pa.Table:
    """``table``'s rows in ORDER BY's order of ``arrays`` (one per row of the table), each
    with its (descending, nulls first); DuckDB's default is NULLS LAST."""
    call, _ = sort_functions()
    return call("take", [table, sort_indices(arrays, directions)])


def sort_indices(arrays: list[pa.Array], directions: list[tuple[bool, bool]]) -> pa.Array:
    """Row order for ORDER BY with per-key (descending, nulls first)."""
    call, sort_options = sort_functions()
    columns: dict[str, pa.Array] = {}
    sort_keys: list[tuple[str, str]] = []
    for i, (arr, (desc, nulls_first)) in enumerate(zip(arrays, directions, strict=True)):
        columns[f"n{i}"] = call("is_null", [arr])
        columns[f"v{i}"] = arr
        sort_keys.append((f"n{i}", "descending" if nulls_first else "ascending"))
        direction = "descending" if desc else "ascending"
        if pa.types.is_floating(arr.type):
            # DuckDB orders NaN above every number; Arrow puts NaN last either way
            columns[f"nan{i}"] = call("coalesce", [call("is_nan", [arr]), _FALSE])
            sort_keys.append((f"nan{i}", direction))
        sort_keys.append((f"v{i}", direction))
    return call("sort_indices", [pa.table(columns)], sort_options(sort_keys))


def sliced(table: pa.Table, offset: int, limit: int | None) -> pa.Table:
    """``table`` from row ``offset`` on, at most ``limit`` rows of it (LIMIT/OFFSET)."""
    if offset or limit is not None:
        return table.slice(offset, None if limit is None else max(0, limit))
    return table


def limited(tables: Iterable[pa.Table], offset: int, limit: int | None) -> Iterator[pa.Table]:
    """``tables`` without their first ``offset`` rows, and no more than ``limit`` rows of
    them; ``tables`` is not read on once the limit is reached."""
    to_skip, remaining = offset, limit
    for table in tables:
        if to_skip:
            dropped = min(to_skip, table.num_rows)
            table = table.slice(dropped)
            to_skip -= dropped
        if remaining is not None:
            table = table.slice(0, remaining)
            remaining -= table.num_rows
        yield table
        if remaining is not None and remaining <= 0:
            return
