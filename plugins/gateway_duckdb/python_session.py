"""The DuckDB installed beside arrowgate, through its Python API, in this process."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from gateway.engine import EnginePrepared, EngineResult, EngineSession
from gateway.errors import EngineConnectionError
from gateway.sql.kinds import is_read
from gateway_duckdb.adbc_session import SetupFailed
from gateway_duckdb.mount import SOURCES_CATALOG, literal
from gateway_duckdb.translate import translate

BATCH_ROWS = 122_880  # DuckDB's row-group size: batches line up with its vectors
#: A single statement starting so changes nothing its cursor keeps (settings, USE, temporary
#: objects, a transaction), so the cursor can serve the next one-shot statement.
_KEEPS_NOTHING = re.compile(r"(?i)\s*(SELECT|FROM|VALUES|TABLE|WITH)\b")
#: Idle cursors kept for one-shot statements: a new one costs its settings and search path
#: (0.1-0.4 ms of a 1 ms SELECT 1 over Flight, docs/benchmarks.md).
_IDLE_CURSORS = 8
#: seconds close() waits for interrupted statements to stop
_CLOSE_WAIT = 5.0


class PythonSession:
    """One ``duckdb.connect()``; each query runs on a cursor of its own.

    Args:
        database, read_only: what to open.
        setup: statements run once on the connection (extension loads,
            settings, source views, ``setup_sql``).
        per_cursor: statements run on every cursor (settings are per session).
        engine: the engine's name, for errors.

    Raises:
        EngineConnectionError: the database cannot be opened.
        SetupFailed: a setup statement failed.
    """

    def __init__(self, database: str, setup: Sequence[str], per_cursor: Sequence[str],
                 engine: str, read_only: bool = False):
        import duckdb

        self.engine = engine
        #: the DuckDB library this session runs in (its allocator: gateway_duckdb.jemalloc)
        self.library: str | None = getattr(getattr(duckdb, "_duckdb", None), "__file__", None)
        self._per_cursor = list(per_cursor)
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        self._idle: list[Any] = []
        try:
            self._con: Any = duckdb.connect(database, read_only=read_only)
        except duckdb.Error as exc:
            raise EngineConnectionError(f"cannot open database {database!r}: {exc}",
                                        engine=engine) from None
        for i, stmt in enumerate(setup):
            try:
                self._con.execute(stmt)
            except duckdb.Error as exc:
                self._con.close()
                raise SetupFailed(i, str(exc).splitlines()[0]) from None
        default = self._con.execute("SELECT current_database()").fetchall()[0][0]
        self._search_path = (f"SET search_path = "
                             f"{literal(f'{default}.main,{SOURCES_CATALOG}.main')}")

    def _cursor(self) -> Any:
        import duckdb

        with self._lock:
            if self._con is None:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            cur = self._con.cursor()
        try:
            for stmt in [*self._per_cursor, self._search_path]:
                cur.execute(stmt)
        except duckdb.Error as exc:
            cur.close()
            raise translate(exc, self.engine) from None
        return cur

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        cur = self._cursor()
        self._running.add(cur)
        return run_on_cursor(cur, sql, parameters, self.engine, lambda: self._release(cur))

    def open(self, engine: Any, one_shot: bool = False) -> CursorSession:
        """A session: a cursor of its own, kept until the session closes.

        A one-shot session takes an idle cursor when there is one, and gives it
        back if its statement left the cursor as it found it.
        """
        with self._lock:
            cur = self._idle.pop() if one_shot and self._idle else None
        if cur is None:
            cur = self._cursor()
        self._running.add(cur)  # so cancel() reaches the sessions' queries too
        return CursorSession(engine, cur, self.engine, on_close=self._put_back,
                             reusable=one_shot)

    def _put_back(self, cur: Any, reusable: bool) -> bool:
        """Take a session's cursor back; True when it is kept for the next one-shot session."""
        self._running.discard(cur)
        with self._lock:
            if reusable and self._con is not None and len(self._idle) < _IDLE_CURSORS:
                self._idle.append(cur)
                return True
        return False

    def _release(self, cur: Any) -> None:
        self._running.discard(cur)
        try:
            cur.close()
        except Exception:  # closing twice, or after the database went away
            pass

    def cancel(self) -> None:
        for cur in list(self._running):
            try:
                cur.interrupt()
            except Exception:  # an already finished cursor cannot be interrupted
                pass

    def reset_idle(self) -> None:
        """Close the idle cursors, whose current database may have been detached since (the
        ``ducklake`` engine's ``reattach``); later one-shot statements open fresh ones."""
        with self._lock:
            idle, self._idle = self._idle, []
        for cur in idle:
            cur.close()

    def close(self) -> None:
        """Close the database; a statement still running (a reference the shadow timeout
        gave up on) is interrupted and given up to :data:`_CLOSE_WAIT` seconds to stop,
        since DuckDB refuses to close a connection one of its cursors is using."""
        self.cancel()
        deadline = time.monotonic() + _CLOSE_WAIT
        while self._running and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._lock:
            con, self._con = self._con, None
            idle, self._idle = self._idle, []
        for cur in idle:
            cur.close()
        if con is not None:
            con.close()


