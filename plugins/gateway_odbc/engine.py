"""The ``odbc`` engine: SQL Server and any ODBC source, answers read into Arrow by arrow-odbc.

Each running statement borrows one :class:`OdbcConnection` from the engine's
pool: an arrow-odbc connection for answers, a describe-only connection
(:mod:`gateway_odbc.describe`, which runs no statement) whose column types
correct arrow-odbc's (:mod:`gateway_odbc.types`), and, opened when first
needed, a pyodbc connection for what arrow-odbc does not do: statements with
typed parameters (arrow-odbc binds text only) and statements without a result
(DDL, DML, whose row count is kept in the notes).

arrow-odbc binds a fetch buffer as wide as each column's declared size
(psqlODBC declares ``text`` 8190 bytes wide), so a batch's rows are bounded by
``batch_bytes``: with 16 MB a 100k-row answer took 0.4-0.6 s, with arrow-odbc's
default 512 MB 4.0 s (the buffers cost more to allocate than the rows to fetch).

Cancel and timeouts go through the query's handle: a pyodbc statement is
stopped with ``SQLCancel``; an arrow-odbc statement gets the driver's query
timeout (``SQL_ATTR_QUERY_TIMEOUT``, from the handle's timeout) and is stopped
between batches, since arrow-odbc does not expose its statement. A session
keeps no state: its statements may run on different ODBC connections (the
describe, arrow-odbc and pyodbc ones), so the gateway refuses ``SET``,
temporary tables and transactions in a session rather than lose them.

A read-only user's statements run on connections PostgreSQL and SQLite keep
from writing (:mod:`gateway.drivers.read_only`), idle apart from the others.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.drivers.dialects import SqlRewriter
from gateway.drivers.odbc import (
    DEFAULT_MSSQL_DRIVER,
    format_connection_string,
    parse_connection_string,
)
from gateway.drivers.read_only import as_refusal, read_only_sql
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
    QueryTimeout,
    install_extra,
)
from gateway.masking import mask

if TYPE_CHECKING:
    from gateway.result import QueryHandle

#: sqlglot's dialect, by a word in the driver's name.
DRIVER_DIALECTS = (("postgres", "postgres"), ("psqlodbc", "postgres"), ("sqlite", "sqlite"),
                   ("sql server", "tsql"), ("freetds", "tsql"), ("tdsodbc", "tsql"),
                   ("msodbcsql", "tsql"), ("mysql", "mysql"), ("mariadb", "mysql"),
                   ("snowflake", "snowflake"), ("oracle", "oracle"), ("duckdb", "duckdb"))
#: Rows per pyodbc fetch (typed-parameter statements).
_FETCH_ROWS = 10_000
#: seconds before a cancel of the statement already cancelled sends SQLCancel again (see
#: OdbcConnection.cancel): far longer than a cancelled execute takes to report its error
_CANCEL_AGAIN = 1.0


class OdbcEngine(Engine):
    type_name = "odbc"
    description = "SQL Server and any ODBC source (arrow-odbc, pyodbc)"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True

    options: ClassVar[Mapping[str, Option]] = {
        "connection": Option((str,), secret=True,
                             help="an ODBC connection string: DRIVER={...};SERVER=...;..."),
        "dsn": Option((str,), help="a data source name from odbc.ini, instead of connection"),
        "driver": Option((str,), help="the ODBC driver's name; \"mssql\" finds Microsoft's "
                                      "ODBC Driver 18 in the mssql-python-odbc package"),
        "dialect": Option((str,), help="the SQL dialect (sqlglot's name); default from driver"),
        "transpile_from": Option((str,), help="the dialect queries are written in (e.g. duckdb); "
                                              "sqlglot rewrites them for this engine"),
        "login_timeout": Option((int,), default=15, minimum=1,
                                help="seconds to wait for a connection"),
        "max_text_size": Option((int,), default=65536, minimum=1,
                                help="bytes per value of a text column with no declared size"),
        "batch_bytes": Option((int,), default=16 << 20, minimum=1 << 16,
                              help="bytes of fetch buffer per batch (arrow-odbc sizes text "
                                   "columns by their declared width)"),
        "files": Option((str,), default="any", choices=("any", "sources"),
                        help='"sources": a SQLite database reaches no other file (ATTACH, '
                             "VACUUM INTO and load_extension are refused); a server's own "
                             "rights govern the rest. arrowgate serve sets it"),
    }

    def __init__(self, name: str, options: Mapping[str, Any], sources: Mapping[str, Any]):
        super().__init__(name, options, sources)
        if bool(self.config.get("connection")) == bool(self.config.get("dsn")):
            raise ConfigError("set connection (an ODBC connection string) or dsn, not both "
                              "and not neither", key=f"engines.{name}.connection", engine=name,
                              hint='connection = "DRIVER={PostgreSQL Unicode};SERVER=...;..."')
        keys = parse_connection_string(self.config.get("connection") or "")
        driver = self.config.get("driver")
        if driver:
            keys = {"driver": DEFAULT_MSSQL_DRIVER if driver == "mssql" else driver,
                    **{k: v for k, v in keys.items() if k != "driver"}}
        if self.config.get("dsn"):
            keys = {"dsn": self.config["dsn"], **keys}
        self.driver_name = keys.get("driver", "")
        chosen = self.config.get("dialect") or _dialect_of(
            self.driver_name or str(self.config.get("dsn", "")))
        #: the dialect callers write this engine's SQL in (Engine.dialect): transpile_from when
        #: set, else the database's own; "" (sqlglot's generic SQL) when nothing says
        self.dialect = self.config.get("transpile_from") or chosen or ""
        if chosen == "postgres" and "boolsaschar" not in keys:
            keys["BoolsAsChar"] = "0"  # psqlODBC: report boolean as SQL_BIT, not text
        if self.config.get("transpile_from") and not chosen:
            raise ConfigError("transpile_from needs the engine's dialect",
                              key=f"engines.{name}.dialect", engine=name,
                              hint='set dialect = "postgres" | "sqlite" | "tsql" | ...')
        self.connection_string = format_connection_string(
            {k.upper() if k in ("driver", "dsn") else k: v for k, v in keys.items()})
        self.rewriter = SqlRewriter(chosen, "qmark", self.config.get("transpile_from"), name)
        self._sqlite_files = chosen == "sqlite" and self.config["files"] == "sources"
        #: what makes a connection read-only, where the database has a way
        self.read_only_sql = read_only_sql(chosen)
        self._lock = threading.Lock()
        self._idle: list[OdbcConnection] = []
        self._idle_read_only: list[OdbcConnection] = []
        self._running: set[OdbcConnection] = set()
        self._closed = False

    @classmethod
    def describe_version(cls, options: Mapping[str, Any]) -> str | None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"arrow-odbc {version('arrow-odbc')}"
        except PackageNotFoundError:
            return None

    def check_sql(self, sql: str) -> None:
        if self._sqlite_files:
            check_sqlite_sql(sql, self.name)

    # -- lifecycle -------------------------------------------------------
    def connect(self) -> None:
        if self.config.get("driver") == "mssql":
            from gateway_odbc.mssql import find_driver, register

            library = find_driver()
            register(library)
            # unixODBC reads ODBCSYSINI once per process, so the registered name only works
            # where no ODBC connection came first; the library's path works everywhere
            keys = parse_connection_string(self.connection_string)
            keys["driver"] = str(library)
            self.connection_string = format_connection_string(
                {k.upper() if k == "driver" else k: v for k, v in keys.items()})
        self._give_back(self._open())

    def _open(self, read_only: bool = False) -> OdbcConnection:
        return OdbcConnection(self, read_only=read_only)

    def _take(self, read_only: bool = False) -> OdbcConnection:
        apart = read_only and self.read_only_sql is not None
        with self._lock:
            if self._closed:
                raise EngineConnectionError("the engine is closed", engine=self.name)
            idle = self._idle_read_only if apart else self._idle
            con = idle.pop() if idle else None
        con = con or self._open(read_only=apart)
        con.stopped.clear()  # before anyone can register a cancel for this statement
        self._running.add(con)
        return con

    def _give_back(self, con: OdbcConnection) -> None:
        self._running.discard(con)
        with self._lock:
            if not self._closed and not con.broken:
                (self._idle_read_only if con.read_only else self._idle).append(con)
                return
        con.close()

    def cancel(self) -> None:
        for con in list(self._running):
            con.cancel()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = self._idle + self._idle_read_only
            self._idle, self._idle_read_only = [], []
        for con in idle:
            con.close()

    # -- errors ----------------------------------------------------------
    def translate(self, exc: BaseException, *, connecting: bool = False) -> GatewayError:
        """A pyodbc, arrow-odbc or describe error as the gateway error callers see."""
        if isinstance(exc, GatewayError):
            message, state = exc.message, _sqlstate(exc.message)
        elif type(exc).__module__.startswith("pyodbc") and len(exc.args) >= 2:
            state, message = str(exc.args[0]), str(exc.args[1])
        else:
            message = str(exc)
            state = _sqlstate(message)
        message = mask(message.strip())
        lower = message.lower()
        if state == "IM002" or "can't open lib" in lower or "file not found" in lower:
            return ConfigError(f"the ODBC driver or data source is not found: {message}",
                               key=f"engines.{self.name}.connection", engine=self.name,
                               hint="installed drivers: " + ", ".join(_drivers()))
        if state.startswith("28") or "password authentication failed" in lower or \
                "login failed" in lower:
            return EngineConnectionError(f"cannot connect: {message}", engine=self.name,
                                         hint="check the user and password (through ${VAR})")
        if state.startswith("08") or connecting or ("connection" in lower and (
                "lost" in lower or "closed" in lower or "terminat" in lower)):
            return EngineConnectionError(f"cannot reach the database: {message}",
                                         engine=self.name, hint="check the server, port and "
                                         "that the database runs")
        if state in ("HYT00", "HYT01") or "statement timeout" in lower:
            return QueryTimeout(f"the query ran past its time limit: {message}",
                                engine=self.name)
        if state == "HY008" or state == "57014" or "canceling statement" in lower:
            return Cancelled("the query was cancelled", engine=self.name)
        from gateway.drivers.error_kinds import error_kind

        return QueryError(message, engine=self.name, kind=error_kind(state, message))

    # -- queries ---------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        return self.run(sql, parameters, None, self.config.get("timeout"))

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        return OdbcSession(self, read_only)

    def run(self, sql: str, parameters: Sequence[Any] | None, handle: QueryHandle | None,
            timeout: float | None, read_only: bool = False) -> EngineResult:
        """Run one statement on a pooled connection; ``handle`` (if any) can cancel it;
        ``read_only``: on a read-only connection, where the database has them."""
        import pyarrow as pa

        text, values = self.rewriter.rewrite(sql, parameters)
        con = self._take(read_only)
        if handle is not None:
            handle.on_cancel(con.cancel)
        try:
            reader, notes = con.run(text, values, timeout)
        except GatewayError as exc:
            self._give_back(con)
            if self.rewriter.transpile_from and isinstance(exc, QueryError) and not exc.hint:
                exc.hint = f"the statement was transpiled from " \
                           f"{self.rewriter.transpile_from}: {text}"
            raise exc from None
        except BaseException:
            self._give_back(con)
            raise
        if text != sql:
            notes["sql"] = text
        return EngineResult(pa.RecordBatchReader.from_batches(
            reader.schema, _Pooled(self, reader, con)), notes)

    def describe(self, sql: str) -> tuple[list[Any], int]:
        """The result columns and parameter count of ``sql`` (in this engine's dialect)."""
        con = self._take()
        try:
            return con.describe(sql)
        finally:
            self._give_back(con)

    # -- catalog ---------------------------------------------------------
    def catalogs(self) -> list[str]:
        return sorted({t.catalog for t in self.tables()})

    def schemas(self, catalog: str | None = None, pattern: str | None = None) -> list[SchemaRef]:
        return sorted({SchemaRef(t.catalog, t.schema)
                       for t in self._tables(catalog, pattern, None, None)})

    def tables(self, catalog: str | None = None, schema: str | None = None,
               pattern: str | None = None, types: Sequence[str] | None = None) -> list[TableRef]:
        """From ``SQLTables``, which takes LIKE patterns for schema and table."""
        return self._tables(catalog, schema, pattern, types)

    def _tables(self, catalog: str | None, schema: str | None, pattern: str | None,
                types: Sequence[str] | None) -> list[TableRef]:
        from gateway.sql.patterns import like_matcher

        con = self._take()
        try:
            found = con.tables(catalog, schema, pattern, types)
        finally:
            self._give_back(con)
        # drivers without schemas (SQLite's) ignore the schema pattern: filter here too
        match_schema, match_table = like_matcher(schema), like_matcher(pattern)
        return [t for t in found if t.schema not in _SYSTEM_SCHEMAS
                and (catalog is None or t.catalog == catalog)
                and match_schema(t.schema) and match_table(t.table)]

    def columns(self, table: str, catalog: str | None = None, schema: str | None = None,
                pattern: str | None = None) -> list[CatalogColumn]:
        from gateway.sql.patterns import like_matcher

        match = like_matcher(pattern)
        return [c for ref in self.tables(catalog, schema, table) if ref.table == table
                for c in self._columns(ref) if match(c.column)]

    def _columns(self, ref: TableRef) -> list[CatalogColumn]:
        from gateway_odbc.types import arrow_type

        qualified = ".".join(_quote(p) for p in (ref.schema, ref.table) if p)
        columns, _ = self.describe(f"SELECT * FROM {qualified}")
        kind = "VIEW" if "VIEW" in ref.table_type.upper() else "TABLE"
        return [CatalogColumn(ref.schema or "main", ref.table, c.name, arrow_type(c),
                              c.nullable, kind, ref.catalog) for c in columns]

    def catalog(self) -> list[CatalogColumn]:
        return [c for ref in self.tables() for c in self._columns(ref)]


#: Schemas the catalog leaves out.
_SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "sys", "INFORMATION_SCHEMA"})


