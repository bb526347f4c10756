"""The engine contract: what every engine plugin implements.

An engine type is a subclass of :class:`Engine`, registered through the
``arrowgate_engine_types`` hook. The gateway builds one instance per
``[engines.NAME]`` section of the configuration, after checking that section
against the class's :attr:`Engine.options`.

Capabilities are declared up front as class attributes, so the router, the
CLI and the conformance suite read flags instead of catching
NotImplementedError.

Engine modules must not import their driver (duckdb, pyodbc, ...) at import
time: ``arrowgate engines`` lists types, versions and capabilities by
importing the engine classes, and must stay cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from gateway.records import FrozenRecord, Record
from gateway.sql.patterns import like_matcher

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.config import Source
    from gateway.errors import GatewayError
    from gateway.result import QueryHandle


# -- the catalog tree's rows: what catalog(), schemas(), tables() and columns() return ----
class CatalogColumn(FrozenRecord):
    """One column of one table an engine can query.

    ``catalog`` is the database the table lives in (DuckDB's attached
    database, PostgreSQL's database); engines without that level leave it "".
    """

    __slots__ = ("schema", "table", "column", "type", "nullable", "table_type", "catalog")
    schema: Final[str]
    table: Final[str]
    column: Final[str]
    type: Final[pa.DataType]
    nullable: Final[bool]
    table_type: Final[str]
    catalog: Final[str]

    def __init__(self, schema: str, table: str, column: str, type: pa.DataType,
                 nullable: bool = True, table_type: str = "TABLE", catalog: str = "") -> None:
        self.schema, self.table, self.column, self.type = schema, table, column, type
        self.nullable, self.table_type, self.catalog = nullable, table_type, catalog


class _Ordered(FrozenRecord):
    """A record ordered by its fields, in order (a dataclass's ``order=True``)."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Ordered)
        return self._values() < other._values()

    def __gt__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Ordered)
        return self._values() > other._values()


class SchemaRef(_Ordered):
    """One schema of the catalog tree (:meth:`Engine.schemas`)."""

    __slots__ = ("catalog", "schema")
    catalog: Final[str]
    schema: Final[str]

    def __init__(self, catalog: str, schema: str) -> None:
        self.catalog, self.schema = catalog, schema


class TableRef(_Ordered):
    """One table or view of the catalog tree (:meth:`Engine.tables`)."""

    __slots__ = ("catalog", "schema", "table", "table_type")
    catalog: Final[str]
    schema: Final[str]
    table: Final[str]
    table_type: Final[str]

    def __init__(self, catalog: str, schema: str, table: str, table_type: str = "TABLE") -> None:
        self.catalog, self.schema, self.table, self.table_type = catalog, schema, table, table_type


class Option(FrozenRecord):
    """One key an engine accepts in its configuration section.

    Attributes:
        types: the Python types the value may have (after TOML parsing).
        default: the value used when the key is absent.
        required: the key must be present.
        secret: the value is never printed (``arrowgate engines``, errors).
        help: one line for ``arrowgate engines --help`` and error messages.
        choices: when set, the only values allowed.
        minimum: when set, the smallest number allowed.
        exclusive_minimum: when set, numbers must be greater than this.
    """

    __slots__ = ("types", "default", "required", "secret", "help", "choices", "minimum",
                 "exclusive_minimum")
    types: Final[tuple[type, ...]]
    default: Final[Any]
    required: Final[bool]
    secret: Final[bool]
    help: Final[str]
    choices: Final[tuple[Any, ...]]
    minimum: Final[float | None]
    exclusive_minimum: Final[float | None]

    def __init__(self, types: tuple[type, ...], default: Any = None, required: bool = False,
                 secret: bool = False, help: str = "", choices: tuple[Any, ...] = (),
                 minimum: float | None = None, exclusive_minimum: float | None = None) -> None:
        self.types, self.default, self.required, self.secret = types, default, required, secret
        self.help, self.choices = help, choices
        self.minimum, self.exclusive_minimum = minimum, exclusive_minimum

    def type_names(self) -> str:
        names = {bool: "boolean", int: "integer", float: "number", str: "string",
                 dict: "table", list: "array"}
        return " or ".join(names.get(t, t.__name__) for t in self.types)


#: Options every engine type accepts, checked by the gateway (an engine type may
#: declare its own entry of the same name to change the help or the default).
COMMON_OPTIONS: Mapping[str, Option] = {
    "timeout": Option((int, float), exclusive_minimum=0,
                      help="seconds a query may run before it is cancelled "
                      "and fails with QueryTimeout (default: no limit)"),
    "connect_timeout": Option((int, float), default=30.0, exclusive_minimum=0,
                              help="seconds the engine may take to start before its queries "
                                   "fail (other engines are never held up)"),
}


class EngineResult(Record):
    """What :meth:`Engine.execute` returns.

    Attributes:
        reader: the rows, as a stream of record batches. Its ``schema`` is
            known before the first batch is read.
        notes: facts about how the answer was produced, for the caller to show
            (``skipped_rows``, ``answered_by`` for a fallback, ...).
    """

    __slots__ = ("reader", "notes")

    def __init__(self, reader: pa.RecordBatchReader, notes: dict[str, Any] | None = None) -> None:
        self.reader = reader
        self.notes: dict[str, Any] = {} if notes is None else notes

    @property
    def schema(self) -> pa.Schema:
        return self.reader.schema

    def released(self) -> EngineResult:
        """The same schema and notes without the rows: what a closed answer keeps, so
        that it holds none of the engine's unread batches (a subclass's own fields too)."""
        import pyarrow as pa

        return EngineResult(pa.RecordBatchReader.from_batches(self.schema, []), self.notes)


class Engine:
    """Base class of every engine type.

    Subclasses set :attr:`type_name`, the capability flags and
    :attr:`options`, and implement :meth:`execute`; :meth:`catalog`,
    :meth:`cancel` and :meth:`close` have safe defaults.

    Args:
        name: the engine's name in the configuration (``[engines.NAME]``).
        options: the validated configuration section, defaults filled in,
            without the ``type`` key.
        sources: the configuration's named data sources, to be mounted so the
            same SQL text runs on every engine.

    Raises:
        gateway.errors.ConfigError: an option value this engine cannot use.
        gateway.errors.EngineConnectionError: the engine could not start or
            connect (raised by :meth:`connect`, which the gateway calls
            lazily before the first query).
    """

    #: The ``type = "..."`` value in configuration files; also the plugin's
    #: folder (``plugins/gateway_<type_name>``), marker and extra.
    type_name: ClassVar[str] = ""
    #: One line shown by ``arrowgate engines``.
    description: ClassVar[str] = ""

    supports_streaming: ClassVar[bool] = False
    supports_parameters: ClassVar[bool] = False
    supports_cancel: ClassVar[bool] = False
    supports_write: ClassVar[bool] = False
    supports_catalog: ClassVar[bool] = False
    #: ``BEGIN`` ... ``COMMIT``/``ROLLBACK`` work within a session.
    supports_transactions: ClassVar[bool] = False

    #: The sqlglot dialect this engine's SQL is written in; the shadow
    #: comparator and the front ends read each engine's SQL in its own dialect.
    dialect: ClassVar[str] = "duckdb"
    #: What a session of this engine keeps from one statement to the next: a
    #: subset of :data:`SESSION_STATE`. A statement that needs state the engine
    #: does not keep is refused with a clear error, never silently reset.
    session_state: ClassVar[frozenset[str]] = frozenset()

    #: The keys this engine type accepts besides ``type`` (and :data:`COMMON_OPTIONS`).
    options: ClassVar[Mapping[str, Option]] = {}

    CAPABILITIES: ClassVar[tuple[str, ...]] = (
        "streaming", "parameters", "cancel", "write", "catalog",
    )

    def __init__(self, name: str, options: Mapping[str, Any], sources: Mapping[str, Source]):
        self.name = name
        self.config = dict(options)
        self.sources = dict(sources)

    @classmethod
    def all_options(cls) -> dict[str, Option]:
        """Every key the configuration may set: :data:`COMMON_OPTIONS`, then the type's own."""
        return {**COMMON_OPTIONS, **cls.options}

    @classmethod
    def capabilities(cls, options: Mapping[str, Any] | None = None) -> list[str]:
        """The capability names this engine type declares.

        Args:
            options: an engine's configuration section; a type whose engines lose a
                capability by configuration leaves it out for them.
        """
        return [c for c in cls.CAPABILITIES if getattr(cls, f"supports_{c}")]

    @classmethod
    def describe_version(cls, options: Mapping[str, Any]) -> str | None:
        """The version this engine would run, found without importing its driver."""
        return None

    def connect(self) -> None:
        """Open connections and mount sources. Called once, before the first query.

        Raises:
            gateway.errors.EngineConnectionError: the engine is unreachable.
            gateway.errors.ConfigError: a setting the engine rejects.
        """

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        """Run one SQL statement.

        Args:
            sql: the statement, in this engine's dialect (the gateway has
                already applied ``arrowgate_rewrite_sql``).
            parameters: positional values for ``?`` / ``$1`` placeholders, or
                None. Only engines with ``supports_parameters`` accept them.

        Returns:
            An :class:`EngineResult` whose reader streams the answer. A
            statement without rows (DDL, INSERT) returns the engine's count
            table, or an empty one.

        Raises:
            gateway.errors.QueryError: the engine ran the query and it failed.
            gateway.errors.Unsupported: the engine cannot run this construct.
            gateway.errors.Cancelled: :meth:`cancel` interrupted it.
            gateway.errors.EngineConnectionError: the engine went away.
        """
        raise NotImplementedError

    def check_sql(self, sql: str) -> None:
        """Refuse a statement before anything runs or plans it.

        Called by the core for every statement and every statement prepared,
        after ``arrowgate_rewrite_sql``. The base engine refuses nothing.

        Args:
            sql: the statement, as :meth:`execute` would get it.

        Raises:
            gateway.errors.QueryError: (kind ``permission``) the engine may not run it,
                with what was refused and why.
        """

    def warm(self) -> None:
        """Load now what this engine's first statement would load (modules, a planner),
        before a statement whose latency is compared with another engine's: a shadow's
        primary and reference are both warmed, untimed, so that the ratio is the
        engines' and not their imports'. The base engine loads nothing."""

    def explain_failure(self, sql: str, error: GatewayError) -> GatewayError:
        """The error ``sql`` failed with, as the user should read it.

        Called by the statement pipeline when the engine's execution fails. An
        engine that knows a cause the engine's own message hides (a source it
        could not mount, whose stand-in view has none of the file's columns)
        returns an error naming it; the base engine returns ``error``.
        """
        return error

    def mount_for(self, sql: str) -> None:
        """Make ready the configured sources ``sql`` names, before it runs.

        Called by the statement pipeline for every statement and every
        statement prepared, after :meth:`check_sql`, with the SQL the engine
        will run. An engine that mounts sources as views mounts here the ones
        a statement names, the first time one does, so that starting the
        engine reads no source and a source that cannot be read fails only
        the statements naming it. The base engine does nothing.

        Raises:
            gateway.errors.QueryError: a source the statement names cannot be
                mounted, with the source's name and why.
        """

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        """A session: one connection whose state (:attr:`session_state`) lasts across statements.

        The default runs each statement through :meth:`execute` and keeps no
        state. Engines with connections override it (a DuckDB cursor, an ADBC
        connection). Called by ``gw.session()`` and, for a one-shot
        ``gw.execute``, once per query with ``one_shot=True``: the session
        then serves one statement, and an engine whose sessions are costly
        (a worker process each) may answer with a lighter one.

        Args:
            one_shot: the session serves one statement.
            read_only: the session's user is read-only
                (:attr:`gateway.statement.Principal.read_only`). The pipeline
                has refused their statements that are not queries already, but
                it cannot see what a query's functions do on the server. An
                engine whose database can refuse writes per connection must
                open the session on such a connection (PostgreSQL's read-only
                transactions, SQLite's ``query_only``), which no later session
                of a user who writes may get; one whose database cannot
                (DuckDB, whose read-only mode is per database file) ignores it
                and says so in its documentation.

        Raises:
            gateway.errors.EngineConnectionError: no connection can be opened.
        """
        return EngineSession(self)

    def catalog(self) -> list[CatalogColumn]:
        """List the schemas, tables and columns this engine can query.

        Returns:
            One :class:`CatalogColumn` per column, with its Arrow type.

        Raises:
            gateway.errors.Unsupported: the engine has no catalog.
        """
        from gateway.errors import Unsupported

        raise Unsupported("this engine has no catalog", engine=self.name)

    # -- the catalog tree, level by level ----------------------------------------------
    # The defaults filter :meth:`catalog`'s flat list; engines whose catalog is
    # large answer each level with one query of their own.
    def catalogs(self) -> list[str]:
        """The catalogs (databases) this engine can query, in display order."""
        return list(dict.fromkeys(c.catalog for c in self.catalog()))

    def schemas(self, catalog: str | None = None, pattern: str | None = None) -> list[SchemaRef]:
        """The schemas of ``catalog`` (every catalog when None) whose name is LIKE ``pattern``."""
        match = like_matcher(pattern)
        found = {SchemaRef(c.catalog, c.schema) for c in self.catalog()
                 if (catalog is None or c.catalog == catalog) and match(c.schema)}
        return sorted(found)

    def tables(self, catalog: str | None = None, schema: str | None = None,
               pattern: str | None = None, types: Sequence[str] | None = None) -> list[TableRef]:
        """The tables and views matching the filters (``types``: e.g. ``["TABLE", "VIEW"]``)."""
        match = like_matcher(pattern)
        found = {TableRef(c.catalog, c.schema, c.table, c.table_type) for c in self.catalog()
                 if (catalog is None or c.catalog == catalog)
                 and (schema is None or c.schema == schema) and match(c.table)
                 and (types is None or c.table_type in types)}
        return sorted(found)

    def columns(self, table: str, catalog: str | None = None, schema: str | None = None,
                pattern: str | None = None) -> list[CatalogColumn]:
        """The columns of one table (in table order) whose name is LIKE ``pattern``."""
        match = like_matcher(pattern)
        return [c for c in self.catalog()
                if c.table == table and (catalog is None or c.catalog == catalog)
                and (schema is None or c.schema == schema) and match(c.column)]

    @property
    def holds_credentials(self) -> bool:
        """Whether this engine holds credentials its SQL could send elsewhere (a
        catalog password, a DuckDB secret). The statement pipeline then refuses
        what would open a connection to a server the configuration does not name
        (``ATTACH`` of a server, ``postgres_scan('host=...')``), for every user.
        The base engine holds none.
        """
        return False

    def cancel(self) -> None:
        """Interrupt the running query, from another thread. Never raises."""

    def at_rest(self) -> None:
        """Give back what the engine keeps from statements already finished and no
        longer needs. A long-running front end calls it, from a thread of its own, once
        it has run nothing for a while (the Flight service: 5 s after its last
        statement); a statement may still start meanwhile, on another thread. Never
        raises. The base engine keeps nothing.
        """

    def close(self) -> None:
        """Release everything the engine opened. Safe to call twice."""


#: The kinds of state a session may keep (:attr:`Engine.session_state`).
SESSION_STATE = frozenset({"settings", "use", "temp_tables", "transactions"})

class EngineSession:
    """One connection of an engine, with the state it keeps (:attr:`Engine.session_state`).

    The base class is stateless: each statement runs through
    :meth:`Engine.execute`, and cancelling a query cancels the engine's
    running queries (:meth:`Engine.cancel`) when the engine supports that at
    all. Engines override :meth:`Engine.open_session` to do better.

    A session runs one statement at a time (the gateway's
    :class:`gateway.session.Session` guarantees it); several sessions of one
    engine run concurrently.
    """

    def __init__(self, engine: Engine):
        self.engine = engine

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        """Run one statement in this session.

        Args:
            sql: the statement, in the engine's dialect.
            parameters: positional values, or None.
            handle: the query's handle: register how to stop this query with
                ``handle.on_cancel(fn)``, or poll ``handle.cancelled``.

        Returns, Raises: as :meth:`Engine.execute`.
        """
        if self.engine.supports_cancel:
            # it stops every query of the engine: once, never again by the handle's nudges
            handle.on_cancel(self.engine.cancel, repeat=False)
        return self.engine.execute(sql, parameters)

    def prepare(self, sql: str) -> EnginePrepared:
        """Plan ``sql`` once for many executions.

        The base class finds the placeholders with sqlglot, and the result
        schema by running the statement once (reads only) and reading its
        schema without its rows.

        Raises:
            gateway.errors.QueryError: the statement does not parse or plan.
        """
        return EnginePrepared(self, sql)

    def close(self) -> None:
        """Release the connection. Safe to call twice."""


class EnginePrepared:
    """A statement prepared in one :class:`EngineSession`.

    Attributes:
        sql: the statement.
        parameter_schema: one field per placeholder (``$1``, ``$2``, ...);
            ``pa.null()`` where the engine cannot tell the type.
    """

    def __init__(self, session: EngineSession, sql: str):
        import pyarrow as pa

        from gateway.sql.kinds import placeholder_count

        self.session = session
        self.sql = sql
        count = placeholder_count(sql, session.engine.dialect)
        self.parameter_schema: pa.Schema = pa.schema(
            [pa.field(f"${i + 1}", pa.null()) for i in range(count)])
        self._schema: pa.Schema | None = None

    @property
    def schema(self) -> pa.Schema:
        """The result schema (an empty schema for a statement that returns no rows)."""
        if self._schema is None:
            self._schema = self._probe_schema()
        return self._schema

    def _probe_schema(self) -> pa.Schema:
        import pyarrow as pa

        from gateway.result import QueryHandle
        from gateway.sql.kinds import is_read

        if not is_read(self.sql, self.session.engine.dialect):
            return pa.schema([])
        n = len(self.parameter_schema)
        handle = QueryHandle(self.session.engine.name, 0, self.sql)
        try:
            answer = self.execute([None] * n if n else None, handle)
            schema = answer.schema
            close = getattr(answer.reader, "close", None)
            if close is not None:
                close()
        finally:
            handle.finish()
        return schema

    def execute(self, parameters: Sequence[Any] | None, handle: QueryHandle) -> EngineResult:
        """Run the statement with one row of parameters (see :meth:`EngineSession.execute`)."""
        return self.session.execute(self.sql, parameters, handle)

    def execute_many(self, parameters: pa.Table, handle: QueryHandle) -> EngineResult | None:
        """Run the statement once for each row of ``parameters`` (one column per
        placeholder, in order), in one engine call, where the engine can.

        Returns:
            The answers of every row, one after the other (for DML, its count), or
            None when the engine cannot run this statement so: the gateway then runs
            it row by row with :meth:`execute`. The base class returns None.
        """
        return None

    def close(self) -> None:
        """Forget the plan. Safe to call twice."""
