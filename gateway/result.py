"""The answer to one query, as the caller sees it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError, QueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.engine import EngineResult


class Result:
    """A streaming query answer.

    Read it once, either as a stream (:meth:`reader`) or whole
    (:meth:`to_arrow`, which keeps the table so it can be asked again).
    ``rows`` and ``elapsed`` are final once the stream is exhausted.

    Attributes:
        engine: the name of the engine that answered (after any fallback).
        notes: facts the engine reported (``skipped_rows``, ``answered_by``, ...).
        shadow: the shadow record when the query was shadowed, else None.
    """

    def __init__(
        self,
        engine: str,
        inner: EngineResult,
        started: float,
        on_finish: Callable[[int, float], None] | None = None,
        on_error: Callable[[GatewayError, float], None] | None = None,
    ):
        self.engine = engine
        self.notes: dict[str, Any] = dict(inner.notes)
        self.shadow: Any = None
        self._inner = inner
        self._started = started
        self._finished_at: float | None = None
        self._rows = 0
        self._on_finish = on_finish
        self._on_error = on_error
        self._consumed = False
        self._table: pa.Table | None = None

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
        try:
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                self._rows += batch.num_rows
                yield batch
        except GatewayError as exc:
            self._fail(exc)
            raise
        except Exception as exc:
            err = QueryError(str(exc), engine=self.engine)
            self._fail(err)
            raise err from exc
        self._finish()

    def _finish(self) -> None:
        if self._finished_at is None:
            self._finished_at = time.perf_counter()
            if self._on_finish is not None:
                self._on_finish(self._rows, self.elapsed)

    def _fail(self, exc: GatewayError) -> None:
        if self._finished_at is None:
            self._finished_at = time.perf_counter()
            if self._on_error is not None:
                self._on_error(exc, self.elapsed)

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

    def _claim(self) -> None:
        if self._consumed:
            raise RuntimeError("this result's stream was already read; call to_arrow() "
                               "instead of reader() to read an answer more than once")
        self._consumed = True

    def close(self) -> None:
        """Stop reading and release the engine's stream."""
        close = getattr(self._inner.reader, "close", None)
        if close is not None:
            close()
        if self._finished_at is None and self._consumed:
            self._finish()

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{self._rows} rows in {self.elapsed:.3f}s" if self.finished else "streaming"
        return f"<Result engine={self.engine!r} {state}>"
