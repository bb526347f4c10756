"""Comparing two answers too big to hold: streamed, checksummed, spilled to disk.

:func:`gateway.compare.compare_tables` holds both answers. The shadow runner
uses this module once the answers pass ``max_compare_bytes``; the verdict is
the same one, in the same format (``evidence["compared"] == "streamed"``).

Per side (:class:`SpilledAnswer`), as the batches arrive: each batch is kept
in memory while the side's share of the cap allows and written to an Arrow
IPC file in a temporary folder after that; a million rows at a time, its rows
are added to an order-insensitive checksum, the row count and the sum of the
row hashes (:mod:`gateway.row_checksums`, as reladiff and data-diff use them).

Then (:meth:`StreamingComparison.compare`): equal checksums end it (then the
order). Otherwise each side's rows are hashed again from the spill, each
row's hash stored, and summed into buckets by the hash's top bits, enough of
them for a few differing rows to touch few rows; buckets whose sums agree
hold the same rows and drop out (when an eighth of the rows or more are in
differing buckets and there are floats, the floats are first rehashed rounded
to the tolerance's grid). The rows of the other buckets are read back from
the spill and paired by the in-memory comparator
(:func:`gateway.compare.pairing_for`), a group of rows at a time, by the hash
of their key columns so that a row whose measures changed meets its partner;
each group is a sixteenth of the cap (4 MiB at least), written to files of its
own first when there are several. The groups' counts and samples make the
verdict. With an ORDER BY, both spills are then read in step, a million rows
at a time, and the ORDER BY keys compared position by position. The rules
and limits are in docs/shadow.md ("Memory").
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.compare import CompareOptions, Verdict, allow_for, pairing_for
from gateway.errors import GatewayError
from gateway.query_shape import QueryShape
from gateway.row_checksums import ChecksumPlan, RowHashes, SidePlan, bucket_bits

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gateway.nondeterminism import Nondeterminism

#: rows hashed by one DuckDB query (fewer when they pass _CHUNK_BYTES)
_CHUNK_ROWS = 1 << 20
_CHUNK_BYTES = 64 << 20
#: the least bytes of rows paired at once, whatever the cap
_MIN_GROUP_BYTES = 4 << 20
#: rows per step when the order of two spilled answers is compared
_ORDER_ROWS = 1 << 20


class StreamingComparison:
    """One comparison of answers to ``sql``, each fed batch by batch; spills to a temp folder.

    Args:
        sql: the query the answers answer (order, keys, volatile columns).
        options: the comparator's options (``-- arrowgate:`` overrides in
            ``sql`` apply).
        memory_bytes: what the comparison may hold of the answers at once:
            each side keeps up to a quarter of it in memory before it spills,
            and rows are paired in groups of a sixteenth of it (4 MiB at least).
        folder: where the temporary folder goes (the system's temp folder
            when None); it is removed by :meth:`close`.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, sql: str | None, options: CompareOptions | None = None,
                 memory_bytes: int = 256 << 20, folder: str | None = None):
        from gateway.nondeterminism import Nondeterminism

        self.sql = sql
        self.opts = (options or CompareOptions()).for_sql(sql)
        self.shape = QueryShape.of(sql, self.opts.dialect)
        self.found: Nondeterminism = Nondeterminism.of(sql, self.opts.dialect)
        self.memory_bytes = memory_bytes
        self.folder = tempfile.mkdtemp(prefix="arrowgate-compare-", dir=folder)
        self._sides = 0

    def side(self, keep: bool = True) -> SpilledAnswer:
        """A new side to feed (``add`` each batch, then ``finish``).

        ``keep``: hold batches in memory up to the side's share of the cap
        before spilling; False spills from the first batch (the shadow runner's
        sides, which held the cap's worth already).
        """
        self._sides += 1
        return SpilledAnswer(self, f"side{self._sides}", keep)

    def __enter__(self) -> StreamingComparison:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the spilled files."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def compare(self, primary: SpilledAnswer, reference: SpilledAnswer) -> Verdict:
        """The verdict on two finished sides, as :func:`compare_tables` would give it."""
        assert primary.schema is not None and reference.schema is not None
        verdict, _, found, volatile = pairing_for(primary.schema.empty_table(),
                                                  reference.schema.empty_table(), self.sql,
                                                  self.opts)
        evidence: dict[str, Any] = {
            "compared": "streamed", "memory_bytes": self.memory_bytes,
            "spilled_bytes": primary.spilled_bytes + reference.spilled_bytes,
            "primary_rows": primary.rows, "reference_rows": reference.rows,
        }
        if verdict is not None:
            verdict.evidence.update(evidence)
            return verdict
        plan = self._plan(primary, reference)
        differing = self._differing(primary, reference, plan, evidence)
        if differing is not None and plan.rounds_floats and \
                evidence["paired_rows"] * 8 > primary.rows + reference.rows:
            # many rows differ: floats a little off everywhere, or a real difference
            # everywhere; floats rounded to the tolerance's grid tell which
            plan = self._plan(primary, reference, rounded=True)
            differing = self._differing(primary, reference, plan, evidence)
            evidence["floats_rounded"] = True
        evidence["key_columns"] = [primary.schema.names[i] for i in plan.keys]
        if plan.unhashed:
            evidence["unhashed_columns"] = [primary.schema.names[i] for i in plan.unhashed]
        verdict = self._pair(primary, reference, plan, differing, evidence)
        if verdict.ok and (self.shape.order or not self.opts.ignore_order_without_order_by):
            verdict = self._check_order(primary, reference, evidence)
        return self._allow_for_the_sql(found, volatile, verdict, primary, reference)

    def _plan(self, primary: SpilledAnswer | None, reference: SpilledAnswer | None = None,
              rounded: bool = False, schema: pa.Schema | None = None) -> ChecksumPlan:
        """The checksum plan for two answers (or one side's own, of ``schema``)."""
        if schema is not None:
            p = r = schema
        else:
            assert primary is not None and reference is not None
            assert primary.stored_schema is not None and reference.stored_schema is not None
            p, r, schema = primary.stored_schema, reference.stored_schema, primary.schema
        assert schema is not None
        volatile = set(self.found.columns_in(schema.names))
        return ChecksumPlan.of(p, r, self.opts, self.shape, volatile, rounded)

    def _differing(self, primary: SpilledAnswer, reference: SpilledAnswer, plan: ChecksumPlan,
                   evidence: dict[str, Any]) -> np.ndarray | None:
        """The buckets to pair (a bool per bucket), with ``paired_rows`` in the evidence;
        None: every row is paired (no checksum proves anything)."""
        import numpy as np

        if not plan.exact:
            evidence.update(differing_buckets=None, buckets=None,
                            paired_rows=primary.rows + reference.rows)
            return None
        sides = (primary, reference)
        bits = bucket_bits(max(primary.rows, reference.rows), self.memory_bytes)
        # hashed under the side's own plan while streaming
        _store_hashes([(side, plan.side(side is primary)) for side in sides
                       if side.hashes.plan != plan.side(side is primary)], bits)
        if primary.hashes.same_total(reference.hashes):
            evidence.update(differing_buckets=0, buckets=None, paired_rows=0)
            return np.zeros(1, bool)
        _store_hashes([(side, side.hashes.plan) for side in sides if not side.hashes.stored],
                      bits)
        counts = [side.hashes.counts for side in sides]
        sums = [side.hashes.sums for side in sides]
        assert counts[0] is not None and counts[1] is not None
        differing = (counts[0] != counts[1]) | (sums[0] != sums[1])
        evidence.update(differing_buckets=int(differing.sum()), buckets=1 << bits,
                        paired_rows=int(counts[0][differing].sum() + counts[1][differing].sum()))
        return differing

    # -- pairing the rows of the differing buckets ---------------------------------
    def _pair(self, primary: SpilledAnswer, reference: SpilledAnswer, plan: ChecksumPlan,
              differing: np.ndarray | None, evidence: dict[str, Any]) -> Verdict:
        n_p, n_r = primary.rows, reference.rows
        if primary.schema is not None and len(primary.schema) == 0:
            category = "match" if n_p == n_r else ("missing_rows" if n_p < n_r else "extra_rows")
            return Verdict(category, f"primary returned {n_p} rows, reference {n_r}", evidence)
        if not evidence["paired_rows"]:
            return Verdict("match", f"{n_p} rows agree", evidence)
        row_bytes = max(side.row_bytes() for side in (primary, reference))
        wanted = evidence["paired_rows"] * row_bytes
        # pairing holds a group several times over (casts, DuckDB's hash tables); below
        # a few MiB a group costs more in set-up than in pairing
        groups = max(1, math.ceil(wanted / max(_MIN_GROUP_BYTES, self.memory_bytes // 16)))
        evidence.update(pairing_groups=groups)
        verdicts = [self._judge_group(p, r) for p, r in
                    _groups(primary, reference, plan, differing, groups, self.folder)]
        return _merged(verdicts, n_p, n_r, self.opts, evidence)

    def _judge_group(self, p: pa.Table, r: pa.Table) -> Verdict:
        verdict, pairing, _, _ = pairing_for(p, r, self.sql, self.opts, order=False)
        if verdict is not None:  # a column's values do not cast (schema), as in memory
            return verdict
        assert pairing is not None
        return pairing.judge()

    # -- order ----------------------------------------------------------------------
    def _check_order(self, primary: SpilledAnswer, reference: SpilledAnswer,
                     evidence: dict[str, Any]) -> Verdict:
        offset, message = 0, ""
        for p, r in zip(_rechunked(primary.batches(), _ORDER_ROWS),
                        _rechunked(reference.batches(), _ORDER_ROWS), strict=True):
            _, pairing, _, _ = pairing_for(p, r, self.sql, self.opts)
            assert pairing is not None
            verdict = pairing.order_verdict(offset)
            if not verdict.ok:
                verdict.evidence.update(evidence, primary_rows=primary.rows,
                                        reference_rows=reference.rows)
                return verdict
            if offset == 0:
                evidence.update({k: v for k, v in verdict.evidence.items()
                                 if k.startswith("order_")})
                message = verdict.message.split(" rows agree", 1)[1]
            offset += p.num_rows
            if evidence.get("order_checked") is False:
                break
        return Verdict("match", f"{primary.rows} rows agree{message}", evidence)

    def _allow_for_the_sql(self, found: Nondeterminism, volatile: list[str], verdict: Verdict,
                           primary: SpilledAnswer, reference: SpilledAnswer) -> Verdict:
        if found.cut is not None and not verdict.ok and primary.rows == reference.rows:
            evidence = {**verdict.evidence, "verified": ["schema", "row_count"]}
            return Verdict("nondeterministic", "LIMIT without an ORDER BY that fixes its rows: "
                           f"the answers differ ({verdict.category}) but the row count and the "
                           "schema agree (above the memory cap, which rows the cut allows is "
                           "not checked)", evidence)
        return allow_for(found, volatile, verdict)


class SpilledAnswer:
    """One side of a :class:`StreamingComparison`: kept, then spilled, and checksummed."""

    def __init__(self, comparison: StreamingComparison, name: str, keep: bool = True):
        self.comparison = comparison
        self.path = os.path.join(comparison.folder, f"{name}.arrow")
        self.rows = 0
        self.spilled_bytes = 0
        self.schema: pa.Schema | None = None
        #: the schema the batches are stored in (dictionaries decoded)
        self.stored_schema: pa.Schema | None = None
        #: the row hashes, under this side's own plan until the pair's differs (set by
        #: the first batch or by finish)
        self.hashes: RowHashes
        self._kept: list[pa.RecordBatch] = []
        self._kept_bytes = 0
        self._share = comparison.memory_bytes // 4 if keep else 0
        self._chunk_limit = min(_CHUNK_BYTES, max(1 << 20, comparison.memory_bytes // 8))
        self._writer: Any = None
        self._chunk: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._chunk_bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """Take the next batch of the answer.

        Raises:
            GatewayError: (kind ``resource``) the spill folder's disk is full.
        """
        batch = _decoded(batch)
        if self.stored_schema is None:
            self._start(batch.schema)
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        self._store(batch)
        self._chunk.append(batch)
        self._chunk_rows += batch.num_rows
        self._chunk_bytes += batch.nbytes
        if self._chunk_rows >= _CHUNK_ROWS or self._chunk_bytes >= self._chunk_limit:
            self._hash_chunk()

    def finish(self, schema: pa.Schema) -> None:
        """The answer is complete; ``schema`` is its schema as the engine gave it."""
        self.schema = schema
        if self.stored_schema is None:
            self._start(_decoded_schema(schema))
        if self._chunk:
            self._hash_chunk()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.hashes.close()

    def _start(self, schema: pa.Schema) -> None:
        self.stored_schema = schema
        self.hashes = RowHashes(self.comparison._plan(None, schema=schema).side(True),
                                self.path + ".hashes")

    def _store(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        if self._writer is None and self._kept_bytes + batch.nbytes <= self._share:
            self._kept.append(batch)
            self._kept_bytes += batch.nbytes
            return
        try:
            if self._writer is None:
                self._writer = pa.ipc.new_stream(self.path, self.stored_schema)
                for kept in self._kept:
                    self._write(kept)
                self._kept, self._kept_bytes = [], 0
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
        self._writer.write_batch(batch)
        self.spilled_bytes += batch.nbytes

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The stored batches, in the order they came (read back from disk when spilled)."""
        import pyarrow as pa

        if self.spilled_bytes:
            with pa.OSFile(self.path) as f, pa.ipc.open_stream(f) as reader:
                yield from reader
        else:
            yield from self._kept

    def row_bytes(self) -> float:
        """The average bytes of one row."""
        total = self.spilled_bytes or self._kept_bytes
        return total / self.rows if self.rows else 0.0

    def _hash_chunk(self) -> None:
        import pyarrow as pa

        table = pa.Table.from_batches(self._chunk, schema=self.stored_schema)
        self._chunk, self._chunk_rows, self._chunk_bytes = [], 0, 0
        self.hashes.add(table)

    def store_hashes(self, plan: SidePlan, bits: int) -> None:
        """Hash every row again under ``plan``, into buckets of ``bits`` top bits of the row
        hash, and store each row's bucket.

        Raises:
            GatewayError: (kind ``resource``) the spill folder's disk is full.
        """
        self.hashes = RowHashes(plan, self.hashes.path)
        try:
            self.hashes.store(_rechunked(self.batches(), _CHUNK_ROWS), bits)
        except OSError as exc:
            raise self._disk_full(exc) from exc


def _decoded(batch: Any) -> Any:
    """``batch`` with dictionary columns decoded (the comparator reads their values)."""
    import pyarrow as pa

    if not any(pa.types.is_dictionary(t) for t in batch.schema.types):
        return batch
    columns = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
               for c in batch.columns]
    return pa.record_batch(columns, names=batch.schema.names)


def _decoded_schema(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                               else f.type) for f in schema])


# -- reading back -----------------------------------------------------------------------------
def _store_hashes(sides: list[tuple[SpilledAnswer, SidePlan]], bits: int) -> None:
    """Each side's :meth:`SpilledAnswer.store_hashes`, one after the other.

    Not on two threads: that took a 100M-row comparison from 33.5 s to 27.9 s of
    wall time at the same CPU, but the process's RSS grew by 256 MiB instead of
    90 MiB (two million-row chunks at once, and the allocators' per-thread caches),
    the whole cap (docs/benchmarks.md, 2026-12-01).
    """
    for side, plan in sides:
        side.store_hashes(plan, bits)


def _rechunked(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The batches as tables of ``rows`` rows each (the last one shorter)."""
    import pyarrow as pa

    held: list[pa.RecordBatch] = []
    count = 0
    schema = None
    for batch in batches:
        schema = batch.schema
        while batch.num_rows:
            take = min(rows - count, batch.num_rows)
            held.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == rows:
                yield pa.Table.from_batches(held, schema=schema)
                held, count = [], 0
    if count:
        yield pa.Table.from_batches(held, schema=schema)


def _groups(primary: SpilledAnswer, reference: SpilledAnswer, plan: ChecksumPlan,
            differing: np.ndarray | None, groups: int,
            folder: str) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The rows of the ``differing`` buckets of both sides (every row: None), in ``groups``
    pairs of tables.

    A row's bucket was stored by :meth:`SpilledAnswer.store_hashes` (under
    ``plan``). A row's group is the hash of its key columns, so rows that pair
    are in one group. One group is gathered in memory; more are first written
    to files of their own in ``folder``, so each side's spill is read once
    whatever their number.
    """
    import numpy as np
    import pyarrow as pa

    def picked(side: SpilledAnswer) -> Iterator[tuple[np.ndarray, pa.Table]]:
        keyed = RowHashes(plan.side(side is primary), side.hashes.path)  # hashes the keys
        stored = side.hashes.stored_buckets() if differing is not None else None
        held = np.zeros(0, np.intp)
        try:
            for table in _rechunked(side.batches(), _CHUNK_ROWS):
                if stored is not None and differing is not None:
                    while len(held) < table.num_rows:
                        held = np.concatenate([held, next(stored)])
                    buckets, held = held[:table.num_rows], held[table.num_rows:]
                    keep = differing[buckets]
                    if not keep.any():
                        continue
                    table = table.filter(pa.array(keep))
                group = keyed.keys_of(table) % np.uint64(groups) if groups > 1 else \
                    np.zeros(table.num_rows, np.uint64)
                yield group, table
        finally:
            keyed.close()

    sides = (primary, reference)
    if groups == 1:
        tables = []
        for side in sides:
            parts = [t for _, t in picked(side)]
            assert side.stored_schema is not None
            tables.append(pa.concat_tables(parts) if parts else side.stored_schema.empty_table())
        yield tables[0], tables[1]
        return
    paths = [[os.path.join(folder, f"g{g}-{n}.arrow") for n in range(2)] for g in range(groups)]
    for n, side in enumerate(sides):
        writers = [pa.ipc.new_stream(paths[g][n], side.stored_schema) for g in range(groups)]
        try:
            for group, table in picked(side):
                for g in np.unique(group):
                    writers[g].write_table(table.filter(pa.array(group == g)))
        finally:
            for w in writers:
                w.close()
    for g in range(groups):
        p, r = (_read_and_remove(path) for path in paths[g])
        yield p, r


def _read_and_remove(path: str) -> pa.Table:
    import pyarrow as pa

    with pa.OSFile(path) as f:
        table = pa.ipc.open_stream(f).read_all()
    os.remove(path)
    return table


def _merged(verdicts: list[Verdict], n_p: int, n_r: int, opts: CompareOptions,
            evidence: dict[str, Any]) -> Verdict:
    """One verdict from the verdicts on each group of buckets (as RowPairing classifies)."""
    from gateway.row_pairing import values_message

    for v in verdicts:
        if v.category == "schema":
            v.evidence.update(evidence)
            return v
    counts = {k: sum(int(v.evidence.get(f"{k}_count", 0)) for v in verdicts)
              for k in ("missing", "extra", "changed")}
    missing, extra, changed = counts["missing"], counts["extra"], counts["changed"]
    for v in verdicts:
        evidence.setdefault("key_columns", v.evidence.get("key_columns"))
    if not (missing or extra or changed):
        return Verdict("match", f"{n_p} rows agree", evidence)
    evidence.update(missing_count=missing, extra_count=extra, changed_count=changed)
    for name in ("missing", "extra", "differences"):
        sample = [row for v in verdicts for row in v.evidence.get(name, [])][:opts.sample_size]
        if sample:
            evidence[name] = sample
    if n_p != n_r:
        if missing and not extra and not changed:
            return Verdict("missing_rows", f"primary lacks {missing} of the reference's "
                           f"{n_r} rows", evidence)
        if extra and not missing and not changed:
            return Verdict("extra_rows", f"primary has {extra} rows the reference does not "
                           f"({n_p} vs {n_r})", evidence)
        return Verdict("row_count", f"primary returned {n_p} rows, reference {n_r}", evidence)
    return Verdict("values", values_message(changed + missing, n_r, evidence.get("differences")),
                   evidence)


def compare_streams(primary: Iterator[pa.RecordBatch] | pa.RecordBatchReader,
                    reference: Iterator[pa.RecordBatch] | pa.RecordBatchReader,
                    primary_schema: pa.Schema, reference_schema: pa.Schema, *,
                    sql: str | None = None, options: CompareOptions | None = None,
                    memory_bytes: int = 256 << 20, folder: str | None = None,
                    on_spill: Callable[[str], None] | None = None) -> Verdict:
    """Compare two answers read batch by batch (one after the other), within ``memory_bytes``.

    ``on_spill(folder)`` is called with the temporary folder before it is removed
    (for tests and benchmarks that look at what was spilled).
    """
    with StreamingComparison(sql, options, memory_bytes, folder) as comparison:
        sides = []
        for batches, schema in ((primary, primary_schema), (reference, reference_schema)):
            side = comparison.side()
            for batch in batches:
                side.add(batch)
            side.finish(schema)
            sides.append(side)
        verdict = comparison.compare(sides[0], sides[1])
        if on_spill is not None:
            on_spill(comparison.folder)
        return verdict
