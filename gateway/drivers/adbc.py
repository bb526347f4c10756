"""ADBC connections shared by engines: a pool of connections to one database, and its errors.

An ADBC connection runs one statement at a time, and a result stream keeps its
connection busy until it is read to the end. :class:`ConnectionPool` lends
each query an idle connection (or clones a new one from the first, on the same
database), takes it back when the stream ends, and can cancel every running
statement. The duckdb engine (a DuckDB build loaded as an ADBC driver) and the
adbc engine (any ADBC driver) both run their queries through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from gateway.errors import EngineConnectionError, GatewayError

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
        first: an open ``adbc_driver_manager.dbapi`` connection; more are cloned from it.
        setup: run on every connection before its first statement (the first included).
        translate: turns a driver exception into the gateway error the caller sees.
        engine: the engine's name, for errors.
    """

    def __init__(self, first: Any, *, setup: Callable[[Any], None],
                 translate: Callable[[BaseException], GatewayError], engine: str):
        self.engine = engine
        self._setup = setup
        self._translate = translate
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        self._first: Any = first
        self._idle: list[Any] = []
        setup(first)
        self._idle.append(first)

    def take(self) -> Any:
        """An idle connection (a new clone when none is idle)."""
        with self._lock:
            if self._first is None:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            if self._idle:
                return self._idle.pop()
            first = self._first
        con = first.adbc_clone()
        self._setup(con)
        return con

    def give_back(self, con: Any) -> None:
        with self._lock:
            if self._first is not None:
                self._idle.append(con)
                return
        _quietly(con.close)

    def execute(self, sql: str, parameters: Sequence[Any] | None = None,
                on_cursor: Callable[[Any], None] | None = None) -> pa.RecordBatchReader:
        """Run one statement on a lent connection; the reader streams its answer.

        Args:
            on_cursor: called with the statement's cursor before it runs (to
                arrange a cancel from another thread).

        Errors, from running or from reading, are already translated.
        """
        con = self.take()
        cur = con.cursor()
        self._running.add(cur)
        if on_cursor is not None:
            on_cursor(cur)
        try:
            if parameters is not None:
                cur.execute(sql, parameters=list(parameters))
            else:
                cur.execute(sql)
            reader = cur.fetch_record_batch()
        except Exception as exc:
            self._release(con, cur)
            raise self._translate(exc) from None
        return pa.RecordBatchReader.from_batches(reader.schema, self._stream(reader, con, cur))

    def _stream(self, reader: pa.RecordBatchReader, con: Any, cur: Any) -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            self._release(con, cur)

    def _release(self, con: Any, cur: Any) -> None:
        self._running.discard(cur)
        _quietly(cur.close)  # closing after the database went away fails
        self.give_back(con)

    def cancel(self) -> None:
        """Cancel every running statement, from any thread. Never raises."""
        for cur in list(self._running):
            _quietly(cur.adbc_cancel)  # a statement that already finished

    def close(self) -> None:
        with self._lock:
            first, self._first = self._first, None
            idle, self._idle = self._idle, []
        for con in idle:
            _quietly(con.close)  # a connection whose stream is still open
        if first is not None and first not in idle:
            _quietly(first.close)


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        pass
