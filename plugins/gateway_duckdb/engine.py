"""The installed DuckDB, in process."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.engine import CatalogColumn, Engine, EngineResult, Option
from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
)
from gateway_duckdb.mount import SOURCES_CATALOG, literal, mount_statements, quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 122_880  # DuckDB's row-group size: batches line up with its vectors
_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def translate(exc: BaseException, engine: str) -> GatewayError:
    """A DuckDB exception as the gateway error a caller should see."""
    name = type(exc).__name__
    message = str(exc)
    if name == "InterruptException" or "INTERRUPT" in message.upper():
        return Cancelled("the query was cancelled", engine=engine)
    if name in ("IOException", "ConnectionException") and "database" in message.lower():
        return EngineConnectionError(message, engine=engine)
    return QueryError(message, engine=engine)


class DuckDBEngine(Engine):
    """DuckDB, the version installed beside arrowgate, running in this process."""

    type_name = "duckdb"
    description = "DuckDB in process"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True

    options: ClassVar[dict[str, Option]] = {
        "database": Option((str,), default=":memory:",
                           help="a DuckDB database file; in memory when absent"),
        "read_only": Option((bool,), default=False, help="open the database read-only"),
        "settings": Option((dict,), default={},
                           help="DuckDB settings applied with SET, e.g. { threads = 2 }"),
    }

    def __init__(self, name: str, options: Any, sources: Any):
        super().__init__(name, options, sources)
        self._con: Any = None
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        for key in self.config["settings"]:
            if not _SETTING_NAME.match(key):
                raise ConfigError("not a DuckDB setting name", key=f"engines.{name}.settings.{key}")

    @classmethod
    def describe_version(cls, options: Any) -> str | None:
        try:
            return version("duckdb")
        except PackageNotFoundError:
            return None

    # -- lifecycle -------------------------------------------------------
    def connect(self) -> None:
        import duckdb

        database = self.config["database"]
        try:
            self._con = duckdb.connect(database, read_only=self.config["read_only"])
        except duckdb.Error as exc:
            raise EngineConnectionError(f"cannot open database {database!r}: {exc}",
                                        engine=self.name) from None
        self._apply_settings(self._con, check=True)
        for stmt in mount_statements(self.sources):
            try:
                self._con.execute(stmt)
            except duckdb.Error as exc:
                raise QueryError(f"cannot mount the sources: {exc}", engine=self.name,
                                 hint="check the [sources] paths and CSV options") from None

    def _apply_settings(self, con: Any, check: bool = False) -> None:
        import duckdb

        for key, value in self.config["settings"].items():
            try:
                con.execute(f"SET {key} = {literal(value)}")
            except duckdb.Error as exc:
                if not check:
                    raise translate(exc, self.name) from None
                raise ConfigError(str(exc).splitlines()[0], key=f"engines.{self.name}.settings.{key}",
                                  engine=self.name,
                                  hint="see DuckDB's list: SELECT * FROM duckdb_settings()") from None

    def _cursor(self) -> Any:
        with self._lock:
            if self._con is None:
                raise EngineConnectionError("the engine is closed", engine=self.name)
            cur = self._con.cursor()
        self._apply_settings(cur)
        default = cur.execute("SELECT current_database()").fetchall()[0][0]
        cur.execute(f"SET search_path = {literal(f'{default}.main,{SOURCES_CATALOG}.main')}")
        return cur

    def close(self) -> None:
        with self._lock:
            con, self._con = self._con, None
        if con is not None:
            con.close()

    def cancel(self) -> None:
        for cur in list(self._running):
            try:
                cur.interrupt()
            except Exception:  # an already finished cursor cannot be interrupted
                pass

    # -- queries ---------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        import duckdb
        import pyarrow as pa

        cur = self._cursor()
        self._running.add(cur)
        try:
            rel = cur.sql(sql, params=list(parameters) if parameters is not None else None)
            if rel is None:
                self._release(cur)
                return EngineResult(pa.RecordBatchReader.from_batches(pa.schema([]), []))
            reader = _arrow_reader(rel)
        except duckdb.Error as exc:
            self._release(cur)
            raise translate(exc, self.name) from None
        return EngineResult(pa.RecordBatchReader.from_batches(reader.schema,
                                                              self._stream(reader, cur)))

    def _stream(self, reader: pa.RecordBatchReader, cur: Any) -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except Exception as exc:
            raise translate(exc, self.name) from None
        finally:
            self._release(cur)

    def _release(self, cur: Any) -> None:
        self._running.discard(cur)
        try:
            cur.close()
        except Exception:  # closing twice, or after the database went away
            pass

    def catalog(self) -> list[CatalogColumn]:
        import duckdb

        cur = self._cursor()
        try:
            tables = cur.execute(
                "SELECT table_catalog, table_schema, table_name, table_type "
                "FROM information_schema.tables "
                "WHERE table_catalog NOT IN ('system', 'temp') "
                "ORDER BY table_catalog <> current_database(), 1, 2, 3"
            ).fetchall()
            columns: list[CatalogColumn] = []
            for db, schema, table, kind in tables:
                qualified = ".".join(quote_ident(p) for p in (db, schema, table))
                arrow_schema = _arrow_reader(cur.sql(f"SELECT * FROM {qualified} LIMIT 0")).schema
                shown_schema = "main" if db == SOURCES_CATALOG else schema
                for fld in arrow_schema:
                    columns.append(CatalogColumn(shown_schema, table, fld.name, fld.type,
                                                 fld.nullable, "VIEW" if kind == "VIEW" else "TABLE"))
            return columns
        except duckdb.Error as exc:
            raise translate(exc, self.name) from None
        finally:
            cur.close()


def _arrow_reader(rel: Any) -> pa.RecordBatchReader:
    # to_arrow_reader exists from DuckDB 1.5 (and is the only one left in 2.x);
    # 1.4 names it fetch_record_batch.
    if hasattr(rel, "to_arrow_reader"):
        return rel.to_arrow_reader(BATCH_ROWS)
    return rel.fetch_record_batch(BATCH_ROWS)