def run_on_cursor(cur: Any, sql: str, parameters: Sequence[Any] | None, engine: str,
                  done: Any = None, opened: Any = None) -> pa.RecordBatchReader:
    """Run ``sql`` on ``cur``; the reader streams the answer and calls ``done()`` at its end.

    ``opened(reader)`` receives DuckDB's own reader: closing it is what frees the
    cursor for its next statement (closing the returned reader does not).
    """
    import duckdb

    try:
        rel = cur.sql(sql, params=list(parameters) if parameters is not None else None)
        if rel is None:
            if done is not None:
                done()
            return pa.RecordBatchReader.from_batches(pa.schema([]), [])
        reader = arrow_reader(rel)
    except duckdb.Error as exc:
        if done is not None:
            done()
        raise translate(exc, engine) from None
    if opened is not None:
        opened(reader)
    return pa.RecordBatchReader.from_batches(reader.schema, _stream(reader, engine, done))


def _stream(reader: pa.RecordBatchReader, engine: str, done: Any) -> Iterator[pa.RecordBatch]:
    try:
        yield from reader
    except Exception as exc:
        raise translate(exc, engine) from None
    finally:
        # DuckDB's stream, released now: an error's traceback keeps this frame
        reader.close()
        del reader
        if done is not None:
            done()


class CursorSession(EngineSession):
    """A session of the in-process DuckDB: one cursor, so SET, USE, temp tables and
    transactions last until it closes; cancelling interrupts this cursor only."""

    def __init__(self, engine: Any, cursor: Any, name: str, on_close: Any = None,
                 reusable: bool = False):
        super().__init__(engine)
        self._cur = cursor
        self._name = name
        #: ``on_close(cursor, reusable)``: True when it keeps the cursor, which is then not closed
        self._on_close = on_close
        #: whether the cursor is still as it was opened (only one-shot sessions give it back)
        self._reusable = reusable
        self._answer: pa.RecordBatchReader | None = None  # DuckDB's reader of the last answer
        self._closed = False

    def _drop_answer(self) -> None:
        """Free the cursor of an answer nobody read to its end (DuckDB refuses the next
        statement while one is open: "connection has an open result")."""
        answer, self._answer = self._answer, None
        if answer is not None:
            answer.close()

    def _keep(self, reader: pa.RecordBatchReader) -> None:
        self._answer = reader

    def execute(self, sql: str, parameters: Sequence[Any] | None, handle: Any) -> EngineResult:
        self._drop_answer()
        if self._reusable and (";" in sql or not _KEEPS_NOTHING.match(sql)):
            self._reusable = False
        handle.on_cancel(self._interrupt)
        notes = self.engine.result_notes() if self.engine is not None else {}
        return EngineResult(run_on_cursor(self._cur, sql, parameters, self._name,
                                          opened=self._keep), notes)

    def prepare(self, sql: str) -> Any:
        return _CursorPrepared(self, sql)

    def _interrupt(self) -> None:
        self._reusable = False
        self._cur.interrupt()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._drop_answer()
        if self._on_close is not None and self._on_close(self._cur, self._reusable):
            return
        try:
            self._cur.close()
        except Exception:  # closing twice, or after the database went away
            pass


class _CursorPrepared(EnginePrepared):
    """DuckDB's Python API re-prepares per call; the schema comes from a LIMIT 0 run."""

    session: CursorSession

    def execute_many(self, parameters: pa.Table, handle: Any) -> EngineResult | None:
        """An ``INSERT ... VALUES (row)`` over every row at once (gateway_duckdb.batch)."""
        import duckdb

        from gateway_duckdb.batch import RELATION, insert_select

        sql = insert_select(self.sql, len(self.parameter_schema))
        if sql is None:
            return None
        session = self.session
        session._drop_answer()
        handle.on_cancel(session._interrupt)
        rows = parameters.rename_columns([f"p{i + 1}" for i in range(parameters.num_columns)])
        cur = session._cur
        cur.register(RELATION, rows)
        try:
            table = cur.sql(sql).to_arrow_table()  # runs once: DuckDB 1.4 to 2.x alike
        except duckdb.Error as exc:
            raise translate(exc, session._name) from None
        finally:
            cur.unregister(RELATION)
        return EngineResult(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))

    def _probe_schema(self) -> pa.Schema:
        import duckdb

        if not is_read(self.sql, "duckdb"):
            return pa.schema([])
        n = len(self.parameter_schema)
        body = self.sql.strip().rstrip(";")
        self.session._drop_answer()  # DuckDB refuses a statement while an answer is open
        cur = self.session._cur
        try:
            rel = cur.sql(f"SELECT * FROM ({body}) AS arrowgate_prepared LIMIT 0",
                          params=[None] * n if n else None)
            return rel.to_arrow_table().schema
        except duckdb.Error as exc:
            raise translate(exc, self.session._name) from None


def arrow_reader(rel: Any) -> pa.RecordBatchReader:
    # to_arrow_reader exists from DuckDB 1.5 (and is the only one left in 2.x);
    # 1.4 names it fetch_record_batch.
    if hasattr(rel, "to_arrow_reader"):
        return rel.to_arrow_reader(BATCH_ROWS)
    return rel.fetch_record_batch(BATCH_ROWS)
