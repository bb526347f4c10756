"""One DuckDB build loaded as an ADBC driver, in this process.

Every duckdb wheel's ``_duckdb*.so`` exports ``duckdb_adbc_init``, so any
number of versions load side by side through adbc-driver-manager. The
database is opened once; queries and sessions run on the shared
:class:`gateway.drivers.adbc.ConnectionPool`, so two open result streams
never share one connection.

DuckDB 2.0.1's ADBC driver switches ``enable_progress_bar`` on for its
connections (1.4.4 to 2.0.0 and the Python module leave it off) and then
tracks the query's progress on every 2048-row fetch: a sorted 1M-row answer
took 1.43x the module's time with it on, 1.07x with it off. Each connection
switches it off again before the engine's setup, where a ``settings`` entry
can still switch it on.

adbc-driver-manager answers Ctrl-C during a call by cancelling the statement
from its own native SIGINT handler, so Python never sees the signal; a
cancellation nobody asked for (through :meth:`AdbcSession.cancel` or a query
handle) is therefore turned back into the KeyboardInterrupt it was (the pool
does that for queries, :meth:`AdbcSession._setup_connection` while connecting).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from gateway.drivers.adbc import ConnectionPool, PooledSession, error_message, was_cancelled
from gateway.errors import EngineConnectionError, GatewayError
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
            settings, source views, the engine's ``setup_sql``): what they
            create belongs to the database, which every connection shares.
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
        #: the DuckDB library this session runs in (its allocator: gateway_duckdb.jemalloc)
        self.library = library
        per_connection = list(per_connection)
        db_kwargs: dict[str, str] = {}
        if database != ":memory:":
            db_kwargs["path"] = database
        if read_only:
            db_kwargs["access_mode"] = "READ_ONLY"
        try:
            first = dbapi.connect(driver=str(library), entrypoint=ENTRYPOINT,
                                  db_kwargs=db_kwargs, autocommit=True)
        except adbc_driver_manager.Error as exc:
            raise EngineConnectionError(f"cannot open {database!r} with {library}: {exc}",
                                        engine=engine) from None
        try:
            self._setup_connection(first, setup)
        except BaseException:
            first.close()
            raise
        self._pool = ConnectionPool(
            first, on_clone=lambda con: self._setup_connection(con, per_connection),
            translate=self._translate, engine=engine)

    def _setup_connection(self, con: Any, setup: Sequence[str]) -> None:
        import adbc_driver_manager

        cur = con.cursor()
        try:
            for stmt in DRIVER_DEFAULTS:
                try:
                    cur.execute(stmt)
                except adbc_driver_manager.Error as exc:
                    raise EngineConnectionError(f"cannot configure the connection ({stmt}): "
                                                f"{error_message(exc)}",
                                                engine=self.engine) from None
            for i, stmt in enumerate(setup):
                try:
                    cur.execute(stmt)
                except adbc_driver_manager.Error as exc:
                    if was_cancelled(exc):  # Ctrl-C while connecting (see the module's notes)
                        raise KeyboardInterrupt from None
                    raise SetupFailed(i, error_message(exc)) from None
        finally:
            cur.close()

    def _translate(self, exc: BaseException) -> GatewayError:
        return translate(_as_duck(exc), self.engine)

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        """Run one statement; the reader streams its answer (errors already translated)."""
        return self._pool.execute(sql, parameters)

    def open(self, engine: Any, one_shot: bool = False) -> PooledSession:
        """A session: a connection of its own, taken from the pool until the session closes.

        A one-shot query's connection goes back to the pool; a session's, and one
        that ran another statement, is closed, since its temp tables, variables
        and settings would otherwise reach whichever session takes it next.
        """
        notes = engine.result_notes if engine is not None else dict
        return PooledSession(engine, self._pool, notes, reuse=one_shot)

    def reset_idle(self) -> None:
        """See :meth:`gateway.drivers.adbc.ConnectionPool.reset_idle`."""
        self._pool.reset_idle()

    def cancel(self) -> None:
        self._pool.cancel()

    def close(self) -> None:
        self._pool.close()


class _DriverError(Exception):
    """A driver error re-labelled with the message DuckDB gave, for :func:`translate`."""


def _as_duck(exc: BaseException) -> BaseException:
    if isinstance(exc, GatewayError):
        return exc
    message = error_message(exc)
    if was_cancelled(exc):
        return type("InterruptException", (_DriverError,), {})(message)
    return _DriverError(message)
