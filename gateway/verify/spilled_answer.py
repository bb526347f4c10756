"""One side of a streaming comparison: its batches kept in memory, then spilled to disk.

:class:`SpilledAnswer` keeps batches while its share of the cap allows and writes
them to Arrow IPC files (an eighth of the cap each) after that; they are read
back memory-mapped. A side made after the other one is finished proves its rows
as they arrive against the other's rows at the same positions (:class:`_InStep`)
and keeps only the runs that differ. Used by :mod:`gateway.verify.compare_stream`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.verify.compare_stream import StreamingComparison

#: the least bytes of a spill file, whatever the cap
_MIN_SEGMENT_BYTES = 4 << 20
#: rows compared in place at once: at most this many, and a sixteenth of the cap
_PROOF_ROWS = 1 << 20
#: an unequal slice is halved down to runs of this many rows...
_MIN_RUN = 64
#: ...while at most this many runs of it differ
_MAX_RUNS = 16


def _differing_runs(p: pa.Table, r: pa.Table) -> list[tuple[int, int]]:
    """The row ranges where two aligned slices of one length differ (none when equal)."""
    if p.equals(r):
        return []
    runs = [(0, p.num_rows)]
    while len(runs) <= _MAX_RUNS:
        halves = []
        for start, stop in runs:
            if stop - start <= _MIN_RUN:
                halves.append((start, stop))
                continue
            middle = (start + stop) // 2
            halves += [(a, b) for a, b in ((start, middle), (middle, stop))
                       if not p.slice(a, b - a).equals(r.slice(a, b - a))]
        if halves == runs:
            break
        runs = halves
    return runs

class SpilledAnswer:
    """One side of a :class:`StreamingComparison`: kept in memory, then spilled.

    A side made ``after`` the other one keeps only the rows its proof in step
    leaves (:attr:`proof`), and all of them as well when ``keep_all``. A ``shared``
    side's batches are held by its caller anyway: it keeps every one in memory, by
    reference, whatever their bytes, and never spills.
    """

    def __init__(self, comparison: StreamingComparison, name: str, keep: bool = True,
                 after: SpilledAnswer | None = None, keep_all: bool = True,
                 shared: bool = False):
        self.comparison = comparison
        self.path = os.path.join(comparison.folder, f"{name}.arrow")
        self.rows = 0
        self.spilled_bytes = 0
        self.schema: pa.Schema | None = None
        #: the schema the batches are stored in (dictionaries decoded)
        self.stored_schema: pa.Schema | None = None
        self._kept: list[pa.RecordBatch] = []
        self._kept_bytes = 0
        self._share = comparison.memory_bytes // 4 if keep else 0
        self._shared = shared
        self._writer: Any = None
        #: the files spilled to, each at most an eighth of the cap (4 MiB at least)
        self._segments: list[str] = []
        self._segment_bytes = 0
        self._segment_limit = max(_MIN_SEGMENT_BYTES, comparison.memory_bytes // 8)
        #: the answer's first and last rows (a LIMIT's edges)
        self.first_row: pa.RecordBatch | None = None
        self.last_row: pa.RecordBatch | None = None
        #: the proof in step against ``after``, while it holds
        self.proof = _InStep(comparison, after, self) if after is not None else None
        self._keep_all = keep_all or after is None

    def add(self, batch: pa.RecordBatch) -> None:
        """Take the next batch of the answer.

        Raises:
            GatewayError: (kind ``resource``) the spill folder's disk is full.
        """
        batch = _decoded(batch)
        if self.stored_schema is None:
            self.stored_schema = batch.schema
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        self._note_edges(batch)
        proof = self.proof
        if proof is not None:
            if not proof.add(batch):
                self._give_up()
            if not self._keep_all:
                return
        self._store(batch)

    def _give_up(self) -> None:
        """Stop the proof in step; store the batches it held unless every batch is stored."""
        assert self.proof is not None
        held = self.proof.given_up()
        self.proof = None
        if not self._keep_all:
            for batch in held:
                self._store(batch)

    def _note_edges(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        if self.first_row is None:
            self.first_row = pa.concat_batches([batch.slice(0, 1)])
        self.last_row = pa.concat_batches([batch.slice(batch.num_rows - 1, 1)])

    def add_table(self, table: pa.Table) -> None:
        """:meth:`add` each batch of ``table``."""
        for batch in table.to_batches():
            self.add(batch)

    def finish(self, schema: pa.Schema) -> None:
        """The answer is complete; ``schema`` is its schema as the engine gave it."""
        self.schema = schema
        if self.stored_schema is None:
            self.stored_schema = _decoded_schema(schema)
        if self.proof is not None and not self.proof.finish():
            self._give_up()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _store(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        if self._shared:  # the caller's own batch: holding it costs nothing more
            self._kept.append(batch)
            self._kept_bytes += batch.nbytes
            return
        if not self._segments and self._kept_bytes + batch.nbytes <= self._share:
            if batch.get_total_buffer_size() > 2 * batch.nbytes:
                # a few rows sliced from a large batch would keep all of its buffers
                batch = pa.concat_batches([batch])
            self._kept.append(batch)
            self._kept_bytes += batch.nbytes
            return
        try:
            if self._writer is None and not self._segments:
                kept, self._kept, self._kept_bytes = self._kept, [], 0
                for batch_kept in kept:
                    self._write(batch_kept)
            self._write(batch)
        except OSError as exc:
            raise self._disk_full(exc) from exc

    def _disk_full(self, exc: OSError) -> Exception:
        """``exc`` as the comparison's error when it says the disk is full, else itself."""
        if exc.errno == errno.ENOSPC or "No space left" in str(exc):
            return GatewayError(
                f"the comparison ran out of disk space after spilling {self.spilled_bytes} "
                f"bytes to {self.comparison.folder}",
                hint="free space there, or point TMPDIR at a larger disk", kind="resource")
        return exc

    def _write(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        if self._writer is not None and self._segment_bytes + batch.nbytes > self._segment_limit:
            self._writer.close()
            self._writer = None
        if self._writer is None:
            path = self.path if not self._segments else f"{self.path}.{len(self._segments)}"
            self._writer = pa.ipc.new_stream(path, self.stored_schema)
            self._segments.append(path)
            self._segment_bytes = 0
        self._writer.write_batch(batch)
        self._segment_bytes += batch.nbytes
        self.spilled_bytes += batch.nbytes

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The stored batches, in the order they came (read back from disk when spilled)."""
        import pyarrow as pa

        assert self.proof is None or self._keep_all, "only the rows the proof left are kept"

        if self._segments:
            # mapped, not copied: a segment's pages leave the process once its batches do
            for path in self._segments:
                with pa.memory_map(path) as f, pa.ipc.open_stream(f) as reader:
                    yield from reader
        else:
            yield from self._kept

    def row_bytes(self) -> float:
        """The average bytes of one row."""
        total = self.spilled_bytes + self._kept_bytes
        return total / self.rows if self.rows else 0.0


def _decoded(batch: Any) -> Any:
    """``batch`` with dictionary columns decoded (the comparator reads their values), and the
    entries of every map in it in key order (once, for every later step to compare)."""
    import pyarrow as pa

    from gateway.verify.compare_types import _holds_map, _maps_in_key_order

    types = batch.schema.types
    if not any(pa.types.is_dictionary(t) or _holds_map(t) for t in types):
        return batch
    columns = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
               for c in batch.columns]
    columns = [_maps_in_key_order(c) if _holds_map(c.type) else c for c in columns]
    return pa.record_batch(columns, names=batch.schema.names)


def _decoded_schema(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                               else f.type) for f in schema])


# -- reading back -----------------------------------------------------------------------------
class _InStep:
    """Proves a side's rows as they arrive against the rows at the same positions of a
    finished side (read back once), as :meth:`StreamingComparison._proven_in_place` does
    with two spilled sides: equal slices drop out, the runs that differ are copied to
    :attr:`rest_first` and :attr:`rest_second` to be paired. So equal answers in one
    order spill one side, not two, and read it back once.

    The arriving rows are held until a slice's worth (as many rows as the proof in place
    compares at once) is in. The proof is given up, before anything is dropped, when
    the first slice differs in every run (answers in another order) or a common type is
    not an exact cast (:meth:`StreamingComparison._aligned`).
    """

    def __init__(self, comparison: StreamingComparison, first: SpilledAnswer,
                 second: SpilledAnswer):
        assert first.schema is not None, "the first side is finished"
        self.comparison, self.first, self.second = comparison, first, second
        self.rows = int(max(1024, min(_PROOF_ROWS,
                                      comparison.memory_bytes // 16 / (first.row_bytes() or 1.0))))
        self.rest_first, self.rest_second = comparison.side(), comparison.side()
        assert first.stored_schema is not None
        self._source = _RowCursor(first.batches(), first.stored_schema)
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._aligned: Callable[[pa.Table], pa.Table] | None = None
        self._steps = 0

    def add(self, batch: pa.RecordBatch) -> bool:
        """Take the second side's next batch; False: the proof is given up (see
        :meth:`given_up`)."""
        self._held.append(batch)
        self._held_rows += batch.num_rows
        return self._held_rows < self.rows or self._step()

    def finish(self) -> bool:
        """The second side is complete: the first side's rows past its end are left to pair.
        False: the proof is given up."""
        if self._held and not self._step():
            return False
        for batch in self._source.rest():
            self.rest_first.add(batch)
        for side, rest in ((self.first, self.rest_first), (self.second, self.rest_second)):
            assert side.schema is not None
            rest.finish(side.schema)
        return True

    def given_up(self) -> list[pa.RecordBatch]:
        """The second side's batches held but not proven; the first side's reading stops."""
        held, self._held = self._held, []
        self._source.close()
        return held

    def _step(self) -> bool:
        import pyarrow as pa

        table = pa.Table.from_batches(self._held)
        if self._steps == 0:
            assert self.first.stored_schema is not None
            if len(self.first.stored_schema) != len(table.schema):
                return False  # a schema verdict, once both are in
            self._aligned = self.comparison._aligned(self.first, self.second)
            if self._aligned is None:
                return False
        assert self._aligned is not None
        p = self._source.take(table.num_rows)
        n = p.num_rows
        runs = _differing_runs(self._aligned(p), self._aligned(table.slice(0, n))) if n else []
        if self._steps == 0 and n > _MIN_RUN * _MAX_RUNS and \
                sum(stop - start for start, stop in runs) == n:
            return False
        self._steps += 1
        self._held, self._held_rows = [], 0
        for start, stop in runs:
            self.rest_first.add_table(p.slice(start, stop - start))
            self.rest_second.add_table(table.slice(start, stop - start))
        if table.num_rows > n:
            self.rest_second.add_table(table.slice(n))
        return True


class _RowCursor:
    """Reads batches a given number of rows at a time."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema):
        self._batches = batches
        self._schema = schema
        self._head: pa.RecordBatch | None = None

    def take(self, rows: int) -> pa.Table:
        """The next ``rows`` rows (fewer at the end), as a table."""
        import pyarrow as pa

        parts, count = [], 0
        while count < rows:
            batch = self._head if self._head is not None else next(self._batches, None)
            self._head = None
            if batch is None:
                break
            if batch.num_rows > rows - count:
                batch, self._head = batch.slice(0, rows - count), batch.slice(rows - count)
            parts.append(batch)
            count += batch.num_rows
        if not parts:
            return pa.Table.from_batches([], schema=self._schema)
        return pa.Table.from_batches(parts)

    def rest(self) -> Iterator[pa.RecordBatch]:
        """The rows not taken."""
        if self._head is not None:
            head, self._head = self._head, None
            yield head
        yield from self._batches

    def close(self) -> None:
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()
