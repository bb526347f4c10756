"""ADBC connections shared by engines: a pool of connections to one database, and its errors.

An ADBC connection runs one statement at a time, and a result stream keeps its
connection busy until it is read to the end. :class:`ConnectionPool` lends
each query an idle connection (or opens a new one on the same database),
takes it back when the stream ends, and can cancel every running statement. A session (:class:`PooledSession`) keeps one connection until it
closes. The duckdb engine (a DuckDB build loaded as an ADBC driver) and the
adbc engine (any ADBC driver) both run their queries through them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from gateway.engine import EngineResult, EngineSession
from gateway.errors import EngineConnectionError, GatewayError
from gateway.sql.kinds import is_read

if TYPE_CHECKING:
    from gateway.result import QueryHandle

#: The status names adbc-driver-manager puts before the driver's own message.
_STATUS_PREFIXES = ("INVALID_ARGUMENT: ", "INTERNAL: ", "IO: ", "UNKNOWN: ", "INVALID_STATE: ",
                    "CANCELLED: ", "NOT_FOUND: ", "INVALID_DATA: ", "UNAUTHENTICATED: ",
                    "UNAUTHORIZED: ", "TIMEOUT: ", "NOT_IMPLEMENTED: ", "ALREADY_EXISTS: ")


def error_message(exc: BaseException) -> str:
    """The driver's own message of an ADBC error, without the status name and detail blocks.

    A Flight server written with pyarrow (``arrowgate serve`` among them) appends the
    Python traceback of its handler to the message (". Detail: Python exception: ..."):
    that is the server's business, not the user's, and is cut off too.
    """
    text = str(exc)
    for prefix in _STATUS_PREFIXES:
        text = text.removeprefix(prefix)
    text = text.split("\n\nDetail:")[0]
    return text.split(". Detail: Python exception:")[0].strip()


def was_cancelled(exc: BaseException) -> bool:
    """The ADBC error reports a cancelled statement."""
    return str(exc).startswith("CANCELLED") or "INTERRUPT" in error_message(exc).upper()


class ConnectionPool:
    """Connections to one ADBC database, lent one per running statement.

    Args:
        first: an open ``adbc_driver_manager.dbapi`` connection, set up; more are
            opened on its database, in autocommit mode as it is.
        on_clone: run on each new connection before its first statement (what
            belongs to a connection, not the database: settings, a search path).
        translate: turns a driver exception into the gateway error the caller sees.
        engine: the engine's name, for errors.
        dialect: the engine's SQL dialect (which statements are queries).
        read_only_sql: the statement that makes a connection read-only
            (:mod:`gateway.drivers.read_only`), or None when the database has none.
            Connections it ran on are lent only to read-only sessions: they are
            idle apart from the others.
    """

    def __init__(self, first: Any, *, on_clone: Callable[[Any], None],
                 translate: Callable[[BaseException], GatewayError], engine: str,
                 dialect: str = "duckdb", read_only_sql: str | None = None):
        self.engine = engine
        self.dialect = dialect
        self.translate = translate
        self._on_clone = on_clone
        self._read_only_sql = read_only_sql
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        self._cancelled: set[Any] = set()  # cursors cancel() was asked to stop
        # dbapi counts the references to a database and closes it with the last one: the
        # pool holds one of its own, so any connection, the first too, can be closed
        # (an in-memory database lives as long as the pool). dbapi has no public way to
        # open a connection on a database it holds, so its ``_db`` is reached here.
        self._database: Any = first._db.clone()
        self._conn_kwargs: dict[str, str] = dict(first._conn_kwargs or {})
        self._open = True
        self._idle: list[Any] = [first]
        self._idle_read_only: list[Any] = []
        self._read_only: weakref.WeakSet[Any] = weakref.WeakSet()

    def take(self, read_only: bool = False) -> Any:
        """An idle connection (a new one when none is idle); with ``read_only``, one the
        database keeps from writing, where it can (``read_only_sql``)."""
        apart = read_only and self._read_only_sql is not None
        with self._lock:
            if not self._open:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            idle = self._idle_read_only if apart else self._idle
            if idle:
                return idle.pop()
        con = self._connect()
        try:
            self._on_clone(con)
            if apart:
                self._make_read_only(con)
        except BaseException:
            con.close()
            raise
        return con

    def keep_read_only(self, con: Any) -> None:
        """Make ``con`` read-only again if it is one of the read-only connections: before
        each statement, since a function on the server may have turned the mode off
        (PostgreSQL's ``set_config('default_transaction_read_only', 'off', false)``)
        for the transactions after its own."""
        if con in self._read_only:
            self._make_read_only(con)

    def _make_read_only(self, con: Any) -> None:
        cur = con.cursor()
        try:
            cur.execute(self._read_only_sql)
        except Exception as exc:
            raise self.translate(exc) from None
        finally:
            cur.close()
        self._read_only.add(con)

    def _connect(self) -> Any:
        """A new connection on the database, in autocommit mode.

        Not dbapi's ``adbc_clone``: it turns autocommit off on the clone (DB-API's
        default), so every statement on it would run in a transaction nobody
        commits: a pooled connection's writes were lost when it closed, and a
        Flight SQL server whose engine has no transactions refused the clone.
        """
        import adbc_driver_manager
        from adbc_driver_manager.dbapi import Connection

        handle = adbc_driver_manager.AdbcConnection(self._database._db, **self._conn_kwargs)
        return Connection(self._database, handle, self._conn_kwargs, autocommit=True)

    def give_back(self, con: Any) -> None:
        """``con`` is idle again, for a session of its kind (read-only or not)."""
        with self._lock:
            if self._open:
                (self._idle_read_only if con in self._read_only else self._idle).append(con)
                return
        _quietly(con.close)

    def execute(self, sql: str, parameters: Sequence[Any] | None = None
                ) -> pa.RecordBatchReader:
        """Run one statement on a lent connection; the reader streams its answer.

        Errors, from running or from reading, are already translated. A
        connection whose statement was cancelled is closed, not lent again: a
        server may still be busy with the statement on it (a Flight SQL server
        stops it when the connection closes). So is one that ran a statement
        other than a query (see :meth:`PooledSession.close`).
        """
        stateful = not is_read(sql, self.dialect)
        con = self.take()
        cur = self.cursor(con)

        def done() -> None:
            cancelled = self.asked(cur)
            self.release(cur)
            if cancelled or stateful:
                self.discard(con)
            else:
                self.give_back(con)

        return run_on_cursor(cur, sql, parameters, self.translate, done,
                             asked=lambda: self.asked(cur))

    def discard(self, con: Any) -> None:
        """Close ``con`` instead of lending it again (its state must not reach another
        user, or its statement was cancelled)."""
        _quietly(con.close)

    def reset_idle(self) -> None:
        """Close every idle connection, so the next statements take new ones set up as
        new: after a change to the database the idle connections would not follow (a
        DETACH of their current database)."""
        with self._lock:
            idle = self._idle + self._idle_read_only
            self._idle, self._idle_read_only = [], []
        for con in idle:
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
        """Close the idle connections and let go of the database; a lent connection is
        closed when it comes back."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            idle = self._idle + self._idle_read_only
            self._idle, self._idle_read_only = [], []
        for con in idle:
            _quietly(con.close)  # a connection whose stream is still open
        _quietly(self._database.close)


