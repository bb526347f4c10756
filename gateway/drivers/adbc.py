"""ADBC connections shared by engines: a pool of connections to one database, and its errors.

An ADBC connection runs one statement at a time, and a result stream keeps its
connection busy until it is read to the end. :class:`ConnectionPool` lends
each query an idle connection (or clones a new one from the first, on the same
database), takes it back when the stream ends, and can cancel every running
statement. A session (:class:`PooledSession`) keeps one connection until it
closes. The duckdb engine (a DuckDB build loaded as an ADBC driver) and the
adbc engine (any ADBC driver) both run their queries through them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from gateway.engine import EngineResult, EngineSession
from gateway.errors import EngineConnectionError, GatewayError

if TYPE_CHECKING:
    from gateway.handles import QueryHandle

#: The status names adbc-driver-manager puts before the driver's own message.
_STATUS_PREFIXES = ("INVALID_ARGUMENT: ", "INTERNAL: ", "IO: ", "UNKNOWN: ", "INVALID_STATE: ",
                    "CANCELLED: ", "NOT_FOUND: ", "INVALID_DATA: ", "UNAUTHENTICATED: ",
                    "UNAUTHORIZED: ", "TIMEOUT: ", "NOT_IMPLEMENTED: ", "ALREADY_EXISTS: ")


def error_message(exc: BaseException) -> str:
    """The driver's own message of an ADBC error, without the status name and detail blocks."""
    text = str(exc)
    for prefix in _STATUS_PREFIXES:
        text = text.removeprefix(prefix)
    return text.split("\n\nDetail:")[0].strip()


def was_cancelled(exc: BaseException) -> bool:
    """The ADBC error reports a cancelled statement."""
    return str(exc).startswith("CANCELLED") or "INTERRUPT" in error_message(exc).upper()