class _Pooled:
    """A pooled connection's answer: the connection goes back once the answer is read to
    its end, and is closed instead when the answer fails, is closed or is dropped before
    that (a generator's ``finally`` never runs for an answer dropped unread, which kept
    its connection and its file handles for good)."""

    def __init__(self, engine: OdbcEngine, reader: Any, con: OdbcConnection):
        self._batches = iter(reader)
        self._read = [False]  # whether it was read to its end
        self._done = weakref.finalize(self, _release, engine, con, self._read)

    def __iter__(self) -> _Pooled:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._batches)
        except StopIteration:
            self._read[0] = True
            self._done()
            raise
        except BaseException:
            self._done()
            raise

    def close(self) -> None:
        self._done()


def _release(engine: OdbcEngine, con: OdbcConnection, read: list[bool]) -> None:
    if not read[0]:
        con.broken = True  # its statement may still hold rows: closed, not lent again
    engine._give_back(con)


class OdbcSession(EngineSession):
    """A session of the odbc engine: each statement on a pooled connection, cancelled alone
    (a read-only one's on a read-only connection)."""

    engine: OdbcEngine

    def __init__(self, engine: OdbcEngine, read_only: bool = False):
        super().__init__(engine)
        self.read_only = read_only

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        return self.engine.run(sql, parameters, handle, handle.timeout, self.read_only)

    def prepare(self, sql: str) -> EnginePrepared:
        return OdbcPrepared(self, sql)


