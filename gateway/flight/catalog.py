"""The Flight SQL metadata answers: catalogs, schemas, tables, table types, keys, types.

Each engine is a catalog, so a client's object browser (``adbc_get_objects``,
DBeaver, SQLAlchemy's inspector) shows every engine the user may use, with the
engine's schemas and tables beneath it. Column names and types are the ones
the specification gives; an engine without a catalog is a catalog with no
schemas. Keys and the type list are empty: no engine reports them yet. The
levels are loaded one at a time from the core's catalog tree (LIKE patterns are
the core's), so listing catalogs or schemas never lists every column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from gateway.engine import CatalogColumn, TableRef


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

#: The table types engines report (TableRef.table_type).
TABLE_TYPE_NAMES = ["LOCAL TEMPORARY", "TABLE", "VIEW"]


def _wanted(catalog: str | None, engines: Sequence[str]) -> list[str]:
    """The engines a catalog filter names (None: all; a name the user may not use: none)."""
    return sorted(engines) if catalog is None else [e for e in engines if e == catalog]


def catalogs(engines: Sequence[str]) -> pa.Table:
    return pa.Table.from_pydict({"catalog_name": sorted(engines)}, schema=CATALOGS)


def db_schemas(engines: Sequence[str], schema_names: Callable[[str, str | None], list[str]],
               catalog: str | None, pattern: str | None) -> pa.Table:
    rows = [{"catalog_name": engine, "db_schema_name": schema}
            for engine in _wanted(catalog, engines) for schema in schema_names(engine, pattern)]
    return pa.Table.from_pylist(rows, schema=DB_SCHEMAS)


def tables(engines: Sequence[str], list_tables: Callable[..., list[TableRef]],
           columns: Callable[[str], list[CatalogColumn]], catalog: str | None,
           schema_pattern: str | None, table_pattern: str | None,
           table_types: Iterable[str], include_schema: bool) -> pa.Table:
    """``GetTables``: the engines' tables, and their schemas (one listing per engine) if asked."""
    types = list(table_types) or None
    rows: list[dict[str, object]] = []
    for engine in _wanted(catalog, engines):
        found = sorted({(t.schema, t.table, t.table_type)
                        for t in list_tables(engine, schema_pattern, table_pattern, types)})
        by_table: dict[tuple[str, str], list[CatalogColumn]] = {}
        if include_schema and found:
            for c in columns(engine):  # the first catalog holding a table's name wins
                key = (c.schema, c.table)
                if not by_table.get(key) or by_table[key][0].catalog == c.catalog:
                    by_table.setdefault(key, []).append(c)
        for schema, table, table_type in found:
            row: dict[str, object] = {"catalog_name": engine, "db_schema_name": schema,
                                      "table_name": table, "table_type": table_type}
            if include_schema:
                fields = table_schema(engine, by_table.get((schema, table), []))
                row["table_schema"] = fields.serialize().to_pybytes()
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


def table_types() -> pa.Table:
    return pa.Table.from_pydict({"table_type": TABLE_TYPE_NAMES}, schema=TABLE_TYPES)


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()
