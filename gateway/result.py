"""A query as it runs: its handle, and its answer as the caller sees it (:class:`Result`).

Query handles: one per running query, so it can be listed, cancelled and timed out alone.

The gateway gives every query a :class:`QueryHandle` before the engine sees
it. The engine registers how to stop *that* query (``handle.on_cancel(...)``,
e.g. ``cursor.interrupt``) or polls ``handle.cancelled`` between chunks;
``gw.cancel(query_id)``, ``result.cancel()`` and a query's timeout all go
through the handle, so other queries on the same engine keep running.

Thread safety: a handle is shared by the thread reading the answer, the
thread that cancels it and the timeout timer; every method may be called from
any of them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from gateway.errors import Cancelled, GatewayError, QueryError, QueryTimeout
from gateway.records import FrozenRecord

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.engine import EngineResult
    from gateway.shadow.record import ShadowRecord


# -- handles ----------------------------------------------------------------------------
_ids = itertools.count(1)

#: seconds after a cancel at which a query that is still running has its stoppers called
#: again: an interrupt that reaches an engine just before its query starts is lost
#: (DuckDB clears the flag when a query begins), and the query would run to its end
_NUDGES = (0.25, 0.5, 1.0, 2.0, 4.0)
#: the longest the deadline thread sleeps at once (a longer wait would overflow)
_LONGEST_WAIT = 3600.0


class RunningQuery(FrozenRecord):
    """One row of :meth:`gateway.Gateway.running`.

    Attributes:
        query_id: the id ``result.query_id`` and the query hooks carry.
        engine: the engine running it.
        session_id: the session it runs in (a one-shot ``gw.execute`` has its own).
        sql: the statement as the caller wrote it.
        started: ``time.time()`` when it was admitted (before it was planned).
        rows: rows delivered to the caller so far.
        user: the name of the principal that sent it (``local`` in process).
    """

    __slots__ = ("query_id", "engine", "session_id", "sql", "started", "rows", "user")
    query_id: Final[int]
    engine: Final[str]
    session_id: Final[int]
    sql: Final[str]
    started: Final[float]
    rows: Final[int]
    user: Final[str]

    def __init__(self, query_id: int, engine: str, session_id: int, sql: str, started: float,
                 rows: int, user: str = "local") -> None:
        self.query_id, self.engine, self.session_id, self.sql = query_id, engine, session_id, sql
        self.started, self.rows, self.user = started, rows, user


class QueryHandle:
    """How one query is stopped, by the caller, another thread or its timeout.

    Args:
        engine: the engine's name, for errors.
        session_id: the session the query runs in.
        sql: the statement, for :meth:`gateway.Gateway.running`.
        timeout: seconds after which the query is cancelled and fails with
            :class:`~gateway.errors.QueryTimeout`; None for no limit.
        user: the name of the principal that sent it.
    """

    def __init__(self, engine: str, session_id: int, sql: str, timeout: float | None = None,
                 user: str = "local"):
        self.query_id = next(_ids)
        self.engine = engine
        self.user = user
        self.session_id = session_id
        self.sql = sql
        self.started = time.time()
        self.timeout = timeout
        self.rows = 0
        self._lock = threading.Lock()
        self._stoppers: list[Callable[[], None]] = []
        self._repeated: list[Callable[[], None]] = []  # the stoppers nudges call again
        self._reason: type[GatewayError] | None = None
        self._on_done: list[Callable[[QueryHandle], None]] = []
        self._done = False
        self._timed = False  # a deadline of its own waits in _deadlines
        _live.add(self)
        started_here = getattr(_started, "handles", None)
        if started_here is not None:
            started_here.append(self)

    # -- what engines use --------------------------------------------------------
    def on_cancel(self, fn: Callable[[], None], repeat: bool = True) -> None:
        """Register how to stop this query; ``fn`` runs at once if it is already cancelled.

        ``fn`` is called from the cancelling thread and must not block for long.
        With ``repeat`` it is called again, a few times over some seconds, while
        a cancelled query is still running, so it must stop this query only and
        be harmless to repeat (an interrupt of its own cursor, a cancel request);
        a stopper that reaches further (every query of an engine) passes
        ``repeat=False``. Exceptions from it are ignored (a query that just
        finished cannot be interrupted).
        """
        with self._lock:
            if not self._done:
                self._stoppers.append(fn)
                if repeat:
                    self._repeated.append(fn)
            if self._reason is None:
                return
        _quietly(fn)

    @property
    def cancelled(self) -> bool:
        """True once the query was cancelled or timed out (engines poll this between chunks)."""
        return self._reason is not None

    @property
    def timed_out(self) -> bool:
        return self._reason is QueryTimeout

    def check(self) -> None:
        """Raise :class:`Cancelled` (or :class:`QueryTimeout`) when the query was stopped."""
        if self._reason is not None:
            raise self.error()

    def error(self) -> GatewayError:
        """The error a stopped query fails with."""
        if self._reason is QueryTimeout:
            return QueryTimeout(f"the query ran longer than its timeout of {self.timeout:g} s",
                                engine=self.engine,
                                hint="raise the timeout (the timeout argument, or the "
                                     "engine's timeout option)")
        return Cancelled("the query was cancelled", engine=self.engine)

    # -- what the gateway uses ----------------------------------------------------
    def cancel(self, reason: type[GatewayError] = Cancelled) -> bool:
        """Stop the query. Returns False when it had already finished or been stopped."""
        with self._lock:
            if self._done or self._reason is not None:
                return False
            self._reason = reason
            stoppers = list(self._stoppers)
        for fn in stoppers:
            _quietly(fn)
        _deadlines.add(time.monotonic() + _NUDGES[0], self, nudge=0)
        return True

    def _nudge(self, nudge: int) -> None:
        """Call the stoppers of a cancelled query that is still running once more."""
        with self._lock:
            if self._done:
                return
            stoppers = list(self._repeated)
        for fn in stoppers:
            _quietly(fn)
        if nudge + 1 < len(_NUDGES):
            _deadlines.add(time.monotonic() + _NUDGES[nudge + 1], self, nudge=nudge + 1)

    def start_timer(self, since: float | None = None) -> None:
        """Arm the timeout, if there is one (one shared thread watches every deadline),
        counted from ``since`` (a ``time.monotonic()`` reading; default now)."""
        if self.timeout is not None:
            now = time.monotonic()
            deadline = (now if since is None else since) + self.timeout
            if deadline <= now:  # it spent its time before it was admitted
                self._expire()
            else:
                self._timed = True
                _deadlines.add(deadline, self)

    def _expire(self) -> None:
        self.cancel(reason=QueryTimeout)

    def when_done(self, fn: Callable[[QueryHandle], None]) -> None:
        """Call ``fn(handle)`` once the query finished, failed or was closed."""
        with self._lock:
            if not self._done:
                self._on_done.append(fn)
                return
        fn(self)

    def finish(self) -> None:
        """The answer is complete, failed or abandoned: stop the timer, forget the stoppers."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._stoppers, self._repeated = [], []
            callbacks, self._on_done = self._on_done, []
        if self._timed:
            _deadlines.forget()
        for fn in callbacks:
            fn(self)

    @property
    def finished(self) -> bool:
        return self._done

    def translate(self, exc: GatewayError) -> GatewayError:
        """The error to raise for ``exc``: a timeout or cancel when this handle stopped the query.

        Engines report an interrupted query in their own words (DuckDB's
        ``INTERRUPT Error``, a killed worker, ...); once the handle was
        stopped, the caller gets the one error that says why.
        """
        if self._reason is not None and not isinstance(exc, (Cancelled, QueryTimeout)):
            return self.error()
        if self._reason is QueryTimeout and not isinstance(exc, QueryTimeout):
            return self.error()
        return exc

    def snapshot(self) -> RunningQuery:
        return RunningQuery(self.query_id, self.engine, self.session_id, self.sql,
                            self.started, self.rows, self.user)


