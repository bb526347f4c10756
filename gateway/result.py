"""The answer to one query, as the caller sees it."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError, QueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.engine import EngineResult
    from gateway.handles import QueryHandle
    from gateway.shadow import ShadowRecord


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
            import pyarrow as pa

            from gateway.engine import EngineResult

            self._released = True
            self._held.clear()
            self._inner = EngineResult(pa.RecordBatchReader.from_batches(inner.schema, []),
                                       inner.notes)
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
