"""The statement pipeline: the one path every statement takes, whoever sends it.

``gw.execute``, ``session.execute``, prepared statements, the console and the
Flight SQL service all hand their statements to :class:`Pipeline`, which
takes each through the same steps, in this order:

1. **read** it (:mod:`gateway.sql`): what it does, what it reaches;
2. **authorize**: the :class:`Principal` may use the engine, and may write there;
3. **route**: the engine asked for; a statement it refuses as
   :class:`~gateway.errors.Unsupported` goes to its ``fallback`` engine, through
   these same steps again, so a fallback never reaches an engine its user may
   not use;
4. **scope**: settings stay in the session for users who share the server
   (:func:`gateway.sql.reach.session_scoped`), and an engine holding credentials
   opens no connection to a server the configuration does not name;
5. **admit** it against the limits (:class:`Limits`): from here it counts
   toward ``max_queries`` and shows in :meth:`Pipeline.running`;
6. **run** it under a :class:`~gateway.result.QueryHandle` that owns its
   timeout (which covers planning as well as execution), its cancel and its
   release: an answer nobody reads or closes is released when it is dropped;
7. **shadow** it, when asked: the hook ``arrowgate_shadowed``, which the shadow
   layer answers (:mod:`gateway.shadow.plugin`), so the core imports no shadow code;
8. **log** it through the query hooks, which carry no secret (errors are
   masked, :mod:`gateway.masking`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from gateway.errors import GatewayError, Overloaded, QueryError, Unsupported
from gateway.hookspecs import SHADOW_MISSING, QueryEvent
from gateway.records import FrozenRecord, Record
from gateway.result import QueryHandle, Result, RunningQuery

if TYPE_CHECKING:
    from gateway.core import Gateway
    from gateway.engine import EngineResult
    from gateway.session import Session


#: when the request that sends the statements run in this context arrived
#: (``time.monotonic()``), for a front end whose requests do work before their statement
#: reaches the pipeline (the Flight service: the call's arrival); None: when it reaches it
ARRIVED: contextvars.ContextVar[float | None] = contextvars.ContextVar("arrived", default=None)


@contextlib.contextmanager
def arriving(at: float) -> Iterator[None]:
    """Statements run in the block count their timeout from ``at``."""
    token = ARRIVED.set(at)
    try:
        yield
    finally:
        ARRIVED.reset(token)


class Principal(FrozenRecord):
    """Who sends a statement, and what they may reach.

    Attributes:
        name: the user's name (``local`` for the process's own user).
        engines: the engines they may use; None for every engine.
        read_only: statements that change data are refused, on every engine.
        shared: they share the server with other users (the Flight service):
            settings stay in their session, and nothing they send changes
            another user's answers. The CLI, the console and in-process callers
            are not shared: they control their own process.
    """

    __slots__ = ("name", "engines", "read_only", "shared")
    name: Final[str]
    engines: Final[frozenset[str] | None]
    read_only: Final[bool]
    shared: Final[bool]

    def __init__(self, name: str = "local", engines: frozenset[str] | None = None,
                 read_only: bool = False, shared: bool = False) -> None:
        self.name, self.engines, self.read_only, self.shared = name, engines, read_only, shared

    def may_use(self, engine: str) -> bool:
        return self.engines is None or engine in self.engines


#: the process's own user: every engine, reads and writes, every setting
LOCAL = Principal()


class Limits(Record):
    """How many statements may be admitted at once (``[serve]`` sets them for the service).

    Attributes:
        max_queries: admitted and not yet finished, all users together; None: no limit.
        max_queries_per_user: of one principal; None: no limit.
        max_open_per_engine: answers of one engine admitted and not yet read to
            their end or closed. It bounds what a caller that never reads its
            answers can hold (a connection and a cursor each).
    """

    __slots__ = ("max_queries", "max_queries_per_user", "max_open_per_engine")

    def __init__(self, max_queries: int | None = None, max_queries_per_user: int | None = None,
                 max_open_per_engine: int = 1024) -> None:
        self.max_queries, self.max_queries_per_user = max_queries, max_queries_per_user
        self.max_open_per_engine = max_open_per_engine


class Statement(Record):
    """One statement on its way through the pipeline.

    Attributes:
        sql: as the caller wrote it.
        engine: the engine's name; None for the default engine.
        parameters: positional values for its placeholders, or None.
        timeout: seconds; None takes the engine's ``timeout`` option.
        shadow: a reference engine's name, False (never), or None (``[shadow]`` decides).
        session: the session it runs in; None runs it once, in a session of its own.
        principal: who sends it.
        run: how the engine runs it when it is not ``sql`` itself (a prepared
            statement's execution): ``run(handle) -> EngineResult``.
        part_of: set for a statement run on behalf of another one (its fallback,
            its shadow reference): it is not admitted again.
        prelude: statements run first in the session it runs in (a replayed
            statement's ``SET``s).
        tried: engines tried already for this statement (a fallback chain never loops).
        arrived: ``time.monotonic()`` when it reached the pipeline: its timeout counts
            from here, so reading, checking and routing it count too (set by the
            pipeline; a fallback keeps its statement's).
    """

    __slots__ = ("sql", "engine", "parameters", "timeout", "shadow", "session", "principal", "run",
                 "part_of", "prelude", "tried", "arrived")

    def __init__(self, sql: str, engine: str | None = None,
                 parameters: Sequence[Any] | None = None, timeout: float | None = None,
                 shadow: str | bool | None = None, session: Session | None = None,
                 principal: Principal = LOCAL,
                 run: Callable[[QueryHandle], EngineResult] | None = None,
                 part_of: str | None = None, prelude: tuple[str, ...] = (),
                 tried: tuple[str, ...] = (), arrived: float | None = None) -> None:
        self.sql, self.engine, self.parameters, self.timeout = sql, engine, parameters, timeout
        self.shadow, self.session, self.principal, self.run = shadow, session, principal, run
        self.part_of, self.prelude, self.tried = part_of, prelude, tried
        self.arrived = arrived


class Pipeline:
    """Runs statements for one gateway, and knows which ones are running.

    Thread safety: any number of threads run statements at once; the running
    registry and the limits are guarded by one lock.
    """

    def __init__(self, gw: Gateway, session_type: type[Session]):
        self.gw = gw
        #: the sessions a statement run alone gets (:class:`gateway.session.Session`, which
        #: builds statements of its own: handed in by the gateway, not imported)
        self.session_type = session_type
        self.limits = Limits()
        self._running: dict[int, QueryHandle] = {}
        #: how many of the running statements each user and each engine has
        self._per_user: dict[str, int] = {}
        self._per_engine: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- the whole path ----------------------------------------------------------------
    def run(self, stmt: Statement) -> Result:
        """Take ``stmt`` through every step; its streaming answer.

        Raises:
            gateway.errors.GatewayError: refused at a step (kind ``permission``,
                ``unsupported``, ``resource``...), or failed in the engine.
        """
        if stmt.arrived is None:
            stmt.arrived = ARRIVED.get() or time.monotonic()
        stmt.engine = self.gw.engine_config(stmt.engine).name
        wanted = isinstance(stmt.shadow, str) or \
            (stmt.shadow is None and self.gw.shadow_settings is not None)
        if wanted and stmt.part_of is None:  # step 7, the shadow layer's (gateway.shadow)
            hook = self.gw.pm.hook.arrowgate_shadowed
            if not hook.get_hookimpls():
                raise Unsupported("shadowing is not available: no plugin shadows statements",
                                  engine=stmt.engine, hint=SHADOW_MISSING)
            result = hook(pipeline=self, statement=stmt)
            if result is not None:
                return result
        return self.run_plain(stmt)

    def run_plain(self, stmt: Statement) -> Result:
        """Every step but the shadow: what the shadow layer runs on each engine."""
        if stmt.arrived is None:
            stmt.arrived = ARRIVED.get() or time.monotonic()
        run_sql = self.check(stmt)
        if stmt.session is not None:
            self.run_prelude(stmt, stmt.session)
            return self._run_in(stmt.session, stmt, run_sql)
        session = self.session_type(self.gw, stmt.engine, one_shot=not stmt.prelude,
                                    principal=stmt.principal)
        try:
            self.run_prelude(stmt, session)
            result = self._run_in(session, stmt, run_sql)
        except BaseException:
            session.close()
            raise
        handle = result.handle
        if handle is None or handle.session_id != session.id:
            session.close()  # a fallback engine answered, in a session of its own
        else:
            handle.when_done(lambda _h: session.close())
        return result

    def run_prelude(self, stmt: Statement, session: Session) -> None:
        """Run ``stmt.prelude`` in ``session``, each statement read to its end, through
        every step (a replay's ``SET``s are checked as any other statement is)."""
        for sql in stmt.prelude:
            self.run_plain(Statement(sql, session.engine, session=session,
                                     principal=stmt.principal, part_of="prelude")).to_arrow()

    # -- steps 1 to 4 ------------------------------------------------------------------
    def check(self, stmt: Statement) -> str:
        """Read, authorize and scope ``stmt`` on its engine; the SQL the engine gets.

        Prepared statements are checked when they are prepared and again at
        each execution.

        Raises:
            gateway.errors.GatewayError: kind ``permission`` for what the
                principal may not do, naming the engine and why.
        """
        gw = self.gw
        cfg = gw.engine_config(stmt.engine)
        name, principal = cfg.name, stmt.principal
        if not principal.may_use(name):
            raise _denied(f"user {principal.name!r} may not use engine {name!r}", name,
                          principal, gw)
        engine = gw.engine(name)
        dialect = engine.dialect
        if principal.read_only:
            from gateway.sql.kinds import is_read, statement_kind

            if not is_read(stmt.sql, dialect):
                kind = statement_kind(stmt.sql, dialect)
                raise _denied(f"user {principal.name!r} is read-only, and this is not a "
                              f"query ({kind})", name, principal, gw)
        sql = stmt.sql
        if principal.shared:
            from gateway.sql.kinds import explained
            from gateway.sql.reach import session_scoped

            configured = cfg.options.get("settings")
            fixed = frozenset(k.lower() for k in configured) \
                if isinstance(configured, dict) else frozenset()
            scoped = session_scoped(sql, dialect, fixed)
            if scoped.refusal is not None:
                raise GatewayError(scoped.refusal, engine=name, kind="permission")
            sql = scoped.sql
            inner = explained(sql)  # EXPLAIN ANALYZE runs what it explains
            if inner is not None and (refusal := session_scoped(inner, dialect, fixed).refusal):
                raise GatewayError(refusal, engine=name, kind="permission")
            for text in (sql,) if inner is None else (sql, inner):
                self._check_shared(text, dialect, engine, name)
        if engine.holds_credentials:
            from gateway.sql.kinds import explained
            from gateway.sql.reach import server_reach

            inner = explained(sql)
            reach = server_reach(sql, dialect) or (server_reach(inner, dialect) if inner else None)
            if reach is not None:
                raise GatewayError(
                    f"{reach} is not allowed on this engine: it holds credentials, and DuckDB "
                    "would offer them to any server", engine=name, kind="permission",
                    hint="declare the server as an engine or a source of its own")
        run_sql = gw.rewrite(sql, name)
        engine.mount_for(run_sql)
        return run_sql

    @staticmethod
    def _check_shared(sql: str, dialect: str, engine: Any, name: str) -> None:
        """Step 3 for a user who shares the server: nothing ``sql`` does may change or
        show what the other users reach (gateway.sql.reach)."""
        from gateway.sql.reach import (
            database_wide,
            hidden_reach,
            other_sessions,
            shared_catalog,
            sqlite_pragma,
        )

        hidden = hidden_reach(sql) if dialect == "duckdb" else None
        if hidden is not None:
            raise GatewayError(hidden, engine=name, kind="permission")
        sessions = other_sessions(sql)
        if sessions is not None:
            raise GatewayError(
                f"{sessions} shows or acts on other sessions of the engine's server, "
                "which every user of this service reaches as one role: other users' "
                "statements", engine=name, kind="permission")
        pragma = sqlite_pragma(sql, dialect)
        if pragma is not None:
            raise GatewayError(f"{pragma} changes the database file every user of this "
                               "server shares; a pragma may only read here",
                               engine=name, kind="permission")
        shadowing = shared_catalog(sql, dialect, engine.sources)
        if shadowing is not None:
            raise GatewayError(shadowing, engine=name, kind="permission")
        wide = database_wide(sql, dialect)
        if wide is not None:
            raise GatewayError(
                f"{wide} is not allowed here: it changes the database every user of this "
                "server shares (attached databases, secrets and extensions are not "
                "per connection)", engine=name, kind="permission",
                hint="ask for the database, secret or extension in the configuration")

    # -- steps 5, 6 and 8 ----------------------------------------------------------------
    def _run_in(self, session: Session, stmt: Statement, run_sql: str) -> Result:
        with session.using():
            session.close_current()
            result = self._start(session, stmt, run_sql)
            handle = result.handle
            if handle is not None and handle.session_id == session.id:
                session.adopt(stmt.sql, result)  # a fallback's answer is not this session's
        return result

    def _start(self, session: Session, stmt: Statement, run_sql: str) -> Result:
        gw = self.gw
        eng = gw.engine(session.engine)
        cfg = gw.engine_config(eng.name)
        if stmt.parameters is not None and stmt.run is None and not eng.supports_parameters:
            refused = Unsupported("query parameters are not supported by this engine type "
                                  f"({cfg.type})", engine=eng.name,
                                  engines=gw.engines_with("parameters"))
            return self._fall_back(stmt, eng.name, refused)
        limit = stmt.timeout if stmt.timeout is not None else cfg.options.get("timeout")
        check_seconds(limit, "a timeout", eng.name)
        handle = self._admit(stmt, eng.name, session.id, limit)
        session.watch(handle)
        event = QueryEvent(
            query_id=handle.query_id, sql=run_sql, engine=eng.name, engine_type=cfg.type,
            parameters=list(stmt.parameters) if stmt.parameters is not None else None,
            started=handle.started, original_sql=stmt.sql,
        )
        gw.notify("arrowgate_query_started", event=event)
        started = time.perf_counter()
        try:
            handle.check()  # the timeout may have passed while the statement was checked
            if stmt.run is not None:
                inner = stmt.run(handle)
            else:
                inner = session.engine_session.execute(run_sql, stmt.parameters, handle)
        except GatewayError as exc:
            error = handle.translate(eng.explain_failure(run_sql, exc))
            handle.finish()
            if isinstance(error, Unsupported):
                if cfg.options.get("fallback"):
                    return self._fall_back(stmt, eng.name, error)
                error = gw.name_engines(error)
            gw.notify("arrowgate_query_failed", event=event, error=error,
                      elapsed=time.perf_counter() - started)
            if error is exc:
                raise
            raise error from exc
        except Exception as exc:
            error = handle.translate(QueryError(str(exc), engine=eng.name))
            handle.finish()
            gw.notify("arrowgate_query_failed", event=event, error=error,
                      elapsed=time.perf_counter() - started)
            raise error from exc
        except BaseException:
            handle.finish()
            raise
        answered_by = inner.notes.get("answered_by", eng.name)
        return Result(
            answered_by, inner, started,
            on_finish=lambda rows, elapsed: gw.notify(
                "arrowgate_query_finished", event=event, rows=rows, elapsed=elapsed),
            on_error=lambda error, elapsed: gw.notify(
                "arrowgate_query_failed", event=event, error=error, elapsed=elapsed),
            handle=handle,
            owner=session.owner,
        )

    def _admit(self, stmt: Statement, engine: str, session_id: int,
               timeout: float | None) -> QueryHandle:
        """Step 5: count the statement from now on, and arm its timeout."""
        limits, user = self.limits, stmt.principal.name
        with self._lock:
            if stmt.part_of is None:
                if limits.max_queries is not None and len(self._running) >= limits.max_queries:
                    raise Overloaded(f"the service is running its limit of "
                                     f"{limits.max_queries} queries: try again when one "
                                     "has finished", engine=engine)
                if limits.max_queries_per_user is not None and \
                        self._per_user.get(user, 0) >= limits.max_queries_per_user:
                    raise Overloaded(f"you are running your limit of "
                                     f"{limits.max_queries_per_user} queries: read or "
                                     "cancel one first", engine=engine)
            if self._per_engine.get(engine, 0) >= limits.max_open_per_engine:
                raise Overloaded(
                    f"{limits.max_open_per_engine} answers of this engine are open: each "
                    "holds a connection until it is read to its end or closed",
                    engine=engine,
                    hint="read or close answers (result.close(), or `with` blocks) before "
                         "starting more")
            handle = QueryHandle(engine, session_id, stmt.sql, timeout, user=user)
            self._running[handle.query_id] = handle
            self._per_user[user] = self._per_user.get(user, 0) + 1
            self._per_engine[engine] = self._per_engine.get(engine, 0) + 1
        handle.when_done(self._forget)
        handle.start_timer(since=stmt.arrived)
        return handle

    def _forget(self, handle: QueryHandle) -> None:
        with self._lock:
            if self._running.pop(handle.query_id, None) is not None:
                self._per_user[handle.user] -= 1
                self._per_engine[handle.engine] -= 1

    def _fall_back(self, stmt: Statement, engine: str, refused: GatewayError) -> Result:
        """Step 3 again: the engine refused ``stmt`` as Unsupported; its fallback may answer.

        The fallback engine is checked like any other: the principal must be
        allowed to use it, with its read-only rule.
        """
        gw = self.gw
        fallback = gw.engine_config(engine).options.get("fallback")
        tried = (*stmt.tried, engine)
        if not fallback or fallback in tried:
            raise refused
        if not stmt.principal.may_use(fallback):
            raise GatewayError(
                f"engine {engine!r} cannot answer this itself ({refused.message}), and its "
                f"fallback engine {fallback!r} is not one user {stmt.principal.name!r} may use",
                engine=engine, kind="permission",
                hint="rewrite the statement in what the engine supports, or ask for access "
                     f"to {fallback!r}")
        again = Statement(stmt.sql, engine=fallback, parameters=stmt.parameters,
                          timeout=stmt.timeout, principal=stmt.principal,
                          part_of="fallback", tried=tried, arrived=stmt.arrived)
        result = self.run_plain(again)
        result.notes["answered_by"] = result.engine
        result.notes["fallback_reason"] = refused.message
        return result

    # -- what the front ends read ------------------------------------------------------
    def running(self, user: str | None = None) -> list[RunningQuery]:
        """The statements admitted and not finished, oldest first (one user's, when named)."""
        with self._lock:
            handles = list(self._running.values())
        return sorted((h.snapshot() for h in handles if user is None or h.user == user),
                      key=lambda q: q.query_id)

    def cancel(self, query_id: int, user: str | None = None) -> bool:
        """Cancel one admitted statement (one of ``user``'s, when named); other statements
        keep running. False when none with that id is running."""
        with self._lock:
            handle = self._running.get(query_id)
        if handle is None or (user is not None and handle.user != user):
            return False
        return handle.cancel()


def check_seconds(value: float | None, what: str, engine: str | None = None) -> None:
    """Refuse a number of seconds that is not a positive, finite number (None: no limit)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value <= 0:
        raise GatewayError(f"{what} must be a positive, finite number of seconds, not "
                           f"{value!r}", engine=engine, hint="leave it out for no limit")


def _denied(message: str, engine: str, principal: Principal, gw: Gateway) -> GatewayError:
    allowed = [e for e in gw.config.engines if principal.may_use(e)]
    return GatewayError(message, engine=engine, kind="permission",
                        hint="engines you may use: " + (", ".join(allowed) or "none"))

