"""Query handles: one per running query, so it can be listed, cancelled and timed out alone.

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
from typing import Final

from gateway.errors import Cancelled, GatewayError, QueryTimeout
from gateway.records import FrozenRecord

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