class OdbcPrepared(EnginePrepared):
    """A statement described by the driver (``SQLPrepare``): its schema without running it."""

    def __init__(self, session: OdbcSession, sql: str):
        import pyarrow as pa

        from gateway_odbc.types import arrow_type

        super().__init__(session, sql)
        engine = session.engine
        count = engine.rewriter.placeholder_count(sql)
        self.parameter_schema = pa.schema([pa.field(f"${i + 1}", pa.null())
                                           for i in range(count)])
        columns, _ = engine.describe(engine.rewriter.statement(sql))
        self._schema = pa.schema([pa.field(c.name, arrow_type(c), c.nullable) for c in columns])


class OdbcConnection:
    """The connections one running statement uses (see the module's docstring).

    Args:
        read_only: run ``engine.read_only_sql`` before each statement, on the
            connection that runs it (the describer runs none).
    """

    def __init__(self, engine: OdbcEngine, read_only: bool = False):
        try:
            import arrow_odbc
            import pyodbc  # noqa: F401 - statements need it too: its absence is said here
        except ImportError as exc:
            raise ConfigError(f"the odbc engine needs {exc.name}, which cannot be imported "
                              f"({exc})", engine=engine.name,
                              hint=install_extra("odbc") + " and apt-get install "
                                   "unixodbc") from None

        from gateway_odbc.describe import Describer

        self.engine = engine
        self.read_only = read_only
        self.broken = False
        self._pyodbc: Any = None
        self._cursor: Any = None
        #: the cursor a cancel may reach (``_cursor``: set only while its statement executes)
        #: is taken and let go under this lock: pyodbc's cancel() and close() each release
        #: the GIL, and an SQLCancel on a handle another thread had just freed, or on rows
        #: it was fetching, killed the process (SIGSEGV: a cancel as its statement finished)
        self._cursor_lock = threading.Lock()
        self.stopped = threading.Event()
        self._cancelled_at = 0.0  # (time.monotonic()) when cancel() last sent SQLCancel
        login = engine.config["login_timeout"]
        try:
            self.describer = Describer(engine.connection_string, login, engine.name)
        except GatewayError as exc:
            raise engine.translate(exc, connecting=True) from None
        try:
            self.arrow = arrow_odbc.connect(engine.connection_string, login_timeout_sec=login)
            if engine.rewriter.dialect == "postgres":  # psqlODBC hands timestamptz over in the session zone
                self.arrow.execute("SET TIME ZONE 'UTC'")
        except Exception as exc:
            self.describer.close()
            raise engine.translate(exc, connecting=True) from None

    def translate(self, exc: BaseException) -> GatewayError:
        """The engine's translation of ``exc``; on a read-only connection, a write the
        database refused says that the user is read-only."""
        error = self.engine.translate(exc)
        return as_refusal(error) if self.read_only else error

    def describe(self, sql: str) -> tuple[list[Any], int]:
        try:
            return self.describer.describe(sql)
        except GatewayError as exc:
            raise self.translate(exc) from None

    def _py(self) -> Any:
        if self._pyodbc is None:
            import pyodbc

            try:
                self._pyodbc = pyodbc.connect(self.engine.connection_string, autocommit=True,
                                              timeout=self.engine.config["login_timeout"])
            except pyodbc.Error as exc:
                raise self.engine.translate(exc, connecting=True) from None
            if self.engine.rewriter.dialect == "postgres":
                self._pyodbc.execute("SET TIME ZONE 'UTC'")
            from gateway_odbc.describe import SQL_SS_TIMESTAMPOFFSET
            from gateway_odbc.types import datetimeoffset_from_bytes

            self._pyodbc.add_output_converter(SQL_SS_TIMESTAMPOFFSET, datetimeoffset_from_bytes)
        return self._pyodbc

    def run(self, sql: str, values: list[Any] | None,
            timeout: float | None) -> tuple[Any, dict[str, Any]]:
        """Run one statement: a reader of its answer, and notes."""
        columns, _ = self.describe(sql)
        if not columns or (values and not all(v is None or isinstance(v, str)
                                              for v in values)):
            self._keep_read_only(self._py())
            return self._run_pyodbc(sql, values, columns)
        self._keep_read_only(self.arrow)
        return self._run_arrow(sql, values, columns, timeout), {}

    def _keep_read_only(self, con: Any) -> None:
        """Make ``con`` read-only, on a read-only connection: before each statement, since
        a function on the server may have turned the mode off for the transactions after
        its own."""
        if self.read_only:
            try:
                con.execute(self.engine.read_only_sql)
            except Exception as exc:
                raise self.translate(exc) from None

    def _run_arrow(self, sql: str, values: list[Any] | None, columns: list[Any],
                   timeout: float | None) -> Any:
        import pyarrow as pa

        from gateway_odbc.types import answer_schema, fetch_schema, to_answer

        try:
            reader = self.arrow.read_arrow_batches(
                sql, parameters=values, max_text_size=self.engine.config["max_text_size"],
                max_binary_size=self.engine.config["max_text_size"],
                max_bytes_per_batch=self.engine.config["batch_bytes"],
                map_schema=lambda reported: fetch_schema(reported, columns),
                query_timeout_sec=math.ceil(timeout) if timeout else None)
            fetched = reader.schema
        except Exception as exc:
            raise self.translate(exc) from None
        schema = answer_schema(fetched, columns)

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                for batch in reader:
                    if self.stopped.is_set():
                        raise Cancelled("the query was cancelled", engine=self.engine.name)
                    yield to_answer(batch, schema)
            except GatewayError:
                raise
            except Exception as exc:
                self.broken = True
                raise self.translate(exc) from None

        return pa.RecordBatchReader.from_batches(schema, batches())

    def _run_pyodbc(self, sql: str, values: list[Any] | None,
                    columns: list[Any]) -> tuple[Any, dict[str, Any]]:
        import pyarrow as pa
        import pyodbc

        from gateway_odbc.types import answer_schema, arrow_type, to_answer

        cur = self._py().cursor()
        with self._cursor_lock:
            self._cursor = cur
        if self.stopped.is_set():  # cancelled before the cursor could be reached
            self._let_go(cur)
            raise Cancelled("the query was cancelled", engine=self.engine.name)
        try:
            cur.execute(sql, *(values or ()))
        except pyodbc.Error as exc:
            self._let_go(cur)
            raise self._failed(exc) from None
        # past the execute, a cancel stops the fetch between batches, never inside one: an
        # SQLCancel while pyodbc fetched the rows crashed the process (SIGSEGV)
        with self._cursor_lock:
            self._cursor = None
        if self.stopped.is_set():
            self._let_go(cur)
            raise Cancelled("the query was cancelled", engine=self.engine.name)
        if not columns or cur.description is None:
            count = cur.rowcount
            self._let_go(cur)
            empty = pa.schema([])
            return pa.RecordBatchReader.from_batches(empty, iter(())), (
                {"update_count": count} if count >= 0 else {})
        plain = pa.schema([pa.field(c.name, arrow_type(c), c.nullable) for c in columns])
        schema = answer_schema(plain, columns)

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                while rows := cur.fetchmany(_FETCH_ROWS):
                    if self.stopped.is_set():
                        raise Cancelled("the query was cancelled", engine=self.engine.name)
                    yield to_answer(pa.RecordBatch.from_arrays(
                        [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(plain)],
                        schema=plain), schema)
            except pyodbc.Error as exc:
                raise self._failed(exc) from None
            finally:
                self._let_go(cur)

        return pa.RecordBatchReader.from_batches(schema, batches()), {}

    def _let_go(self, cur: Any) -> None:
        """Close ``cur`` once no cancel can reach it any more."""
        with self._cursor_lock:
            if self._cursor is cur:
                self._cursor = None
        try:
            cur.close()
        except Exception:  # a cursor the driver already dropped
            pass

    def _failed(self, exc: BaseException) -> GatewayError:
        """What a driver error means: a cancel that landed after the statement ran (the
        next fetch's "Function sequence error") is the cancel, not a failure."""
        if self.stopped.is_set():
            return Cancelled("the query was cancelled", engine=self.engine.name)
        return self.translate(exc)

    def tables(self, catalog: str | None, schema: str | None, pattern: str | None,
               types: Sequence[str] | None) -> list[TableRef]:
        import pyodbc

        kinds = ",".join(types) if types else "TABLE,VIEW"
        try:
            rows = self._py().cursor().tables(table=pattern, catalog=catalog, schema=schema,
                                              tableType=kinds).fetchall()
        except pyodbc.Error as exc:
            raise self.translate(exc) from None
        return [TableRef(r[0] or "", r[1] or "", r[2], r[3] or "TABLE") for r in rows]

    def cancel(self) -> None:
        with self._cursor_lock:
            # set under the lock, with the cursor read: set before it, a cancel meant for
            # the statement before could be cleared by the next one's start and then
            # reach that one's cursor, which failed with "Function sequence error"
            again = self.stopped.is_set()
            self.stopped.set()
            cur = self._cursor
            # One SQLCancel a statement, another only after _CANCEL_AGAIN (one that came
            # before the execute began did nothing). unixODBC's SQLCancel frees the
            # statement's diagnostic records first, under no lock (function_entry), so a
            # second one, landing as the first one's cancelled execute posted or pyodbc
            # read its error, freed them under the other thread: the process died of heap
            # corruption ("corrupted size vs. prev_size", SIGABRT; or SIGSEGV).
            now = time.monotonic()
            if cur is not None and (not again or now - self._cancelled_at >= _CANCEL_AGAIN):
                self._cancelled_at = now
                try:
                    cur.cancel()
                except Exception:  # finished meanwhile
                    pass

    def close(self) -> None:
        with self._cursor_lock:  # no cancel reaches a cursor of the connections closed here
            self._cursor = None
        self.describer.close()
        for con in (self._pyodbc, self.arrow):
            try:
                if hasattr(con, "close"):
                    con.close()
            except Exception:  # a connection the server already dropped
                pass
        self._pyodbc = None


def _dialect_of(driver: str) -> str | None:
    lower = driver.lower()
    return next((d for word, d in DRIVER_DIALECTS if word in lower), None)


def _sqlstate(message: str) -> str:
    import re

    match = re.search(r"SQLSTATE[: ]+([0-9A-Z]{5})|\[([0-9A-Z]{5})\]|State: ([0-9A-Z]{5})",
                      message)
    return next((g for g in match.groups() if g), "") if match else ""


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _drivers() -> list[str]:
    """The ODBC drivers installed (pyodbc, of ``pip install 'arrowgate[odbc]'``, lists them)."""
    try:
        import pyodbc

        return list(pyodbc.drivers()) or ["none (apt-get install odbc-postgresql, ...)"]
    except ImportError:
        return ["pyodbc cannot be imported (apt-get install unixodbc)"]
