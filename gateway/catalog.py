"""The rows of an engine's catalog tree: what :meth:`gateway.engine.Engine.catalog`,
``schemas``, ``tables`` and ``columns`` return (also importable from :mod:`gateway.engine`,
which loads this module on first use)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class CatalogColumn:
    """One column of one table an engine can query.

    ``catalog`` is the database the table lives in (DuckDB's attached
    database, PostgreSQL's database); engines without that level leave it "".
    """

    schema: str
    table: str
    column: str
    type: pa.DataType
    nullable: bool = True
    table_type: str = "TABLE"
    catalog: str = ""


@dataclass(frozen=True, order=True)
class SchemaRef:
    """One schema of the catalog tree (:meth:`Engine.schemas`)."""

    catalog: str
    schema: str


@dataclass(frozen=True, order=True)
class TableRef:
    """One table or view of the catalog tree (:meth:`Engine.tables`)."""

    catalog: str
    schema: str
    table: str
    table_type: str = "TABLE"
