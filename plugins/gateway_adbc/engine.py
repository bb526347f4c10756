"""The ``adbc`` engine: a database reached through an ADBC driver, answers Arrow end to end.

The driver is an installed package (``driver = "postgresql"`` loads
``adbc_driver_postgresql``) or a shared library (``driver_path`` and
``entrypoint``); ``db_kwargs`` and ``conn_kwargs`` go to the driver as they
are. Statements run on :class:`gateway.drivers.adbc.ConnectionPool` (one
connection per running statement), are rewritten for the driver's dialect and
placeholder style by :class:`gateway.drivers.dialects.SqlRewriter`. A session
(:class:`AdbcEngineSession`) keeps one connection; cancelling a query (or its
timeout) calls ``adbc_cancel`` on that query's statement only. Prepared
statements use the driver's ``adbc_prepare`` for the parameter types and
``adbc_execute_schema`` for the result schema where the driver has it.

The engine does not mount the configuration's sources: it queries what its
database holds. :meth:`AdbcEngine.ingest` writes Arrow data into it, where the
driver has bulk ingest.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.drivers.adbc import PooledSession
from gateway.drivers.dialects import SqlRewriter, Style
from gateway.drivers.sqlite_files import check_sqlite_sql
from gateway.engine import (
    CatalogColumn,
    Engine,
    EnginePrepared,
    EngineResult,
    EngineSession,
    Option,
    SchemaRef,
    TableRef,
)
from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    Unsupported,
)

if TYPE_CHECKING:
    from gateway.result import QueryHandle

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

#: The Flight SQL driver's option returning the server's session cookie (off by default).
FLIGHT_COOKIES = "adbc.flight.sql.rpc.with_cookie_middleware"
#: the drivers the adbc extra installs (pip install 'arrowgate[adbc]')
EXTRA_DRIVERS = ("postgresql", "sqlite", "flightsql")


class AdbcEngine(Engine):
    type_name = "adbc"
    description = "any database with an ADBC driver (PostgreSQL, SQLite, Flight SQL, ...)"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True
    supports_transactions = True
    session_state = frozenset({"settings", "temp_tables", "transactions"})

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
        "files": Option((str,), default="any", choices=("any", "sources"),
                        help='"sources": a SQLite database reaches no other file (ATTACH, '
                             "VACUUM INTO and load_extension are refused); a server's own "
                             "rights govern the rest. arrowgate serve sets it"),
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
        chosen: str | None = self.config.get("dialect") or known[0]
        #: the dialect callers write this engine's SQL in (Engine.dialect): transpile_from when
        #: set, else the database's own; "" (sqlglot's generic SQL) when nothing says
        self.dialect = self.config.get("transpile_from") or chosen or ""
        style: Style = self.config.get("paramstyle") or known[1]
        if self.config.get("transpile_from") and not chosen:
            raise ConfigError("transpile_from needs the engine's dialect",
                              key=f"engines.{name}.dialect", engine=name,
                              hint='set dialect = "postgres" | "sqlite" | "tsql" | ...')
        self.rewriter = SqlRewriter(chosen, style, self.config.get("transpile_from"), name)
        self._sqlite_files = chosen == "sqlite" and self.config["files"] == "sources"
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

    def check_sql(self, sql: str) -> None:
        if self._sqlite_files:
            check_sqlite_sql(sql, self.name)

    # -- lifecycle -------------------------------------------------------
    def _driver(self) -> tuple[str, str | None]:
        driver = self.config.get("driver")
        if driver:
            try:
                module = importlib.import_module(f"adbc_driver_{driver}")
            except ImportError:
                package = f"adbc-driver-{driver}"
                if driver in EXTRA_DRIVERS:
                    package += " (of arrowgate's adbc extra)"
                raise ConfigError(f"the ADBC driver {driver!r} is not installed",
                                  key=f"engines.{self.name}.driver", engine=self.name,
                                  hint=f"pip install {package}, or set driver_path") from None
            return str(module._driver_path()), None
        return str(self.config["driver_path"]), self.config.get("entrypoint")

    def connect(self) -> None:
        import adbc_driver_manager
        import adbc_driver_manager.dbapi as dbapi

        from gateway.drivers.adbc import ConnectionPool
        from gateway.drivers.read_only import read_only_sql

        path, entrypoint = self._driver()
        db_kwargs = {k: str(v) for k, v in self.config["db_kwargs"].items()}
        if self.config.get("uri"):
            db_kwargs["uri"] = self.config["uri"]
        if self.config.get("driver") == "flightsql":
            # the server's session is found by its cookie: without it, each statement would
            # run in a session of its own, and a session's SET or temp table would not last
            db_kwargs.setdefault(FLIGHT_COOKIES, "true")
        conn_kwargs = {k: str(v) for k, v in self.config["conn_kwargs"].items()}
        try:
            first = dbapi.connect(driver=path, entrypoint=entrypoint, db_kwargs=db_kwargs,
                                  conn_kwargs=conn_kwargs, autocommit=True)
        except adbc_driver_manager.Error as exc:
            raise self._connect_error(exc) from None
        except OSError as exc:  # the library itself cannot be loaded
            raise ConfigError(f"cannot load the ADBC driver {path}: {exc}",
                              key=f"engines.{self.name}.driver_path", engine=self.name) from None
        self._pool = ConnectionPool(first, on_clone=lambda con: None, translate=self._translate,
                                    engine=self.name, dialect=self.dialect,
                                    read_only_sql=read_only_sql(self.rewriter.dialect))

    def _connect_error(self, exc: BaseException) -> GatewayError:
        from gateway.drivers.adbc import error_message
        from gateway.masking import mask

        message = mask(error_message(exc))  # the uri and db_kwargs' passwords are known secrets
        lower = message.lower()
        if "password" in lower or "authentication" in lower or "unauthenticated" in lower:
            hint = "check the user and password (db_kwargs or the uri, through ${VAR})"
        elif "no such file" in lower or "could not load" in lower or "dlopen" in lower:
            return ConfigError(f"cannot load the ADBC driver: {message}", engine=self.name,
                               key=f"engines.{self.name}.driver_path")
        else:
            hint = "check the host, port and that the server accepts connections"
        return EngineConnectionError(f"cannot connect: {message}", engine=self.name, hint=hint)

    def _translate(self, exc: BaseException) -> GatewayError:
        from gateway.drivers.adbc import error_message, was_cancelled

        if isinstance(exc, GatewayError):
            return exc
        if was_cancelled(exc) or "canceling statement due to user request" in str(exc):
            return Cancelled("the query was cancelled", engine=self.name)
        from gateway.drivers.error_kinds import error_kind, trailer_kind

        message = error_message(exc)
        text = str(exc)
        kind = trailer_kind(getattr(exc, "details", None) or ()) or \
            error_kind(getattr(exc, "sqlstate", None), message)
        # SQLite's driver reports a write its read-only connection refused as IO too
        if kind != "permission" and (
                text.startswith("IO") or "server closed the connection" in message or
                ("connection" in message.lower() and "terminat" in message.lower())):
            return EngineConnectionError(message, engine=self.name,
                                         hint="the database went away; check that it runs")
        if text.startswith("NOT_IMPLEMENTED"):
            return Unsupported(message, engine=self.name)
        return QueryError(message, engine=self.name, kind=kind)

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
        text, values = self.rewriter.rewrite(sql, parameters)
        try:
            reader = self._running_pool().execute(text, values)
        except GatewayError as exc:
            raise self.with_sql(exc, text) from None
        return self.answer(EngineResult(reader), sql, text)

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        """A connection from the pool; a session's own (not one-shot) is closed with it, so
        its temporary tables and settings never reach another session. A read-only
        session's connection is read-only in PostgreSQL and SQLite
        (:mod:`gateway.drivers.read_only`); other databases have the pipeline's check only."""
        return AdbcEngineSession(self, self._running_pool(), reuse=one_shot, read_only=read_only)

    def answer(self, result: EngineResult, sql: str, text: str) -> EngineResult:
        """``result`` with the driver's extension types made plain, and the SQL that ran."""
        import pyarrow as pa

        schema, fix = arrow_fixes(result.reader.schema)
        reader = result.reader if fix is None else pa.RecordBatchReader.from_batches(
            schema, (fix(b) for b in result.reader))
        return EngineResult(reader, {**result.notes, **({"sql": text} if text != sql else {})})

    def with_sql(self, exc: GatewayError, text: str) -> GatewayError:
        """A database error on a transpiled statement, with the SQL that ran as its hint."""
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
                    error = Unsupported(f"no bulk ingest through this ADBC driver (or the "
                                        f"server behind it): {error.message}",
                                        engine=self.name, hint="INSERT with parameters instead")
                raise error from None
            finally:
                cur.close()
        finally:
            pool.give_back(con)

    # -- catalog ---------------------------------------------------------
    def _objects(self, depth: str, catalog: str | None = None, schema: str | None = None,
                 table: str | None = None) -> list[dict[str, Any]]:
        """``adbc_get_objects``, filtered by the LIKE patterns here: drivers differ in how they
        read a pattern (the PostgreSQL driver compares schema names with ``=``), so only a
        plain name is passed down."""
        from gateway.sql.patterns import like_matcher

        pool = self._running_pool()
        con = pool.take()
        try:
            found = con.adbc_get_objects(
                depth=depth, catalog_filter=_plain(catalog), db_schema_filter=_plain(schema),
                table_name_filter=_plain(table)).read_all().to_pylist()
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            pool.give_back(con)
        match_catalog, match_schema, match_table = map(like_matcher, (catalog, schema, table))
        out = []
        for cat in found:
            if not match_catalog(cat["catalog_name"] or ""):
                continue
            schemas = []
            for sch in cat["catalog_db_schemas"] or ():
                if match_schema(sch["db_schema_name"] or ""):
                    tables = [t for t in sch["db_schema_tables"] or ()
                              if match_table(t["table_name"])]
                    schemas.append({**sch, "db_schema_tables": tables})
            out.append({**cat, "catalog_db_schemas": schemas})
        return out

    def catalogs(self) -> list[str]:
        return [c["catalog_name"] or "" for c in self._objects("catalogs")]

    def schemas(self, catalog: str | None = None, pattern: str | None = None) -> list[SchemaRef]:
        return sorted(SchemaRef(c["catalog_name"] or "", s["db_schema_name"] or "")
                      for c in self._objects("db_schemas", catalog, pattern)
                      for s in c["catalog_db_schemas"] or ())

    def tables(self, catalog: str | None = None, schema: str | None = None,
               pattern: str | None = None, types: Sequence[str] | None = None) -> list[TableRef]:
        out = []
        for cat in self._objects("tables", catalog, schema, pattern):
            for sch in cat["catalog_db_schemas"] or ():
                for tab in sch["db_schema_tables"] or ():
                    if types is None or tab["table_type"] in types:
                        out.append(TableRef(cat["catalog_name"] or "", sch["db_schema_name"] or "",
                                            tab["table_name"], tab["table_type"]))
        return out

    def columns(self, table: str, catalog: str | None = None, schema: str | None = None,
                pattern: str | None = None) -> list[CatalogColumn]:
        from gateway.sql.patterns import like_matcher

        match = like_matcher(pattern)
        out: list[CatalogColumn] = []
        for ref in self.tables(catalog, schema, table):  # `_` in a name matches itself too
            if ref.table != table:
                continue
            arrow_schema = self._table_schema(ref)
            out += [CatalogColumn(ref.schema, ref.table, f.name, f.type, f.nullable,
                                  _table_type(ref.table_type), ref.catalog)
                    for f in arrow_schema if match(f.name)]
        return out

    def _table_schema(self, ref: TableRef) -> Any:
        pool = self._running_pool()
        con = pool.take()
        try:
            arrow_schema = con.adbc_get_table_schema(ref.table,
                                                     catalog_filter=ref.catalog or None,
                                                     db_schema_filter=ref.schema or None)
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            pool.give_back(con)
        return arrow_fixes(arrow_schema)[0]

    def catalog(self) -> list[CatalogColumn]:
        out: list[CatalogColumn] = []
        for ref in self.tables():
            if ref.schema in ("information_schema", "pg_catalog") or \
                    ref.table.startswith("sqlite_"):
                continue
            out += [CatalogColumn(ref.schema or "main", ref.table, f.name, f.type, f.nullable,
                                  _table_type(ref.table_type), ref.catalog)
                    for f in self._table_schema(ref)]
        return out


