"""An outside arrowgate plugin: SQLite (the standard library's) as an engine."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from gateway import ConfigError, QueryError, hookimpl
from gateway.engine import CatalogColumn, Engine, EngineResult, Option


class SQLiteEngine(Engine):
    """SQLite in memory (or a file); CSV sources are loaded as tables on connect."""

    type_name = "sqlite"
    description = "SQLite from Python's standard library (example plugin)"
    supports_parameters = True
    supports_write = True
    supports_catalog = True
    options: ClassVar[dict[str, Option]] = {
        "database": Option((str,), default=":memory:", help="a SQLite file; memory by default"),
    }

    def __init__(self, name: str, options: Any, sources: Any):
        super().__init__(name, options, sources)
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def connect(self) -> None:
        import pyarrow.csv as pacsv

        self._con = sqlite3.connect(self.config["database"], check_same_thread=False)
        for source in self.sources.values():
            if source.format != "csv" or len(source.files()) != 1:
                raise ConfigError("the sqlite example engine loads single CSV files only",
                                  key=f"sources.{source.name}", engine=self.name)
            table = pacsv.read_csv(source.files()[0])
            cols = ", ".join(f'"{n}"' for n in table.column_names)
            marks = ", ".join("?" for _ in table.column_names)
            self._con.execute(f'CREATE TABLE "{source.name}" ({cols})')
            rows = zip(*(_sqlite_values(c.to_pylist()) for c in table.columns), strict=True)
            self._con.executemany(f'INSERT INTO "{source.name}" VALUES ({marks})', rows)

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        import pyarrow as pa

        assert self._con is not None
        with self._lock:
            try:
                cur = self._con.execute(sql, tuple(parameters or ()))
                rows = cur.fetchall()
            except sqlite3.Error as exc:
                raise QueryError(str(exc), engine=self.name) from None
            names = [d[0] for d in cur.description or ()]
        table = pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})
        return EngineResult(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))

    def catalog(self) -> list[CatalogColumn]:
        import pyarrow as pa

        assert self._con is not None
        out = []
        tables = self._con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        for (table,) in tables.fetchall():
            for row in self._con.execute(f'PRAGMA table_info("{table}")').fetchall():
                out.append(CatalogColumn("main", table, row[1], pa.string()))
        return out

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _sqlite_values(values: list[Any]) -> list[Any]:
    # SQLite stores timestamps as ISO text, the way DuckDB prints them.
    return [v.isoformat(sep=" ") if hasattr(v, "isoformat") else v for v in values]


@hookimpl
def arrowgate_engine_types() -> list[type[Engine]]:
    return [SQLiteEngine]