class ConnectionPool:
    """Connections to one ADBC database, lent one per running statement.

    Args:
        first: an open ``adbc_driver_manager.dbapi`` connection, set up; more are
            cloned from it (they share its database).
        on_clone: run on each cloned connection before its first statement (what
            belongs to a connection, not the database: settings, a search path).
        translate: turns a driver exception into the gateway error the caller sees.
        engine: the engine's name, for errors.
    """

    def __init__(self, first: Any, *, on_clone: Callable[[Any], None],
                 translate: Callable[[BaseException], GatewayError], engine: str):
        self.engine = engine
        self.translate = translate
        self._on_clone = on_clone
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        self._cancelled: set[Any] = set()  # cursors cancel() was asked to stop
        self._first: Any = first
        self._idle: list[Any] = [first]

    def take(self) -> Any:
        """An idle connection (a new clone when none is idle)."""
        with self._lock:
            if self._first is None:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            if self._idle:
                return self._idle.pop()
            first = self._first
        con = clone(first)
        try:
            self._on_clone(con)
        except BaseException:
            con.close()
            raise
        return con

    def give_back(self, con: Any) -> None:
        with self._lock:
            if self._first is not None:
                self._idle.append(con)
                return
        _quietly(con.close)

    def execute(self, sql: str, parameters: Sequence[Any] | None = None
                ) -> pa.RecordBatchReader:
        """Run one statement on a lent connection; the reader streams its answer.

        Errors, from running or from reading, are already translated.
        """
        con = self.take()
        cur = self.cursor(con)

        def done() -> None:
            self.release(cur)
            self.give_back(con)

        return run_on_cursor(cur, sql, parameters, self.translate, done,
                             asked=lambda: self.asked(cur))

    def discard(self, con: Any) -> None:
        """Take ``con`` out of use for good (its state must not reach another user). The
        first connection stays open, out of use, since the others are cloned from it."""
        with self._lock:
            if con is self._first:
                return
        _quietly(con.close)

    def reset_idle(self) -> None:
        """Close every idle connection (the first stays open, out of use), so the next
        statements take fresh clones set up as new: after a change to the database the
        idle connections would not follow (a DETACH of their current database)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for con in idle:
            if con is not self._first:
                _quietly(con.close)

    def cursor(self, con: Any) -> Any:
        """A cursor on ``con`` that :meth:`cancel` reaches until :meth:`release`."""
        cur = con.cursor()
        self._running.add(cur)
        return cur

    def release(self, cur: Any) -> None:
        self._running.discard(cur)
        self._cancelled.discard(cur)
        _quietly(cur.close)  # closing after the database went away fails

    def asked(self, cur: Any) -> bool:
        """Whether :meth:`cancel` was asked to stop ``cur``."""
        return cur in self._cancelled

    def cancel(self) -> None:
        """Cancel every running statement, from any thread. Never raises."""
        for cur in list(self._running):
            self._cancelled.add(cur)
            _quietly(cur.adbc_cancel)  # a statement that already finished

    def close(self) -> None:
        with self._lock:
            first, self._first = self._first, None
            idle, self._idle = self._idle, []
        for con in idle:
            _quietly(con.close)  # a connection whose stream is still open
        if first is not None and first not in idle:
            _quietly(first.close)


def clone(first: Any) -> Any:
    """A new connection on ``first``'s database, in autocommit mode as ``first`` is.

    dbapi's ``adbc_clone`` turns autocommit off on the clone (DB-API's default),
    so every statement on it would run in a transaction nobody commits: a
    pooled connection's writes were lost when it closed, and a Flight SQL
    server whose engine has no transactions refused the clone outright.
    dbapi offers no public way to clone in autocommit mode, so its shared
    database (``_db``) is reached here, as ``adbc_clone`` itself does.
    """
    import adbc_driver_manager
    from adbc_driver_manager.dbapi import Connection

    kwargs = first._conn_kwargs or {}
    handle = adbc_driver_manager.AdbcConnection(first._db._db, **kwargs)
    return Connection(first._db, handle, kwargs, autocommit=True)


def run_on_cursor(cur: Any, sql: str, parameters: Sequence[Any] | None,
                  translate: Callable[[BaseException], GatewayError],
                  done: Callable[[], Any], asked: Callable[[], bool]) -> pa.RecordBatchReader:
    """Run ``sql`` on an ADBC cursor; the reader streams the answer and calls ``done()``
    at its end (or at once, when the statement fails). Errors come translated.

    adbc-driver-manager answers Ctrl-C during a call by cancelling the statement
    from its own SIGINT handler, so Python never sees the signal: a cancellation
    ``asked()`` says nobody asked for becomes the KeyboardInterrupt it was.
    """
    try:
        if parameters is not None:
            cur.execute(sql, parameters=list(parameters))
        else:
            cur.execute(sql)
        reader = cur.fetch_record_batch()
    except Exception as exc:
        error = _error(exc, asked(), translate)
        done()
        raise error from None
    return pa.RecordBatchReader.from_batches(reader.schema,
                                             _stream(reader, translate, done, asked))


def _stream(reader: pa.RecordBatchReader, translate: Callable[[BaseException], GatewayError],
            done: Callable[[], Any], asked: Callable[[], bool]) -> Iterator[pa.RecordBatch]:
    try:
        yield from reader
    except Exception as exc:
        raise _error(exc, asked(), translate) from None
    finally:
        done()


def _error(exc: BaseException, asked: bool,
           translate: Callable[[BaseException], GatewayError]) -> BaseException:
    if not asked and was_cancelled(exc):
        return KeyboardInterrupt()
    return translate(exc)


class PooledSession(EngineSession):
    """A session on one connection lent by a :class:`ConnectionPool` until it closes.

    Its settings, temporary tables and transactions last until then; cancelling
    a query stops this connection's statement only (``adbc_cancel``).

    Args:
        engine: the engine (None inside a duckdb worker, which has none).
        pool: the pool the connection comes from.
        notes: the notes each answer carries.
        reuse: give the connection back to the pool when the session closes
            (after a ROLLBACK); otherwise close it, so no temporary table or
            setting of this session reaches a later one.
    """

    def __init__(self, engine: Any, pool: ConnectionPool,
                 notes: Callable[[], dict[str, Any]] = dict, *, reuse: bool = True):
        super().__init__(engine)
        self.pool = pool
        self.connection: Any = pool.take()
        self._notes = notes
        self._reuse = reuse

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        if self.connection is None:
            raise EngineConnectionError("the session is closed", engine=self.pool.engine)
        cur = self.pool.cursor(self.connection)
        handle.on_cancel(cur.adbc_cancel)
        return EngineResult(run_on_cursor(
            cur, sql, parameters, self.pool.translate, lambda: self.pool.release(cur),
            asked=lambda: handle.cancelled or self.pool.asked(cur)), self._notes())

    def close(self) -> None:
        con, self.connection = self.connection, None
        if con is None:
            return
        if not self._reuse:
            self.pool.discard(con)
            return
        try:  # a transaction left open must not leak into the next session
            cur = con.cursor()
            cur.execute("ROLLBACK")
            cur.close()
        except Exception:  # no transaction was open
            pass
        self.pool.give_back(con)


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        pass
