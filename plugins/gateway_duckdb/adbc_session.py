"""One DuckDB build loaded as an ADBC driver, in this process.

Every duckdb wheel's ``_duckdb*.so`` exports ``duckdb_adbc_init``, so any
number of versions load side by side through adbc-driver-manager. The
database is opened once; each query takes an idle connection from a small
pool (or clones a new one), so two open result streams never share one.

DuckDB 2.0.1's ADBC driver switches ``enable_progress_bar`` on for its
connections (1.4.4 to 2.0.0 and the Python module leave it off) and then
tracks the query's progress on every 2048-row fetch: a sorted 1M-row answer
took 1.43x the module's time with it on, 1.07x with it off. Each connection
switches it off again before the engine's setup, where a ``settings`` entry
can still switch it on.

adbc-driver-manager answers Ctrl-C during a call by cancelling the statement
from its own native SIGINT handler, so Python never sees the signal; a
cancellation nobody asked for (through :meth:`AdbcSession.cancel` or a query
handle) is therefore turned back into the KeyboardInterrupt it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from gateway.engine import EngineResult, EngineSession
from gateway.errors import EngineConnectionError
from gateway_duckdb.install import ENTRYPOINT
from gateway_duckdb.translate import translate

#: Run on every connection before the engine's setup: undo the driver's own defaults.
DRIVER_DEFAULTS = ("SET enable_progress_bar = false",)


class SetupFailed(Exception):
    """Setup statement number ``index`` failed with ``message``."""

    def __init__(self, index: int, message: str):
        self.index = index
        self.message = message
        super().__init__(f"setup statement {index}: {message}")


class AdbcSession:
    """A DuckDB database opened through its ADBC entry point.

    Args:
        library: the ``_duckdb*.so`` (or any library exporting ``duckdb_adbc_init``).
        database: a DuckDB database file, or ``:memory:``.
        setup: statements run once, on the first connection (extension loads,
            secrets, settings, source views, the engine's ``setup_sql``): what
            they create belongs to the database, which every connection
            shares. A secret's text in particular must not run again once a
            SQL user may have switched on DuckDB's query log.
        engine: the engine's name, for errors.
        per_connection: statements run on every further connection (settings
            and the search path, which belong to a connection). Re-running the
            source views there made concurrent queries fail with a catalog
            write-write conflict.

    Raises:
        EngineConnectionError: the library cannot be loaded or the database opened.
        SetupFailed: a setup statement failed.
    """

    def __init__(self, library: Path, database: str, setup: Sequence[str], engine: str,
                 read_only: bool = False, per_connection: Sequence[str] = ()):
        import adbc_driver_manager
        import adbc_driver_manager.dbapi as dbapi

        self.engine = engine
        self._setup = list(setup)
        self._per_connection = list(per_connection)
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._running: set[Any] = set()
        self._cancelled: set[Any] = set()  # cursors cancel() was asked to stop
        db_kwargs: dict[str, str] = {}
        if database != ":memory:":
            db_kwargs["path"] = database
        if read_only:
            db_kwargs["access_mode"] = "READ_ONLY"
        try:
            self._first = dbapi.connect(driver=str(library), entrypoint=ENTRYPOINT,
                                        db_kwargs=db_kwargs, autocommit=True)
        except adbc_driver_manager.Error as exc:
            raise EngineConnectionError(f"cannot open {database!r} with {library}: {exc}",
                                        engine=engine) from None
        self._setup_connection(self._first, self._setup)
        self._idle.append(self._first)

    def _setup_connection(self, con: Any, setup: Sequence[str]) -> None:
        import adbc_driver_manager

        cur = con.cursor()
        try:
            for stmt in DRIVER_DEFAULTS:
                try:
                    cur.execute(stmt)
                except adbc_driver_manager.Error as exc:
                    raise EngineConnectionError(f"cannot configure the connection ({stmt}): "
                                                f"{_message(exc)}", engine=self.engine) from None
            for i, stmt in enumerate(setup):
                try:
                    cur.execute(stmt)
                except adbc_driver_manager.Error as exc:
                    if _interrupted(exc):  # Ctrl-C while connecting (see the module's notes)
                        raise KeyboardInterrupt from None
                    raise SetupFailed(i, _message(exc)) from None
        finally:
            cur.close()

    def _take(self) -> Any:
        with self._lock:
            if self._first is None:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            if self._idle:
                return self._idle.pop()
            first = self._first
        con = first.adbc_clone()
        try:
            self._setup_connection(con, self._per_connection)
        except BaseException:
            con.close()
            raise
        return con

    def _give_back(self, con: Any) -> None:
        with self._lock:
            if self._first is not None:
                self._idle.append(con)
                return
        con.close()

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        """Run one statement; the reader streams its answer (errors already translated)."""
        con = self._take()
        cur = con.cursor()
        self._running.add(cur)
        return run_on_cursor(cur, sql, parameters, self.engine, lambda: self._release(con, cur),
                             asked=lambda: cur in self._cancelled)

    def _release(self, con: Any, cur: Any) -> None:
        self._running.discard(cur)
        self._cancelled.discard(cur)
        try:
            cur.close()
        except Exception:  # closing after the database went away
            pass
        self._give_back(con)

    def open(self, engine: Any) -> AdbcConnectionSession:
        """A session: a connection of its own, taken from the pool until the session closes."""
        return AdbcConnectionSession(engine, self, self._take())

    def cancel(self) -> None:
        for cur in list(self._running):
            self._cancelled.add(cur)
            try:
                cur.adbc_cancel()
            except Exception:  # already finished
                pass

    def close(self) -> None:
        with self._lock:
            first, self._first = self._first, None
            idle, self._idle = self._idle, []
        for con in idle:
            try:
                con.close()
            except Exception:  # a connection whose stream is still open
                pass
        if first is not None and first not in idle:
            try:
                first.close()
            except Exception:
                pass


class AdbcConnectionSession(EngineSession):
    """A session on one pooled ADBC connection: its settings, temp tables and transactions
    last until it closes; cancelling stops this connection's statement only."""

    def __init__(self, engine: Any, pool: AdbcSession, con: Any):
        super().__init__(engine)
        self._pool = pool
        self._con: Any = con

    def execute(self, sql: str, parameters: Sequence[Any] | None, handle: Any) -> EngineResult:

        if self._con is None:
            raise EngineConnectionError("the session is closed", engine=self._pool.engine)
        cur = self._con.cursor()
        handle.on_cancel(cur.adbc_cancel)
        self._pool._running.add(cur)  # so the engine's cancel() reaches it too
        notes = self.engine.result_notes() if self.engine is not None else {}
        return EngineResult(run_on_cursor(cur, sql, parameters, self._pool.engine,
                                          lambda: self._done(cur),
                                          asked=lambda: handle.cancelled
                                          or cur in self._pool._cancelled), notes)

    def _done(self, cur: Any) -> None:
        self._pool._running.discard(cur)
        self._pool._cancelled.discard(cur)
        try:
            cur.close()
        except Exception:  # closing after the database went away
            pass

    def close(self) -> None:
        con, self._con = self._con, None
        if con is None:
            return
        try:  # a transaction left open must not leak into the next session
            cur = con.cursor()
            cur.execute("ROLLBACK")
            cur.close()
        except Exception:  # no transaction was open
            pass
        self._pool._give_back(con)


def run_on_cursor(cur: Any, sql: str, parameters: Sequence[Any] | None, engine: str,
                  done: Callable[[], None], asked: Callable[[], bool]) -> pa.RecordBatchReader:
    """Run ``sql`` on an ADBC cursor; the reader streams the answer and calls ``done()``
    at its end (or at once, when the statement fails). ``asked()`` tells whether a
    cancel was asked for, so that an unasked one is the Ctrl-C it was."""
    import adbc_driver_manager

    try:
        if parameters is not None:
            cur.execute(sql, parameters=list(parameters))
        else:
            cur.execute(sql)
        reader = cur.fetch_record_batch()
    except adbc_driver_manager.Error as exc:
        error = _error(exc, asked(), engine)
        done()
        raise error from None
    return pa.RecordBatchReader.from_batches(reader.schema,
                                             _stream(reader, engine, done, asked))


def _stream(reader: pa.RecordBatchReader, engine: str, done: Callable[[], None],
            asked: Callable[[], bool]) -> Iterator[pa.RecordBatch]:
    try:
        yield from reader
    except Exception as exc:
        raise _error(exc, asked(), engine) from None
    finally:
        done()


def _error(exc: BaseException, asked: bool, engine: str) -> BaseException:
    """The gateway error for a driver error; KeyboardInterrupt for an unasked cancel."""
    if not asked and _interrupted(exc):
        return KeyboardInterrupt()
    return translate(_as_duck(exc), engine)


def _interrupted(exc: BaseException) -> bool:
    """Whether the driver stopped the statement: cancelled, or DuckDB's interrupt."""
    return "CANCELLED" in str(exc)[:20] or "INTERRUPT" in _message(exc).upper()


def _message(exc: BaseException) -> str:
    # adbc-driver-manager prefixes the driver's message with the ADBC status name
    text = str(exc)
    for prefix in ("INVALID_ARGUMENT: ", "INTERNAL: ", "IO: ", "UNKNOWN: ", "INVALID_STATE: ",
                   "CANCELLED: ", "NOT_FOUND: ", "INVALID_DATA: "):
        text = text.removeprefix(prefix)
    return text.split("\n\nDetail:")[0].strip()


class _DriverError(Exception):
    """A driver error re-labelled with the message DuckDB gave, for :func:`translate`."""


def _as_duck(exc: BaseException) -> BaseException:
    message = _message(exc)
    if _interrupted(exc):
        return type("InterruptException", (_DriverError,), {})(message)
    return _DriverError(message)
