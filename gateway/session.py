"""Sessions and prepared statements: state that lasts from one statement to the next.

``gw.session(engine)`` pins one connection of one engine. What it keeps
(``SET``, ``USE``, temporary tables, transactions) depends on the engine
(:attr:`gateway.engine.Engine.session_state`, shown as ``session.keeps``);
a statement that needs state the engine cannot keep is refused with
:class:`~gateway.errors.Unsupported`, never silently reset.

Thread safety: a :class:`~gateway.Gateway` is shared by any number of
threads, and each thread opens its own sessions. A :class:`Session` (and its
prepared statements) is used by one thread at a time: a second statement
started while the first is still executing fails with "the session is busy".
``session.cancel()`` and ``result.cancel()`` may be called from any thread.

One owner per connection: the engine's connection, and the answer being read
from it, are touched by one thread at a time. :attr:`Session.owner` is held
while a statement starts, while each batch of its answer is read (in whatever
thread reads it: the Flight service reads ahead in a thread of its own), and
while the answer or the session is closed. A close from another thread first
interrupts a read in progress, then waits for it to leave the engine, so no
engine ever has a connection closed or reused under a reader (DuckDB crashes
the process when that happens).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gateway.engine import EngineResult
from gateway.errors import GatewayError, QueryError, Unsupported
from gateway.statement import LOCAL, Principal, Statement

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.core import Gateway
    from gateway.engine import EnginePrepared, EngineSession
    from gateway.result import QueryHandle, Result

_session_ids = itertools.count(1)


class Session:
    """One connection of one engine and the state it keeps. Use it as a context manager.

    Attributes:
        id: unique in the process; :meth:`gateway.Gateway.running` shows it.
        engine: the engine's name.
        keeps: the kinds of state this session keeps (``settings``, ``use``,
            ``temp_tables``, ``transactions``).
        principal: who sends its statements (:class:`gateway.statement.Principal`).
        engine_session: the engine's connection (for the statement pipeline).
    """

    def __init__(self, gw: Gateway, engine: str | None = None, *, one_shot: bool = False,
                 principal: Principal = LOCAL):
        eng = gw.engine(engine)
        self.gw = gw
        self.engine = eng.name
        self.id = next(_session_ids)
        self.keeps: frozenset[str] = eng.session_state
        self.principal = principal
        self.engine_session: EngineSession = eng.open_session(one_shot=one_shot,
                                                              read_only=principal.read_only)
        self._one_shot = one_shot
        self._busy = threading.Lock()
        #: held by the one thread touching the engine's connection: a statement's start,
        #: each batch read of its answer, closing (reentrant: a close inside a read's end)
        self.owner = threading.RLock()
        #: the answer being read, held weakly: an answer its caller dropped is released
        #: (gateway.result), not kept alive by the session that made it
        self._current: weakref.ref[Result] | None = None
        #: the handle of the statement being started or read, for cancel()
        self._handle: QueryHandle | None = None
        self._closed = False
        #: whether a transaction this session began is open (``BEGIN`` ran, and no
        #: ``COMMIT`` or ``ROLLBACK`` since); the Flight service rolls back one whose
        #: client went quiet (``transaction_idle``)
        self.in_transaction = False
        #: the SET and RESET statements this session ran, in order: what a replay of its
        #: statements runs first (gateway.capture.captured)
        self.settings_sql: list[str] = []

    # -- statements -------------------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] | None = None, *,
                timeout: float | None = None, shadow: str | bool | None = None) -> Result:
        """Run one statement in this session and return its streaming answer.

        An answer of this session that is still being read is closed first:
        a connection streams one answer at a time.

        Args:
            sql: the statement, in the engine's dialect.
            parameters: positional values for ``?`` / ``$1`` placeholders, or None.
            timeout: seconds before this query is cancelled with
                :class:`~gateway.errors.QueryTimeout`; None takes the engine's
                ``timeout`` option.
            shadow: as :meth:`gateway.Gateway.execute`; the reference runs
                outside this session.

        Raises:
            gateway.errors.Unsupported: the statement needs session state
                this engine does not keep.
            gateway.errors.GatewayError: the statement failed.
        """
        self._check_state(sql)
        return self.gw.pipeline.run(Statement(sql, self.engine, parameters, timeout, shadow,
                                              session=self, principal=self.principal))

    def prepare(self, sql: str) -> PreparedStatement:
        """Plan ``sql`` once to run it many times.

        Raises:
            gateway.errors.Unsupported: the engine takes no parameters and ``sql`` has some.
            gateway.errors.QueryError: the statement does not plan.
            gateway.errors.GatewayError: kind ``permission``: the principal may not run it.
        """
        self._check_state(sql)
        run_sql = self.gw.pipeline.check(Statement(sql, self.engine, principal=self.principal))
        with self.using():
            self.close_current()  # as a connection does: one answer at a time
            try:
                prepared = self.engine_session.prepare(run_sql)
            except GatewayError:
                raise
            except Exception as exc:
                raise QueryError(f"cannot prepare the statement: {exc}",
                                 engine=self.engine) from exc
        return PreparedStatement(self, sql, prepared)

    def cancel(self) -> None:
        """Cancel this session's running query, if any (from any thread)."""
        handle = self._handle
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """Cancel what runs and release the connection. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.cancel()
        with self.owner:  # a read in another thread leaves the engine first
            self.close_current()
            self.engine_session.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- what the statement pipeline uses -------------------------------------------------
    def using(self) -> _Use:
        """A block in which this session runs one statement; refused while another runs.

        Raises:
            gateway.errors.GatewayError: the session is closed, or busy.
        """
        return _Use(self)  # made per statement: kept here, it made a session a reference cycle

    def close_current(self) -> None:
        """Close the answer this session is still streaming, if any."""
        current = self._current() if self._current is not None else None
        if current is not None and not current.finished:
            current.close()

    def watch(self, handle: QueryHandle) -> None:
        """``handle`` is this session's running statement (:meth:`cancel` stops it)."""
        self._handle = handle

    def adopt(self, sql: str, result: Result) -> None:
        """``result``, the answer to ``sql``, is this session's answer being read (closed by
        the next statement); what ``sql`` did to the session's state is noted."""
        self._current = weakref.ref(result)
        if self._one_shot:
            return  # one statement, then closed: no state to note
        from gateway.sql.kinds import state_needed, transaction_change

        ends = transaction_change(sql)
        if ends is not None:
            self.in_transaction = ends == "begin"
        needed = state_needed(sql)
        if needed is not None and needed[0] == "settings":
            self.settings_sql.append(sql)

    def _check_state(self, sql: str) -> None:
        # (gateway.sql.kinds, its patterns, is imported by the first statement that asks: a
        # one-shot statement of a local user never does)
        from gateway.sql.kinds import state_needed

        needed = state_needed(sql)
        if needed is not None and needed[0] not in self.keeps:
            cfg = self.gw.engine_config(self.engine)
            keepers = [name for name, c in self.gw.config.engines.items()
                       if needed[0] in self.gw.engine_types[c.type].session_state]
            raise Unsupported(
                f"{needed[1]} would not persist: {cfg.type} engines keep no "
                f"{needed[0].replace('_', ' ')} between statements",
                engine=self.engine,
                hint=("engines that keep it: " + ", ".join(keepers)) if keepers else
                "run the statement and the query that needs it as one statement")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self.id} engine={self.engine!r}{' closed' if self._closed else ''}>"


