"""One side of a shadow comparison: an answer gathered as it streams, within a memory budget.

The two answers of a shadowed query (three with ``noise``) share one
:class:`Budget` of ``max_compare_bytes``. While they fit together, their
batches are kept (references to the engines' buffers, not copies) and the
comparator later sees both tables whole. When they pass it, every side is
downgraded: a thread per side reduces its batches to a row count and an
order-insensitive digest (the sum and the xor of DuckDB's row hashes over
normalized columns) and drops them, so the bytes held never exceed the budget
by more than one batch. The digest says whether two answers hold the same
multiset of rows; it cannot say which rows differ, check order, or allow a
float tolerance, and :func:`digest_verdict` says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.compare import CompareOptions, Verdict, compare_tables

if TYPE_CHECKING:
    import pyarrow as pa

_MASK = (1 << 64) - 1


class Budget:
    """The bytes every side of one comparison may keep, together."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self.peak = 0
        self.downgraded = False
        self.cv = threading.Condition()
        self.answers: list[Answer] = []

    def _hold(self, nbytes: int) -> None:
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def _release(self, nbytes: int) -> None:
        with self.cv:
            self.held -= nbytes
            self.cv.notify_all()


@dataclass(frozen=True)
class Digest:
    """What is left of an answer too big to keep: its shape, row count and row hashes."""

    schema: pa.Schema
    rows: int
    hash_sum: int
    hash_xor: int


class Answer:
    """One engine's answer (or error), fed batch by batch by the thread reading it.

    Args:
        budget: shared with the other sides of the comparison.
        keep_bytes: keep this answer whole for :meth:`kept` while it is at
            most this many bytes (the reference's, for side-by-side display);
            0 keeps nothing beyond the comparison.
    """

    def __init__(self, budget: Budget, keep_bytes: int = 0):
        self.budget = budget
        self.rows = 0
        self.nbytes = 0
        self.error: BaseException | None = None
        self.schema: pa.Schema | None = None
        self._batches: list[pa.RecordBatch] = []
        self._keep_bytes = keep_bytes
        self._kept: list[pa.RecordBatch] | None = [] if keep_bytes > 0 else None
        self._pending: list[pa.RecordBatch] = []
        self._finished = False
        self._hasher: _Hasher | None = None
        with budget.cv:
            budget.answers.append(self)
            if budget.downgraded:
                self._start_hashing()

    def add(self, batch: pa.RecordBatch) -> None:
        """Take one batch; blocks only while the hashing thread is a whole budget behind."""
        n = batch.nbytes
        self.rows += batch.num_rows
        self.nbytes += n
        if self._kept is not None:
            if self.nbytes <= self._keep_bytes:
                self._kept.append(batch)
            else:
                self._kept = None
        budget = self.budget
        with budget.cv:
            if not budget.downgraded and budget.held + n <= budget.limit:
                self._batches.append(batch)
                budget._hold(n)
                return
            if not budget.downgraded:
                budget.downgraded = True
                for answer in budget.answers:
                    answer._start_hashing()
            while budget.held > 0 and budget.held + n > budget.limit:
                budget.cv.wait()
            budget._hold(n)
            self._pending.append(batch)
            budget.cv.notify_all()

    def finish(self, schema: pa.Schema | None, error: BaseException | None = None) -> None:
        """The answer is complete (``error``: it failed, or was abandoned, with this error)."""
        with self.budget.cv:
            self.schema, self.error, self._finished = schema, error, True
            self.budget.cv.notify_all()

    def _start_hashing(self) -> None:
        """Hand the kept batches to a hashing thread (called under the budget's lock)."""
        if self._hasher is None:
            self._pending.extend(self._batches)
            self._batches = []
            self._hasher = _Hasher(self)
            self._hasher.start()

    @property
    def downgraded(self) -> bool:
        return self._hasher is not None

    def table(self) -> pa.Table:
        """The whole answer (not downgraded, finished without error)."""
        import pyarrow as pa

        assert self.schema is not None and not self.downgraded
        return pa.Table.from_batches(self._batches, schema=self.schema)

    def digest(self) -> Digest:
        """The row count and row hashes (of the kept batches when not downgraded)."""
        assert self.schema is not None
        if self._hasher is None:
            rows, hsum, hxor = _hash_rows(self._batches, None)
            return Digest(self.schema, rows, hsum, hxor)
        self._hasher.join()
        return Digest(self.schema, self.rows, self._hasher.hash_sum, self._hasher.hash_xor)

    def kept(self) -> pa.Table | None:
        """The whole answer when it fit in ``keep_bytes`` and did not fail, else None."""
        import pyarrow as pa

        if self._kept is None or self.error is not None or self.schema is None:
            return None
        return pa.Table.from_batches(self._kept, schema=self.schema)

    def release(self) -> None:
        """Drop the batches kept for the comparison (the verdict is in)."""
        with self.budget.cv:
            self.budget.held -= sum(b.nbytes for b in self._batches)
            self._batches = []
            self.budget.cv.notify_all()


