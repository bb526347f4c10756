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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sources import Source


@dataclass(frozen=True)
class Option:
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

    types: tuple[type, ...]
    default: Any = None
    required: bool = False
    secret: bool = False
    help: str = ""
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    exclusive_minimum: float | None = None

    def type_names(self) -> str:
        names = {bool: "boolean", int: "integer", float: "number", str: "string",
                 dict: "table", list: "array"}
        return " or ".join(names.get(t, t.__name__) for t in self.types)


@dataclass(frozen=True)
class CatalogColumn:
    """One column of one table an engine can query."""

    schema: str
    table: str
    column: str
    type: pa.DataType
    nullable: bool = True
    table_type: str = "TABLE"


@dataclass
class EngineResult:
    """What :meth:`Engine.execute` returns.

    Attributes:
        reader: the rows, as a stream of record batches. Its ``schema`` is
            known before the first batch is read.
        notes: facts about how the answer was produced, for the caller to show
            (``skipped_rows``, ``answered_by`` for a fallback, ...).
    """

    reader: pa.RecordBatchReader
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> pa.Schema:
        return self.reader.schema


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

    #: The keys this engine type accepts besides ``type``.
    options: ClassVar[Mapping[str, Option]] = {}

    CAPABILITIES: ClassVar[tuple[str, ...]] = (
        "streaming", "parameters", "cancel", "write", "catalog",
    )

    def __init__(self, name: str, options: Mapping[str, Any], sources: Mapping[str, Source]):
        self.name = name
        self.config = dict(options)
        self.sources = dict(sources)

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

    def catalog(self) -> list[CatalogColumn]:
        """List the schemas, tables and columns this engine can query.

        Returns:
            One :class:`CatalogColumn` per column, with its Arrow type.

        Raises:
            gateway.errors.Unsupported: the engine has no catalog.
        """
        from gateway.errors import Unsupported

        raise Unsupported("this engine has no catalog", engine=self.name)

    def cancel(self) -> None:
        """Interrupt the running query, from another thread. Never raises."""

    def close(self) -> None:
        """Release everything the engine opened. Safe to call twice."""


def catalog_table(columns: Sequence[CatalogColumn]) -> pa.Table:
    """Render a catalog listing as an Arrow table (type names as strings)."""
    import pyarrow as pa

    return pa.table({
        "schema_name": pa.array([c.schema for c in columns], pa.string()),
        "table_name": pa.array([c.table for c in columns], pa.string()),
        "column_name": pa.array([c.column for c in columns], pa.string()),
        "data_type": pa.array([str(c.type) for c in columns], pa.string()),
        "nullable": pa.array([c.nullable for c in columns], pa.bool_()),
        "table_type": pa.array([c.table_type for c in columns], pa.string()),
    })