class _Deadlines:
    """One daemon thread that cancels the queries whose timeout has passed, and
    nudges cancelled queries that are still running.

    A ``threading.Timer`` per query started a thread per query: 0.3 ms of a
    1 ms ``SELECT 1`` over Flight. The heap holds handles weakly, so a
    finished query is not kept alive until its deadline comes up, and the
    entries of finished queries are swept out once they are half the heap: left
    until their deadline, a service with the default 300 s timeout held every
    query of the last five minutes (an entry and a weak reference each, about
    200 bytes; an hour's timeout, an hour of them).
    """

    #: finished entries tolerated before a sweep, whatever the heap's size
    SWEEP_AFTER = 256

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, weakref.ref[QueryHandle]]] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._finished = 0  # entries whose query has finished since the last sweep

    def __len__(self) -> int:
        return len(self._heap)

    def forget(self) -> None:
        """A query with an entry finished; sweep the finished ones out once they are
        at least half the heap (amortized O(1) a query)."""
        with self._wake:
            self._finished += 1
            if self._finished < max(self.SWEEP_AFTER, len(self._heap) // 2):
                return
            self._heap = [entry for entry in self._heap
                          if (handle := entry[3]()) is not None and not handle.finished]
            heapq.heapify(self._heap)
            self._finished = 0
            self._wake.notify()  # the earliest deadline may be another one now

    def add(self, when: float, handle: QueryHandle, nudge: int = -1) -> None:
        """At ``when``, time ``handle`` out, or with ``nudge`` >= 0 nudge it.

        A ``when`` that is not finite never comes: nothing is added.
        """
        if not math.isfinite(when):
            return
        with self._wake:
            heapq.heappush(self._heap, (when, handle.query_id, nudge, weakref.ref(handle)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="query-deadlines",
                                                daemon=True)
                self._thread.start()
            if self._heap[0][1] == handle.query_id:
                # only a new earliest deadline changes how long the thread sleeps; waking it
                # for every query cost the Flight service's SELECT 1 a thread switch
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap:
                    self._wake.wait()
                when, _, nudge, ref = self._heap[0]
                left = when - time.monotonic()
                if left > 0:
                    # bounded: a wait of an hour or more is a wait of an hour, then again
                    self._wake.wait(min(left, _LONGEST_WAIT))
                    continue
                heapq.heappop(self._heap)
            handle = ref()
            if handle is None or handle.finished:
                continue
            try:
                if nudge >= 0:
                    handle._nudge(nudge)
                else:
                    handle._expire()
            except Exception as exc:  # this thread serves every query: it must not die
                warnings.warn(f"query {handle.query_id}: stopping it failed: {exc!r}",
                              RuntimeWarning, stacklevel=1)


_deadlines = _Deadlines()
#: every handle not yet collected, for :func:`cancel_all`
_live: weakref.WeakSet[QueryHandle] = weakref.WeakSet()


def cancel_all() -> int:
    """Cancel every query running in this process (Ctrl-C in the CLI); returns how many.

    Safe from any thread. The CLI calls it from a thread of its own on SIGINT,
    because an engine may swallow the KeyboardInterrupt (DuckDB 2.0's Python
    client often does while a query runs), which would leave the query running
    to its end.
    """
    return sum(handle.cancel() for handle in list(_live) if not handle.finished)


#: per thread: where :func:`started_in_block` collects the handles created
_started = threading.local()


@contextlib.contextmanager
def started_in_block() -> Iterator[list[QueryHandle]]:
    """The handles of the queries this thread starts inside the block (its own list).

    For a caller that cannot reach a query's result until it is done (a write
    a Flight handler runs to its end) and must still be able to cancel it from
    another thread. Blocks nest; an inner block's queries are its own only.
    """
    outer = getattr(_started, "handles", None)
    handles: list[QueryHandle] = []
    _started.handles = handles
    try:
        yield handles
    finally:
        _started.handles = outer


def _quietly(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # the query finished first; there is nothing left to stop
        pass


# -- the answer -------------------------------------------------------------------------
class Result:
    """A streaming query answer.

    Read it once, either as a stream (:meth:`reader`) or whole
    (:meth:`to_arrow`, which keeps the table so it can be asked again).
    ``rows`` and ``elapsed`` are final once the stream is exhausted.

    Attributes:
        engine: the name of the engine that answered (after any fallback).
        notes: facts the engine reported (``skipped_rows``, ``answered_by``, ...).
        shadow: the shadow record when the query was shadowed, else None.
        query_id: the id :meth:`gateway.Gateway.running` and the query hooks show,
            and :meth:`gateway.Gateway.cancel` takes.
    """

    def __init__(
        self,
        engine: str,
        inner: EngineResult,
        started: float,
        on_finish: Callable[[int, float], None] | None = None,
        on_error: Callable[[GatewayError, float], None] | None = None,
        handle: QueryHandle | None = None,
        owner: threading.RLock | None = None,
    ):
        self.engine = engine
        self.notes: dict[str, Any] = dict(inner.notes)
        self.shadow: ShadowRecord | None = None
        self._handle = handle
        self.query_id: int | None = handle.query_id if handle is not None else None
        self._inner = inner
        self._started = started
        self._finished_at: float | None = None
        self._rows = 0
        self._on_finish = on_finish
        self._on_error = on_error
        self._consumed = False
        self._closed = False
        self._released = False
        self._table: pa.Table | None = None
        #: held while a batch is read and while the answer is closed: the session's
        #: (gateway.session, one owner per connection), or the answer's own
        self._owner = owner if owner is not None else threading.RLock()
        # an answer dropped unread releases its stream, its connection (the one-shot
        # session closes when the handle finishes) and its place in gw.running()
        self._held = [inner]
        self._release = weakref.finalize(self, _release, self._held, handle)

    @property
    def handle(self) -> QueryHandle | None:
        """The query's handle (None for an answer made outside the statement pipeline)."""
        return self._handle

    @property
    def schema(self) -> pa.Schema:
        return self._inner.schema

    @property
    def rows(self) -> int:
        """Rows delivered so far; the total once the stream is exhausted."""
        return self._rows

    @property
    def elapsed(self) -> float:
        """Seconds from execution start to the last batch (or to now, while streaming)."""
        end = self._finished_at if self._finished_at is not None else time.perf_counter()
        return end - self._started

    @property
    def finished(self) -> bool:
        return self._finished_at is not None

    def _batches(self) -> Iterator[pa.RecordBatch]:
        reader = self._inner.reader
        handle = self._handle
        batch = err = None
        try:
            while True:
                if handle is not None:
                    handle.check()
                with self._owner:
                    if self._closed:
                        raise self._closed_error()
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                self._rows += batch.num_rows
                if handle is not None:
                    handle.rows = self._rows
                yield batch
        except GatewayError as exc:
            err = handle.translate(exc) if handle is not None else exc
            self._fail(err)
            if err is exc:
                raise
            raise err from exc
        except Exception as exc:
            err = QueryError(str(exc), engine=self.engine)
            if handle is not None:
                err = handle.translate(err)
            self._fail(err)
            raise err from exc
        finally:
            # the error's traceback keeps this frame: its locals must not keep the engine's
            # stream, a batch or the error itself (a cycle the collector frees only late)
            reader = batch = err = None
        self._finish()

    def _finish(self) -> None:
        if self._finished_at is None:
            self._finished_at = time.perf_counter()
            if self._handle is not None:
                self._handle.finish()
            if self._on_finish is not None:
                self._on_finish(self._rows, self.elapsed)

    def _fail(self, exc: GatewayError) -> None:
        if self._finished_at is None:
            self._finished_at = time.perf_counter()
            if self._handle is not None:
                self._handle.finish()
            if self._on_error is not None:
                self._on_error(exc, self.elapsed)

    def cancel(self) -> bool:
        """Stop this query (from any thread); reading it then raises :class:`Cancelled`.

        Returns:
            False when the query had already finished.
        """
        if self._handle is None or self.finished:
            return False
        return self._handle.cancel()

    @property
    def update_count(self) -> int | None:
        """Rows a DML statement changed, where the engine reports them, else None.

        Engines report it in their notes (``update_count``), or answer DML with
        one integer column named ``Count`` (DuckDB): that answer is read to sum it.
        """
        import pyarrow as pa

        if "update_count" in self.notes:
            return int(self.notes["update_count"])
        schema = self.schema
        if len(schema) != 1 or schema[0].name.lower() != "count" \
                or not pa.types.is_integer(schema[0].type):
            return None
        column = self.to_arrow().column(0)
        return int(sum(v for v in column.to_pylist() if v is not None))

    def reader(self) -> pa.RecordBatchReader:
        """The rows as a stream of record batches (once)."""
        import pyarrow as pa

        if self._table is not None:
            return pa.RecordBatchReader.from_batches(self._table.schema, self._table.to_batches())
        self._claim()
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def to_arrow(self) -> pa.Table:
        """The whole answer as one Arrow table."""
        import pyarrow as pa

        if self._table is None:
            self._claim()
            self._table = pa.Table.from_batches(list(self._batches()), schema=self.schema)
        return self._table

    def _closed_error(self) -> GatewayError:
        return GatewayError("this answer was closed before it was read to its end (its "
                            "session ran another statement, or it was closed)",
                            engine=self.engine,
                            hint="read an answer before the session's next statement, or "
                                 "use a session per answer")

    def _claim(self) -> None:
        if self._closed:
            raise self._closed_error()
        if self._consumed:
            raise RuntimeError("this result's stream was already read; call to_arrow() "
                               "instead of reader() to read an answer more than once")
        self._consumed = True

    def close(self) -> None:
        """Stop reading and release the engine's stream; what is left unread cannot be read.

        Safe from any thread: a batch being read in another thread is interrupted (the
        query is cancelled) and the close waits for that read to leave the engine.
        """
        owner = self._owner
        if not owner.acquire(blocking=False):
            self.cancel()
            owner.acquire()
        try:
            self._close()
        finally:
            owner.release()

    def _close(self) -> None:
        if self._finished_at is None:
            self._closed = True
        inner = self._inner
        close = getattr(inner.reader, "close", None)
        if close is not None:
            close()
        if not self._released:
            # let go of the engine's stream: an answer kept after its close (a log, a
            # list of finished queries) must not keep the engine's unread batches
            self._released = True
            self._held.clear()
            self._inner = inner.released()
        if self._finished_at is None:
            if self._consumed:
                self._finish()
            else:  # never read: the query ends here, without a finished event
                self._finished_at = time.perf_counter()
                if self._handle is not None:
                    self._handle.finish()

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{self._rows} rows in {self.elapsed:.3f}s" if self.finished else "streaming"
        return f"<Result engine={self.engine!r} {state}>"


def _release(held: list[EngineResult], handle: QueryHandle | None) -> None:
    """What a dropped :class:`Result` leaves behind, released (from the garbage collector).

    The stream is closed and let go of before the handle finishes (which closes a
    one-shot session): a driver's reader still alive holds its connection open.
    """
    if not held:  # closed already
        if handle is not None:
            handle.finish()
        return
    inner = held.pop()
    close = getattr(inner.reader, "close", None)
    try:
        if close is not None:
            close()
    except Exception:  # the engine's stream may already be gone with its connection
        pass
    del inner, close
    if handle is not None:
        handle.finish()