def run_on_cursor(cur: Any, sql: str, parameters: Sequence[Any] | None,
                  translate: Callable[[BaseException], GatewayError],
                  done: Callable[[], Any], asked: Callable[[], bool]) -> pa.RecordBatchReader:
    """Run ``sql`` on an ADBC cursor; the reader streams the answer and calls ``done()``
    at its end (or at once, when the statement fails). Errors come translated.

    adbc-driver-manager answers Ctrl-C during a call by cancelling the statement
    from its own SIGINT handler, so Python never sees the signal: a cancellation
    ``asked()`` says nobody asked for becomes the KeyboardInterrupt it was.
    """
    done = _Once(done)
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
    batches = _stream(reader, translate, done, asked)
    # An answer dropped before its first batch never runs the generator's ``finally``:
    # the cursor (and the driver's statement behind it) would stay with the pool for good.
    weakref.finalize(batches, done)
    return pa.RecordBatchReader.from_batches(reader.schema, batches)


class _Once:
    """``done`` called at most once: by the stream's end, or by its finalizer."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]):
        self.fn: Callable[[], Any] | None = fn

    def __call__(self) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn()


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
        reuse: give the connection back to the pool when the session closes,
            if only queries ran on it (a one-shot query: no connection to open
            next time); otherwise close it, so no temporary table, setting or
            open transaction of this session reaches a later one. A
            connection one of whose statements was cancelled is closed either
            way, as in :meth:`ConnectionPool.execute`.
        read_only: the session's user is read-only: its connection is one the
            database keeps from writing, where it can (:meth:`ConnectionPool.take`),
            and a write it refuses says so.
    """

    def __init__(self, engine: Any, pool: ConnectionPool,
                 notes: Callable[[], dict[str, Any]] = dict, *, reuse: bool = True,
                 read_only: bool = False):
        super().__init__(engine)
        self.pool = pool
        self.connection: Any = pool.take(read_only)
        self._translate = _refusing(pool.translate) if read_only else pool.translate
        self._notes = notes
        self._reuse = reuse
        self._was_cancelled = False
        self._only_queries = True  # so far: no statement could have opened a transaction
        self._dialect = getattr(engine, "dialect", None) or "duckdb"

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        if self.connection is None:
            raise EngineConnectionError("the session is closed", engine=self.pool.engine)
        if self._only_queries and not is_read(sql, self._dialect):
            self._only_queries = False
        self.pool.keep_read_only(self.connection)
        cur = self.pool.cursor(self.connection)
        handle.on_cancel(cur.adbc_cancel)

        def asked() -> bool:
            return handle.cancelled or self.pool.asked(cur)

        def done() -> None:
            self._was_cancelled = self._was_cancelled or asked()
            self.pool.release(cur)

        return EngineResult(run_on_cursor(cur, sql, parameters, self._translate, done,
                                          asked=asked), self._notes())

    def close(self) -> None:
        con, self.connection = self.connection, None
        if con is None:
            return
        if self._reuse and self._only_queries and not self._was_cancelled:
            self.pool.give_back(con)
            return
        # a statement other than a query may have left a temporary table, a setting or
        # an open transaction on the connection: none may reach the next user, and
        # no statement undoes them all (a ROLLBACK ends the transaction only)
        self.pool.discard(con)


def _refusing(translate: Callable[[BaseException], GatewayError]
              ) -> Callable[[BaseException], GatewayError]:
    from gateway.drivers.read_only import as_refusal

    return lambda exc: as_refusal(translate(exc))


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        pass
