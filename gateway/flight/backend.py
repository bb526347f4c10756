"""The core API the Flight SQL service uses, in one module.

Everything the service asks of the gateway goes through :class:`Backend`, so
the rest of ``gateway.flight`` never reaches into the core: one-shot queries
(``gw.execute``), sessions and their prepared statements, per-query cancel and
timeouts, and the catalog tree loaded level by level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.errors import Unsupported
from gateway.flight.schemas import PreparedSchemas

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.core import Gateway
    from gateway.engine import CatalogColumn, TableRef
    from gateway.result import Result, RunningQuery
    from gateway.session import PreparedStatement, Session
    from gateway.statement import Principal


@dataclass
class Prepared:
    """A statement prepared on one engine, and the session it owns (if it owns one).

    ``known_schema`` is its answer schema when a cache knew it; otherwise the
    first use of :attr:`schema` plans it and hands it to ``keep_schema``.
    """

    statement: PreparedStatement
    engine: str
    owned: Session | None = None
    known_schema: pa.Schema | None = None
    keep_schema: Callable[[pa.Schema], None] | None = None

    @property
    def sql(self) -> str:
        return self.statement.sql

    @property
    def schema(self) -> pa.Schema:
        if self.known_schema is None:
            self.known_schema = self.statement.schema
            if self.keep_schema is not None:
                self.keep_schema(self.known_schema)
        return self.known_schema

    @property
    def parameter_schema(self) -> pa.Schema:
        return self.statement.parameter_schema

    @property
    def settings_sql(self) -> list[str]:
        """The SET statements its session ran so far (a capture records them)."""
        return list(self.statement.session.settings_sql)

    def execute(self, parameters: Sequence[Any] | pa.Table | None, timeout: float | None,
                shadow: str | None = None) -> Result:
        """Run with one row of parameters, or every row of a table (answers one after another).

        ``shadow`` names a reference engine; None lets the ``[shadow]`` section decide.
        """
        return self.statement.execute(parameters, timeout=timeout, shadow=shadow)

    def close(self) -> None:
        self.statement.close()
        if self.owned is not None:
            self.owned.close()


class Backend:
    """The gateway, as the service sees it."""

    def __init__(self, gw: Gateway):
        self.gw = gw
        #: prepared statements' answer schemas (the service invalidates them)
        self.schemas = PreparedSchemas()

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
        return {"name": cfg.name, "type": cfg.type, "dialect": cls.dialect,
                "capabilities": cls.capabilities(cfg.options),
                "default": cfg.name == self.default_engine}

    def writes(self, engine: str) -> bool:
        """Whether the engine accepts statements that change data."""
        return "write" in self.describe(engine)["capabilities"]

    def dialect(self, engine: str) -> str:
        return self.gw.dialect(engine)

    def has_transactions(self, engine: str) -> bool:
        """Whether the engine's sessions keep transactions (this starts the engine)."""
        return bool(self.gw.engine(engine).supports_transactions)

    # -- statements --------------------------------------------------------------
    def execute(self, sql: str, engine: str, session: Session | None, timeout: float | None,
                principal: Principal, shadow: str | None = None) -> Result:
        """Run a statement in ``session``, or once on ``engine`` when there is none, for
        ``principal`` (every step of the statement pipeline applies).

        ``shadow`` names a reference engine; None lets the ``[shadow]`` section decide.
        """
        limit = timeout or None
        if session is not None:
            return session.execute(sql, timeout=limit, shadow=shadow)
        return self.gw.execute(sql, engine=engine, shadow=shadow, timeout=limit,
                               principal=principal)

    def session(self, engine: str, principal: Principal) -> Session:
        """A session pinned to one connection of ``engine``, its statements ``principal``'s."""
        return self.gw.session(engine, principal=principal)

    def prepare(self, sql: str, engine: str, session: Session | None,
                principal: Principal) -> Prepared:
        """Prepare in ``session``, or in a session of the statement's own when there is none.

        The pipeline checks the statement for ``principal`` every time; only its answer
        schema may come from :attr:`schemas`, kept for this principal, engine, session
        and text.
        """
        key = (principal, engine, None if session is None else session.id, sql)
        generation = self.schemas.generation
        owned = None if session is not None else self._statement_session(engine, principal)
        try:
            statement = (session or owned).prepare(sql)  # type: ignore[union-attr]
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        return Prepared(statement, engine, owned, self.schemas.get(key),
                        lambda schema: self.schemas.keep(key, generation, schema))

    def _statement_session(self, engine: str, principal: Principal) -> Session:
        """The session of one prepared statement whose caller has none: one-shot, as a
        ``gw.execute`` statement's is, so the engine lends it an idle connection (a DuckDB
        cursor with its settings and search path set already: opening one was a fifth of
        the server's work in ADBC's prepare) and takes it back only if the statement left
        it as it found it."""
        from gateway.errors import GatewayError
        from gateway.session import Session

        if not principal.may_use(engine):
            raise GatewayError(f"user {principal.name!r} may not use engine {engine!r}",
                               engine=engine, kind="permission")
        return Session(self.gw, engine, one_shot=True, principal=principal)

    def running(self, user: str | None = None) -> list[RunningQuery]:
        """The statements admitted and not finished (one user's, when named)."""
        return self.gw.pipeline.running(user)

    @staticmethod
    def update_count(result: Result) -> int:
        """Rows a write changed; -1 when the engine does not say."""
        count = result.update_count
        result.close()
        return -1 if count is None else count

    # -- the catalog tree ------------------------------------------------------------
    def schema_names(self, engine: str, pattern: str | None) -> list[str]:
        """The engine's schema names (its catalogs' schemas together; a LIKE pattern)."""
        return sorted({ref.schema for ref in self._tree(engine, "schemas", None, pattern)})

    def tables(self, engine: str, schema: str | None, pattern: str | None,
               types: Sequence[str] | None) -> list[TableRef]:
        return self._tree(engine, "tables", None, schema, pattern, list(types) if types else None)

    def columns(self, engine: str) -> list[CatalogColumn]:
        """Every column of every table, in one listing (for answers that need table schemas)."""
        return self._tree(engine, "catalog")

    def _tree(self, engine: str, method: str, *args: Any) -> Any:
        try:
            return getattr(self.gw, method)(engine, *args)
        except Unsupported:
            return []

    # -- shadow ---------------------------------------------------------------------
    def shadow_summary(self) -> dict[str, Any]:
        """What ``arrowgate shadow report`` shows, from the configured store."""
        settings = self.gw.shadow_settings
        if settings is None or settings.store is None:
            return {"configured": False}
        from gateway.shadow.store import ShadowStore, summarize

        return {"configured": True, **summarize(ShadowStore(settings.store).read())}