class _Hasher(threading.Thread):
    """Digests an answer's pending batches as they come, releasing their bytes."""

    def __init__(self, answer: Answer):
        super().__init__(name="shadow-digest", daemon=True)
        self.answer = answer
        self.hash_sum = 0
        self.hash_xor = 0
        # one DuckDB query per chunk, not per batch; the chunk's normalized copy
        # is the only memory beyond the budget
        self.chunk_bytes = max(1 << 20, min(64 << 20, answer.budget.limit // 8))

    def run(self) -> None:
        answer, budget = self.answer, self.answer.budget
        con = None
        try:
            while True:
                with budget.cv:
                    while not answer._pending and not answer._finished:
                        budget.cv.wait()
                    if not answer._pending:
                        return
                    chunk: list[pa.RecordBatch] = []
                    size = 0
                    while answer._pending and (not chunk or size < self.chunk_bytes):
                        batch = answer._pending.pop(0)
                        chunk.append(batch)
                        size += batch.nbytes
                if con is None:
                    import duckdb

                    con = duckdb.connect(config={"threads": 1})
                _, hsum, hxor = _hash_rows(chunk, con)
                self.hash_sum = (self.hash_sum + hsum) & _MASK
                self.hash_xor ^= hxor
                del chunk
                budget._release(size)
        finally:
            if con is not None:
                con.close()


def _hash_rows(batches: list[pa.RecordBatch], con: Any) -> tuple[int, int, int]:
    """Row count, sum (mod 2**64) and xor of the hashes of the rows' normalized values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = sum(b.num_rows for b in batches)
    if not batches or batches[0].num_columns == 0 or rows == 0:
        return rows, 0, 0
    table = pa.Table.from_batches(batches)
    columns = [pc.cast(c, c.type.value_type) if pa.types.is_dictionary(c.type) else c
               for c in table.columns]
    table = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    if con is None:
        import duckdb

        con = duckdb.connect(config={"threads": 1})
    con.register("answer", table)
    try:
        args = ", ".join(_normalized(f"c{i}", c.type) for i, c in enumerate(columns))
        hsum, hxor = con.execute(
            f"SELECT coalesce(sum(h), 0)::HUGEINT, coalesce(bit_xor(h), 0) "
            f"FROM (SELECT hash({args}) AS h FROM answer)").fetchall()[0]
    finally:
        con.unregister("answer")
    return rows, int(hsum) & _MASK, int(hxor)


def _normalized(name: str, t: pa.DataType) -> str:
    """One value, one representation, in DuckDB SQL (vector at a time, no copy of the
    answer): what the comparator's equivalences treat as equal hashes alike. Numbers
    of any type as DOUBLE (``+ 0.0`` turns -0.0 into 0.0), timestamps of any unit and
    zone as UTC microseconds; DuckDB reads every Arrow string and binary type alike."""
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return f"({name}::DOUBLE + 0.0)"
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return f"epoch_us({name}::TIMESTAMPTZ)"
        return f"epoch_us({name}::TIMESTAMP)"
    return name


def digest_verdict(primary: Digest, reference: Digest, *, sql: str | None,
                   options: CompareOptions, budget: Budget) -> Verdict:
    """Compare two answers by shape, row count and row hashes (the downgraded comparison)."""
    why = (f"compared by row count and row hash only: the answers passed max_compare_bytes "
           f"({budget.limit} bytes), so order and float tolerance were not checked")
    evidence: dict[str, Any] = {
        "downgraded": True, "max_compare_bytes": budget.limit, "held_peak_bytes": budget.peak,
        "primary_rows": primary.rows, "reference_rows": reference.rows,
    }
    shape = compare_tables(primary.schema.empty_table(), reference.schema.empty_table(),
                           sql=sql, options=options)
    if shape.category != "match":
        return Verdict(shape.category, f"{shape.message} ({why})", {**shape.evidence, **evidence})
    if primary.rows != reference.rows:
        return Verdict("row_count", f"{primary.rows} rows vs {reference.rows} ({why})", evidence)
    if (primary.hash_sum, primary.hash_xor) != (reference.hash_sum, reference.hash_xor):
        return Verdict("values", f"same row count ({primary.rows}), different rows: the row "
                       f"hashes differ ({why})", evidence)
    return Verdict("match", f"{primary.rows} rows agree ({why})", evidence)
