"""The ``adbc`` engine: a database reached through an ADBC driver, answers Arrow end to end.

The driver is an installed package (``driver = "postgresql"`` loads
``adbc_driver_postgresql``) or a shared library (``driver_path`` and
``entrypoint``); ``db_kwargs`` and ``conn_kwargs`` go to the driver as they
are. Statements run on :class:`gateway.drivers.adbc.ConnectionPool` (one
connection per running statement), are rewritten for the driver's dialect and
placeholder style by :class:`gateway.drivers.dialects.SqlRewriter`, and a
``timeout`` cancels the statement through ``adbc_cancel``.

The engine does not mount the configuration's sources: it queries what its
database holds. :meth:`AdbcEngine.ingest` writes Arrow data into it, where the
driver has bulk ingest.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from gateway.drivers.dialects import SqlRewriter, Style
from gateway.engine import CatalogColumn, Engine, EngineResult, Option
from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    Unsupported,
)

#: sqlglot's dialect and the placeholder style of each driver package that has one.
DRIVER_DIALECTS: dict[str, tuple[str | None, Style]] = {
    "postgresql": ("postgres", "numeric"),
    "sqlite": ("sqlite", "qmark"),
    "flightsql": (None, "qmark"),
    "snowflake": ("snowflake", "qmark"),
    "bigquery": ("bigquery", "qmark"),
    "spark": ("spark", "qmark"),
    "duckdb": ("duckdb", "qmark"),
}


class AdbcEngine(Engine):
    type_name = "adbc"
    description = "any database with an ADBC driver (PostgreSQL, SQLite, Flight SQL, ...)"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True

    options: ClassVar[Mapping[str, Option]] = {
        "driver": Option((str,), help="an installed driver package: postgresql, sqlite, "
                                      "flightsql, snowflake, ... (adbc_driver_<name>)"),
        "driver_path": Option((str,), help="a driver's shared library, instead of driver"),
        "entrypoint": Option((str,), help="the driver's init function in driver_path "
                                          "(default AdbcDriverInit)"),
        "uri": Option((str,), secret=True, help="the database's URI (the driver's uri option)"),
        "db_kwargs": Option((dict,), default={}, secret=True,
                            help="options for the driver's database (credentials via ${VAR})"),
        "conn_kwargs": Option((dict,), default={}, secret=True,
                              help="options for each connection"),
        "dialect": Option((str,), help="the SQL dialect (sqlglot's name); default from driver"),
        "transpile_from": Option((str,), help="the dialect queries are written in (e.g. duckdb); "
                                              "sqlglot rewrites them for this engine"),
        "paramstyle": Option((str,), choices=("qmark", "numeric"),
                             help="the placeholders the driver takes: ? or $1 "
                                  "(default from driver)"),
        "timeout": Option((int, float), help="seconds a query may run before it is cancelled"),
    }

    def __init__(self, name: str, options: Mapping[str, Any], sources: Mapping[str, Any]):
        super().__init__(name, options, sources)
        driver = self.config.get("driver")
        if bool(driver) == bool(self.config.get("driver_path")):
            raise ConfigError("set driver (an installed driver package) or driver_path "
                              "(a driver library), not both and not neither",
                              key=f"engines.{name}.driver", engine=name,
                              hint='driver = "postgresql" | "sqlite" | "flightsql" | ...')
        known = DRIVER_DIALECTS.get(driver or "", (None, "qmark"))
        self.dialect: str | None = self.config.get("dialect") or known[0]
        style: Style = self.config.get("paramstyle") or known[1]
        if self.config.get("transpile_from") and not self.dialect:
            raise ConfigError("transpile_from needs the engine's dialect",
                              key=f"engines.{name}.dialect", engine=name,
                              hint='set dialect = "postgres" | "sqlite" | "tsql" | ...')
        self.rewriter = SqlRewriter(self.dialect, style, self.config.get("transpile_from"), name)
        self._pool: Any = None

    @classmethod
    def describe_version(cls, options: Mapping[str, Any]) -> str | None:
        from importlib.metadata import PackageNotFoundError, version

        driver = options.get("driver")
        if not driver:
            return None
        try:
            return version(f"adbc-driver-{driver}")
        except PackageNotFoundError:
            return None

    # -- lifecycle -------------------------------------------------------
    def _driver(self) -> tuple[str, str | None]:
        driver = self.config.get("driver")
        if driver:
            try:
                module = importlib.import_module(f"adbc_driver_{driver}")
            except ImportError:
                raise ConfigError(f"the ADBC driver {driver!r} is not installed",
                                  key=f"engines.{self.name}.driver", engine=self.name,
                                  hint=f"pip install adbc-driver-{driver}, or set driver_path"
                                  ) from None
            return str(module._driver_path()), None
        return str(self.config["driver_path"]), self.config.get("entrypoint")

    def connect(self) -> None:
        import adbc_driver_manager
        import adbc_driver_manager.dbapi as dbapi

        from gateway.drivers.adbc import ConnectionPool

        path, entrypoint = self._driver()
        db_kwargs = {k: str(v) for k, v in self.config["db_kwargs"].items()}
        if self.config.get("uri"):
            db_kwargs["uri"] = self.config["uri"]
        conn_kwargs = {k: str(v) for k, v in self.config["conn_kwargs"].items()}
        try:
            first = dbapi.connect(driver=path, entrypoint=entrypoint, db_kwargs=db_kwargs,
                                  conn_kwargs=conn_kwargs, autocommit=True)
        except adbc_driver_manager.Error as exc:
            raise self._connect_error(exc) from None
        except OSError as exc:  # the library itself cannot be loaded
            raise ConfigError(f"cannot load the ADBC driver {path}: {exc}",
                              key=f"engines.{self.name}.driver_path", engine=self.name) from None
        self._pool = ConnectionPool(first, setup=lambda con: None, translate=self._translate,
                                    engine=self.name)

    def _connect_error(self, exc: BaseException) -> GatewayError:
        from gateway.config import redact
        from gateway.drivers.adbc import error_message

        message = redact(error_message(exc))
        for value in self._secrets():
            message = message.replace(value, "***")
        lower = message.lower()
        if "password" in lower or "authentication" in lower or "unauthenticated" in lower:
            hint = "check the user and password (db_kwargs or the uri, through ${VAR})"
        elif "no such file" in lower or "could not load" in lower or "dlopen" in lower:
            return ConfigError(f"cannot load the ADBC driver: {message}", engine=self.name,
                               key=f"engines.{self.name}.driver_path")
        else:
            hint = "check the host, port and that the server accepts connections"
        return EngineConnectionError(f"cannot connect: {message}", engine=self.name, hint=hint)

    def _secrets(self) -> list[str]:
        kwargs = {**self.config["db_kwargs"], **self.config["conn_kwargs"]}
        return [str(v) for k, v in kwargs.items() if str(v) and any(
            word in k.lower() for word in ("password", "token", "secret", "key"))]

    def _translate(self, exc: BaseException) -> GatewayError:
        from gateway.drivers.adbc import error_message, was_cancelled

        if isinstance(exc, GatewayError):
            return exc
        if was_cancelled(exc) or "canceling statement due to user request" in str(exc):
            return Cancelled("the query was cancelled", engine=self.name)
        message = error_message(exc)
        text = str(exc)
        if text.startswith("IO") or "server closed the connection" in message or \
                ("connection" in message.lower() and "terminat" in message.lower()):
            return EngineConnectionError(message, engine=self.name,
                                         hint="the database went away; check that it runs")
        if text.startswith("NOT_IMPLEMENTED"):
            return Unsupported(message, engine=self.name)
        return QueryError(message, engine=self.name)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def cancel(self) -> None:
        if self._pool is not None:
            self._pool.cancel()

    # -- queries ---------------------------------------------------------
    def _running_pool(self) -> Any:
        if self._pool is None:
            raise EngineConnectionError("the engine is closed", engine=self.name)
        return self._pool

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        import pyarrow as pa

        from gateway.drivers.deadline import Deadline

        text, values = self.rewriter.rewrite(sql, parameters)
        cursors: list[Any] = []
        deadline = Deadline(self.config.get("timeout"),
                            lambda: [c.adbc_cancel() for c in cursors])
        try:
            reader = self._running_pool().execute(text, values, on_cursor=cursors.append)
        except GatewayError as exc:
            deadline.stop()
            raise deadline.translate(self._with_sql(exc, text)) from None
        schema, fix = arrow_fixes(reader.schema)
        out = pa.RecordBatchReader.from_batches(schema, _finish(reader, fix, deadline))
        return EngineResult(out, {"sql": text} if text != sql else {})

    def _with_sql(self, exc: GatewayError, text: str) -> GatewayError:
        if self.rewriter.transpile_from and isinstance(exc, QueryError) and exc.hint is None:
            exc.hint = f"the statement was transpiled from {self.rewriter.transpile_from}: {text}"
        return exc

    def ingest(self, table: str, data: Any, mode: str = "create") -> int:
        """Write Arrow data into ``table`` with the driver's bulk ingest.

        Args:
            data: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``.
            mode: ``create``, ``append``, ``replace`` or ``create_append``.

        Returns:
            The rows written (-1 when the driver does not say).

        Raises:
            Unsupported: the driver has no bulk ingest.
        """
        pool = self._running_pool()
        con = pool.take()
        try:
            cur = con.cursor()
            try:
                return int(cur.adbc_ingest(table, data, mode=mode))
            except Exception as exc:
                error = self._translate(exc)
                if "NOT_IMPLEMENTED" in str(exc):
                    error = Unsupported(f"this ADBC driver has no bulk ingest: {error.message}",
                                        engine=self.name, hint="INSERT with parameters instead")
                raise error from None
            finally:
                cur.close()
        finally:
            pool.give_back(con)

    # -- catalog ---------------------------------------------------------
    def _objects(self, depth: str, catalog: str | None = None, schema: str | None = None,
                 table: str | None = None, column: str | None = None) -> list[dict[str, Any]]:
        pool = self._running_pool()
        con = pool.take()
        try:
            return list(con.adbc_get_objects(depth=depth, catalog_filter=catalog,
                                             db_schema_filter=schema, table_name_filter=table,
                                             column_name_filter=column).read_all().to_pylist())
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            pool.give_back(con)

    def catalogs(self) -> list[str]:
        return [c["catalog_name"] for c in self._objects("catalogs")]

    def tables(self, catalog: str | None = None, schema: str | None = None,
               pattern: str | None = None, types: Sequence[str] | None = None
               ) -> list[tuple[str, str, str, str]]:
        """(catalog, schema, table, table_type) of the tables matching the LIKE patterns."""
        out = []
        for cat in self._objects("tables", catalog, schema, pattern):
            for sch in cat["catalog_db_schemas"] or ():
                for tab in sch["db_schema_tables"] or ():
                    if types is None or tab["table_type"] in types:
                        out.append((cat["catalog_name"], sch["db_schema_name"],
                                    tab["table_name"], tab["table_type"]))
        return out

    def catalog(self) -> list[CatalogColumn]:
        pool = self._running_pool()
        out: list[CatalogColumn] = []
        for catalog, schema, table, kind in self.tables():
            if schema in ("information_schema", "pg_catalog") or table.startswith("sqlite_"):
                continue
            con = pool.take()
            try:
                arrow_schema = con.adbc_get_table_schema(table, catalog_filter=catalog or None,
                                                         db_schema_filter=schema or None)
            except Exception as exc:
                raise self._translate(exc) from None
            finally:
                pool.give_back(con)
            fixed, _ = arrow_fixes(arrow_schema)
            shown = "VIEW" if "VIEW" in (kind or "").upper() else "TABLE"
            out += [CatalogColumn(schema or "main", table, f.name, f.type, f.nullable, shown)
                    for f in fixed]
        return out


def arrow_fixes(schema: Any) -> tuple[Any, Any]:
    """The schema callers see, and a function fixing each batch to it (None: no change).

    The PostgreSQL driver returns ``numeric`` as an opaque extension over its
    text: a column with a declared precision becomes ``decimal128(p, s)``, an
    unconstrained one ``float64`` (what DuckDB's postgres scanner gives).
    ``uuid`` and ``json``/``jsonb`` arrive as Arrow's canonical extension
    types; they become strings, as DuckDB, the odbc engine and the shadow
    comparator have them.
    """
    import pyarrow as pa

    fields, changed = [], False
    for fld in schema:
        target = _plain_type(fld)
        if target is not None:
            fld = pa.field(fld.name, target, fld.nullable, fld.metadata)
            changed = True
        fields.append(fld)
    if not changed:
        return schema, None
    fixed = pa.schema(fields, schema.metadata)

    def fix(batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = [_to_plain(col, fld.type) if col.type != fld.type else col
                   for col, fld in zip(batch.columns, fixed, strict=True)]
        return pa.RecordBatch.from_arrays(columns, schema=fixed)

    return fixed, fix


def _plain_type(fld: Any) -> Any:
    import pyarrow as pa

    t = fld.type
    if not isinstance(t, pa.BaseExtensionType):
        return None
    name = getattr(t, "type_name", None) or t.extension_name
    if name == "numeric":
        typmod = int((fld.metadata or {}).get(b"POSTGRESQL:typmod", b"-1"))
        if typmod < 4:
            return pa.float64()
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return pa.decimal128(precision, scale) if precision <= 38 else \
            pa.decimal256(precision, scale)
    if name in ("arrow.uuid", "arrow.json") or pa.types.is_string(t.storage_type):
        return pa.string()
    return None


def _to_plain(col: Any, target: Any) -> Any:
    import uuid

    import pyarrow as pa

    if col.type.extension_name == "arrow.uuid":
        return pa.array([None if b is None else str(uuid.UUID(bytes=b))
                         for b in col.storage.to_pylist()], pa.string())
    return col.storage.cast(target)


def _finish(reader: Any, fix: Any, deadline: Any) -> Iterator[Any]:
    try:
        for batch in reader:
            yield fix(batch) if fix is not None else batch
    except GatewayError as exc:
        raise deadline.translate(exc) from None
    finally:
        deadline.stop()
