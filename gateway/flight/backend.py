"""The core API the Flight SQL service uses, in one module.

Everything the service asks of the gateway goes through :class:`Backend`, so
the rest of ``gateway.flight`` never reaches into the core. It is written
against today's core (``Gateway.execute``, ``Gateway.catalog``); prepared
statements are emulated here: the parameters are counted with sqlglot and
the answer's schema comes from running the query under ``LIMIT 0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.core import Gateway
    from gateway.engine import CatalogColumn
    from gateway.result import Result


@dataclass
class Prepared:
    """A statement prepared on one engine: its answer's schema and its parameters'."""

    backend: Backend
    sql: str
    engine: str
    schema: pa.Schema
    parameter_schema: pa.Schema

    def execute(self, parameters: Sequence[Any] | None = None) -> Result:
        return self.backend.execute(self.sql, self.engine, parameters)

    def close(self) -> None:
        """Nothing is held on the engine between executions."""


class Backend:
    """The gateway, as the service sees it."""

    def __init__(self, gw: Gateway):
        self.gw = gw

    @property
    def engines(self) -> list[str]:
        return list(self.gw.config.engines)

    @property
    def default_engine(self) -> str:
        return self.gw.default_engine

    def describe(self, engine: str) -> dict[str, Any]:
        """An engine's type and capabilities, for the ``engines`` action."""
        cfg = self.gw.engine_config(engine)
        cls = self.gw.engine_types[cfg.type]
        return {"name": cfg.name, "type": cfg.type,
                "capabilities": cls.capabilities(cfg.options),
                "default": cfg.name == self.default_engine}

    def writes(self, engine: str) -> bool:
        """Whether the engine accepts statements that change data."""
        return "write" in self.describe(engine)["capabilities"]

    def dialect(self, engine: str) -> str:
        """The engine's sqlglot dialect (every engine of today's core speaks DuckDB's SQL)."""
        return "duckdb"

    def execute(self, sql: str, engine: str, parameters: Sequence[Any] | None = None,
                shadow: str | bool | None = None) -> Result:
        """Run a statement; the ``[shadow]`` section decides about shadowing unless ``shadow``."""
        return self.gw.execute(sql, engine=engine, parameters=parameters, shadow=shadow)

    def prepare(self, sql: str, engine: str) -> Prepared:
        """Count the statement's parameters and find its answer's schema without reading rows."""
        import pyarrow as pa

        self.gw.engine_config(engine)
        count = placeholder_count(sql, self.dialect(engine))
        parameter_schema = pa.schema([pa.field(f"${i + 1}", pa.null()) for i in range(count)])
        schema = pa.schema([])
        if self.statement_kind(sql, engine) == "read":
            probe = f"SELECT * FROM ({sql.strip().rstrip(';')}) AS arrowgate_probe LIMIT 0"
            try:
                with self.execute(probe, engine, [None] * count if count else None,
                                  shadow=False) as result:
                    schema = result.schema
            except GatewayError:
                pass  # a schema the engine cannot tell before running: the answer carries it
        return Prepared(self, sql, engine, schema, parameter_schema)

    def statement_kind(self, sql: str, engine: str) -> str:
        """``read`` for a query, else what the statement is (``INSERT``, ``unrecognized``)."""
        from gateway.shadow import statement_kind

        return statement_kind(sql, self.dialect(engine))

    def columns(self, engine: str) -> list[CatalogColumn]:
        """Every column of every table the engine can query (empty if it has no catalog)."""
        from gateway.errors import Unsupported

        try:
            return self.gw.catalog(engine)
        except Unsupported:
            return []

    @staticmethod
    def update_count(result: Result) -> int:
        """Rows a write changed, read from the engine's answer; -1 when it does not say."""
        schema = result.schema
        if len(schema) == 1 and schema[0].name.lower() in ("count", "changes", "rows_affected"):
            rows = result.to_arrow().column(0).to_pylist()
            return int(rows[0]) if len(rows) == 1 and rows[0] is not None else -1
        result.close()
        return -1

    def shadow_summary(self) -> dict[str, Any]:
        """What ``arrowgate shadow report`` shows, from the configured store."""
        settings = self.gw.shadow_settings
        if settings is None or settings.store is None:
            return {"configured": False}
        from gateway.shadow_store import ShadowStore, summarize

        return {"configured": True, **summarize(ShadowStore(settings.store).read())}


def placeholder_count(sql: str, dialect: str) -> int:
    """How many positional parameters (``?``, ``$1``) a statement has."""
    import sqlglot
    from sqlglot import exp

    try:
        statements = sqlglot.parse(sql, read=dialect)
    except Exception:
        return sql.count("?")
    numbered: set[str] = set()
    anonymous = 0
    for stmt in statements:
        if stmt is None:
            continue
        for node in stmt.find_all(exp.Placeholder, exp.Parameter):
            name = node.name
            if name and name.isdigit():
                numbered.add(name)
            elif name in ("", "?"):
                anonymous += 1
    return max(anonymous, max((int(n) for n in numbered), default=0))
