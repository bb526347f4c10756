"""The Flight SQL metadata answers: catalogs, schemas, tables, table types, keys, types.

Each engine is a catalog, so a client's object browser (``adbc_get_objects``,
DBeaver, SQLAlchemy's inspector) shows every engine the user may use, with the
engine's schemas and tables beneath it. Column names and types are the ones
the specification gives; an engine without a catalog is a catalog with no
schemas. Keys and the type list are empty: no engine reports them yet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from gateway.engine import CatalogColumn


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(name, type_, nullable=nullable) for name, type_, nullable in fields])


CATALOGS = _schema(("catalog_name", pa.string(), False))
DB_SCHEMAS = _schema(("catalog_name", pa.string(), True), ("db_schema_name", pa.string(), False))
TABLES = _schema(("catalog_name", pa.string(), True), ("db_schema_name", pa.string(), True),
                 ("table_name", pa.string(), False), ("table_type", pa.string(), False))
TABLES_WITH_SCHEMA = TABLES.append(pa.field("table_schema", pa.binary(), nullable=False))
TABLE_TYPES = _schema(("table_type", pa.string(), False))
PRIMARY_KEYS = _schema(
    ("catalog_name", pa.string(), True), ("db_schema_name", pa.string(), True),
    ("table_name", pa.string(), False), ("column_name", pa.string(), False),
    ("key_name", pa.string(), True), ("key_sequence", pa.int32(), False))
FOREIGN_KEYS = _schema(
    ("pk_catalog_name", pa.string(), True), ("pk_db_schema_name", pa.string(), True),
    ("pk_table_name", pa.string(), False), ("pk_column_name", pa.string(), False),
    ("fk_catalog_name", pa.string(), True), ("fk_db_schema_name", pa.string(), True),
    ("fk_table_name", pa.string(), False), ("fk_column_name", pa.string(), False),
    ("key_sequence", pa.int32(), False), ("fk_key_name", pa.string(), True),
    ("pk_key_name", pa.string(), True), ("update_rule", pa.uint8(), False),
    ("delete_rule", pa.uint8(), False))
XDBC_TYPE_INFO = _schema(
    ("type_name", pa.string(), False), ("data_type", pa.int32(), False),
    ("column_size", pa.int32(), True), ("literal_prefix", pa.string(), True),
    ("literal_suffix", pa.string(), True),
    ("create_params", pa.list_(pa.field("item", pa.string(), nullable=False)), True),
    ("nullable", pa.int32(), False), ("case_sensitive", pa.bool_(), False),
    ("searchable", pa.int32(), False), ("unsigned_attribute", pa.bool_(), True),
    ("fixed_prec_scale", pa.bool_(), False), ("auto_increment", pa.bool_(), True),
    ("local_type_name", pa.string(), True), ("minimum_scale", pa.int32(), True),
    ("maximum_scale", pa.int32(), True), ("sql_data_type", pa.int32(), False),
    ("datetime_subcode", pa.int32(), True), ("num_prec_radix", pa.int32(), True),
    ("interval_precision", pa.int32(), True))

#: The table types engines report (CatalogColumn.table_type).
KNOWN_TABLE_TYPES = ["BASE TABLE", "LOCAL TEMPORARY", "TABLE", "VIEW"]


@lru_cache(maxsize=256)
def like(pattern: str) -> re.Pattern[str]:
    """A SQL LIKE pattern (``%``, ``_``, backslash escapes) as a regular expression."""
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _matches(pattern: str | None, value: str) -> bool:
    return pattern is None or like(pattern).fullmatch(value) is not None


def _wanted(catalog: str | None, engines: Sequence[str]) -> list[str]:
    """The engines a catalog filter names (None: all; a name the user may not use: none)."""
    return sorted(engines) if catalog is None else [e for e in engines if e == catalog]


def catalogs(engines: Sequence[str]) -> pa.Table:
    return pa.Table.from_pydict({"catalog_name": sorted(engines)}, schema=CATALOGS)


def db_schemas(engines: Sequence[str], columns: Callable[[str], list[CatalogColumn]],
               catalog: str | None, pattern: str | None) -> pa.Table:
    rows = sorted({(engine, c.schema) for engine in _wanted(catalog, engines)
                   for c in columns(engine) if _matches(pattern, c.schema)})
    return pa.Table.from_pylist(
        [{"catalog_name": e, "db_schema_name": s} for e, s in rows], schema=DB_SCHEMAS)


def tables(engines: Sequence[str], columns: Callable[[str], list[CatalogColumn]],
           catalog: str | None, schema_pattern: str | None, table_pattern: str | None,
           table_types: Iterable[str], include_schema: bool) -> pa.Table:
    types = set(table_types)
    found: dict[tuple[str, str, str, str], list[CatalogColumn]] = {}
    for engine in _wanted(catalog, engines):
        for c in columns(engine):
            if (_matches(schema_pattern, c.schema) and _matches(table_pattern, c.table)
                    and (not types or c.table_type in types)):
                found.setdefault((engine, c.schema, c.table, c.table_type), []).append(c)
    rows = []
    for (engine, schema, table, table_type), cols in sorted(found.items()):
        row: dict[str, object] = {"catalog_name": engine, "db_schema_name": schema,
                                  "table_name": table, "table_type": table_type}
        if include_schema:
            row["table_schema"] = table_schema(engine, cols).serialize().to_pybytes()
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=TABLES_WITH_SCHEMA if include_schema else TABLES)


def table_schema(engine: str, columns: Sequence[CatalogColumn]) -> pa.Schema:
    """A table's Arrow schema, each field carrying the specification's column metadata."""
    return pa.schema([
        pa.field(c.column, c.type, nullable=c.nullable, metadata={
            "ARROW:FLIGHT:SQL:CATALOG_NAME": engine,
            "ARROW:FLIGHT:SQL:DB_SCHEMA_NAME": c.schema,
            "ARROW:FLIGHT:SQL:TABLE_NAME": c.table,
            "ARROW:FLIGHT:SQL:TYPE_NAME": str(c.type),
        }) for c in columns])


def table_types(engines: Sequence[str], columns: Callable[[str], list[CatalogColumn]]) -> pa.Table:
    seen = set(KNOWN_TABLE_TYPES)
    for engine in engines:
        seen.update(c.table_type for c in columns(engine))
    return pa.Table.from_pydict({"table_type": sorted(seen)}, schema=TABLE_TYPES)


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()