class AdbcEngineSession(PooledSession):
    """One connection of the adbc engine: statements rewritten for the driver, types made plain."""

    engine: AdbcEngine

    def __init__(self, engine: AdbcEngine, pool: Any, *, reuse: bool, read_only: bool = False):
        super().__init__(engine, pool, reuse=reuse, read_only=read_only)

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        text, values = self.engine.rewriter.rewrite(sql, parameters)
        try:
            result = super().execute(text, values, handle)
        except GatewayError as exc:
            raise self.engine.with_sql(exc, text) from None
        return self.engine.answer(result, sql, text)

    def prepare(self, sql: str) -> EnginePrepared:
        return AdbcPrepared(self, sql)


class AdbcPrepared(EnginePrepared):
    """A statement prepared on the session's connection (``adbc_prepare``)."""

    session: AdbcEngineSession

    def __init__(self, session: AdbcEngineSession, sql: str):
        import pyarrow as pa

        super().__init__(session, sql)
        engine = session.engine
        self._text = engine.rewriter.statement(sql)
        con = session.connection
        if con is None:
            raise EngineConnectionError("the session is closed", engine=engine.name)
        cur = con.cursor()
        try:
            reported = cur.adbc_prepare(self._text)
            try:
                self._schema = arrow_fixes(cur.adbc_execute_schema(self._text))[0]
            except Exception:  # NOT_IMPLEMENTED: the base class runs the query once instead
                self._schema = None
        except Exception as exc:
            raise engine.with_sql(engine._translate(exc), self._text) from None
        finally:
            cur.close()
        count = engine.rewriter.placeholder_count(sql)
        types = [f.type for f in reported] if reported is not None and \
            len(reported) == count else [pa.null()] * count
        self.parameter_schema = pa.schema([pa.field(f"${i + 1}", t) for i, t in enumerate(types)])


def _plain(pattern: str | None) -> str | None:
    """A LIKE pattern without wildcards, as it can be handed to a driver; else None."""
    return pattern if pattern and not any(ch in pattern for ch in "%_\\") else None


def _table_type(kind: str | None) -> str:
    return "VIEW" if "VIEW" in (kind or "").upper() else "TABLE"


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