class PreparedStatement:
    """A statement planned once in a :class:`Session`, run with different parameters.

    Attributes:
        sql: the statement as the caller wrote it.
    """

    def __init__(self, session: Session, sql: str, prepared: EnginePrepared):
        self.session = session
        self.sql = sql
        self._prepared = prepared
        self._closed = False

    @property
    def schema(self) -> pa.Schema:
        """The result schema, found without running the query wherever the engine can."""
        with self.session.using():
            self.session.close_current()  # planning it may run it: one answer at a time
            return self._prepared.schema

    @property
    def parameter_schema(self) -> pa.Schema:
        """One field per placeholder (``$1``, ...); ``null`` type where the engine cannot tell."""
        return self._prepared.parameter_schema

    def execute(self, parameters: Sequence[Any] | pa.RecordBatch | pa.Table | None = None, *,
                timeout: float | None = None, shadow: str | bool | None = None) -> Result:
        """Run the statement with one row of parameters, or with every row of a batch or table.

        With many rows the answers come back one after the other in one
        :class:`~gateway.result.Result` (for DML, its ``update_count`` is the total).

        Args:
            shadow: as :meth:`gateway.Gateway.execute`: the reference runs the
                statement's SQL with the same parameters. Only a run with at
                most one row of parameters is shadowed.

        Raises:
            gateway.errors.QueryError: the number of values does not match the
                placeholders, or a value does not fit its parameter.
        """
        import pyarrow as pa

        if self._closed:
            raise GatewayError("the prepared statement is closed", engine=self.session.engine)
        session = self.session
        values: list[Any] | None
        if isinstance(parameters, (pa.RecordBatch, pa.Table)):
            rows = self._rows_of(parameters)
            if len(rows) != 1:
                return session.gw.pipeline.run(Statement(
                    self.sql, session.engine, None, timeout, False, session=session,
                    principal=session.principal,
                    run=lambda handle: self._many(parameters, rows, handle)))
            values = rows[0]
        else:
            values = None if parameters is None else list(parameters)
        self._check_count(0 if values is None else len(values))
        return session.gw.pipeline.run(Statement(
            self.sql, session.engine, values, timeout, shadow, session=session,
            principal=session.principal,
            run=lambda handle: self._prepared.execute(values, handle)))

    def _rows_of(self, table: pa.RecordBatch | pa.Table) -> list[list[Any]]:
        self._check_count(table.num_columns, "columns")
        columns = [c.to_pylist() for c in table.columns]
        return [list(row) for row in zip(*columns, strict=True)]

    def _check_count(self, given: int, what: str = "values") -> None:
        wanted = len(self._prepared.parameter_schema)
        if given != wanted:
            raise QueryError(f"the statement takes {wanted} parameter"
                             f"{'' if wanted == 1 else 's'}; {given} {what} were given",
                             engine=self.session.engine,
                             hint="pass one value per placeholder, in order")

    def _many(self, table: pa.RecordBatch | pa.Table, rows: list[list[Any]],
              handle: QueryHandle) -> EngineResult:
        import pyarrow as pa

        if not rows:
            return EngineResult(pa.RecordBatchReader.from_batches(self._prepared.schema, []))
        batch = self._prepared.execute_many(pa.table(table), handle)
        if batch is not None:  # every row in one engine call
            return batch
        first = self._prepared.execute(rows[0], handle)
        rest = rows[1:]

        def batches() -> Iterator[pa.RecordBatch]:
            yield from first.reader
            for i, row in enumerate(rest, start=2):
                handle.check()
                try:
                    answer = self._prepared.execute(row, handle)
                except GatewayError as exc:
                    raise type(exc)(f"parameter row {i}: {exc.message}", engine=exc.engine,
                                    hint=exc.hint) from None
                for batch in answer.reader:
                    if batch.schema != first.schema:
                        batch = batch.cast(first.schema)
                    yield batch

        return EngineResult(pa.RecordBatchReader.from_batches(first.schema, batches()),
                            dict(first.notes))

    def close(self) -> None:
        """Release the plan. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._prepared.close()

    def __enter__(self) -> PreparedStatement:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Use:
    """:meth:`Session.using`'s block (a slotted object: the per-statement path).

    A session held by nothing else is freed at once, its connection with it: one kept
    in a reference cycle waited for the garbage collector with its engine's memory.
    """

    __slots__ = ("session",)

    def __init__(self, session: Session):
        self.session = session

    def __enter__(self) -> None:
        session = self.session
        if session._closed:
            raise GatewayError("the session is closed", engine=session.engine)
        if not session._busy.acquire(blocking=False):
            raise GatewayError("the session is busy with another statement",
                               engine=session.engine,
                               hint="a session runs one statement at a time; "
                                    "open a session per thread")
        session.owner.acquire()  # a batch of the last answer being read finishes first

    def __exit__(self, *exc: object) -> None:
        self.session.owner.release()
        self.session._busy.release()
