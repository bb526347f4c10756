"""Comparing two answers too big to hold: streamed, checksummed by bucket, spilled to disk.

:func:`gateway.compare.compare_tables` holds both answers. The shadow runner
uses this module once the answers pass ``max_compare_bytes``; the verdict is
the same one, in the same format (``evidence["compared"] == "streamed"``).

How, per side (:class:`SpilledAnswer`), as the batches arrive:

- each batch is kept in memory while the side's share of the cap allows, and
  written to an Arrow IPC file in a temporary folder after that;
- every million rows or so, DuckDB hashes the rows (vectorised, one thread)
  into 4096 buckets and adds to each bucket's row count, sum and xor of row
  hashes: order-insensitive checksums, as reladiff and data-diff use them.
  Rows go to a bucket by the hash of their key columns (those
  :class:`~gateway.row_pairing.RowPairing` pairs on, minus floats), so a row
  whose measures changed lands in the same bucket on both sides.

Then (:meth:`StreamingComparison.compare`): buckets whose checksums agree hold
the same rows and drop out. The rows of the other buckets are read back from
the spill and paired by the in-memory comparator, a group of rows at a time
(by the hash of their keys), each group a sixteenth of the cap (written to files of their own first when all
of them together would not fit); the groups' counts and samples make the
verdict. With an ORDER BY, both spills are then read in step, a million rows
at a time, and the order keys compared position by position.

A checksum only proves equality when equal values hash alike and unequal ones
do not; each column is hashed in a form that holds to the comparator's
equivalences:

- integers of any width as HUGEINT, decimals as their common decimal, all
  string types alike, all binary types alike, timestamps with a zone as the
  instant; other columns whose types are the same on both sides as they are;
- floats (on both sides) rounded down to a grid of ``2**-m`` relative, with
  ``2**(1-m) <= rel_tol``: two floats in one cell are within the tolerance,
  so equal checksums never hide a difference; two floats within the
  tolerance but on either side of a cell's edge make their buckets differ, and
  the comparator, which applies the tolerance exactly, finds they agree.
  NaN hashes as NaN and -0.0 as 0.0, as the default options have it.

A column that has no such form (a float against an integer or a decimal,
floats inside nested values, two different timestamp units, NaN or signed
zero options that make equal hashes unequal values) is hashed as nothing:
then no checksum proves anything and every bucket is paired, still within the
cap, only slower. The evidence says which columns (``unhashed_columns``).
Columns the SQL derives from volatile functions are left out of hashing and
pairing alike, as :func:`~gateway.compare.compare_tables` leaves them out.
A LIMIT no total order fixes is judged by row count and checksums only.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.compare import (
    CompareOptions,
    Verdict,
    _common_type,
    _kind,
    allow_for,
    contains_float,
    pairing_for,
)
from gateway.errors import GatewayError
from gateway.query_shape import QueryShape

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gateway.nondeterminism import Nondeterminism

#: checksum buckets per answer: the top bits of the row hash
_BUCKET_BITS = 12
BUCKETS = 1 << _BUCKET_BITS
#: rows hashed by one DuckDB query (fewer when they pass _CHUNK_BYTES)
_CHUNK_ROWS = 1 << 20
_CHUNK_BYTES = 64 << 20
#: rows per step when the order of two spilled answers is compared
_ORDER_ROWS = 1 << 20
_MOD = 1 << 64


class StreamingComparison:
    """One comparison of answers to ``sql``, each fed batch by batch; spills to a temp folder.

    Args:
        sql: the query the answers answer (order, keys, volatile columns).
        options: the comparator's options (``-- arrowgate:`` overrides in
            ``sql`` apply).
        memory_bytes: what the comparison may hold of the answers at once:
            each side keeps up to a quarter of it in memory before it spills,
            and rows are paired in groups of at most a quarter per side.
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
        plan = _Plan.of(primary.stored_schema, reference.stored_schema,
                        primary.schema.names, self)
        _rehashed(primary, reference, plan)
        differing = _differing_buckets(primary, reference) if plan.exact else \
            list(range(BUCKETS))
        if plan.rounds_floats and len(differing) > BUCKETS // 8:
            # most buckets differ: floats a little off everywhere, or a real difference
            # everywhere; floats rounded to the tolerance's grid tell which
            plan = _Plan.of(primary.stored_schema, reference.stored_schema,
                            primary.schema.names, self, rounded=True)
            _rehashed(primary, reference, plan)
            differing = _differing_buckets(primary, reference)
            evidence["floats_rounded"] = True
        evidence.update(differing_buckets=len(differing) if plan.exact else None,
                        buckets=BUCKETS, key_columns=[primary.schema.names[i]
                                                      for i in plan.keys])
        if plan.unhashed:
            evidence["unhashed_columns"] = [primary.schema.names[i] for i in plan.unhashed]
        verdict = self._pair(primary, reference, plan, differing, evidence)
        if verdict.ok and (self.shape.order or not self.opts.ignore_order_without_order_by):
            verdict = self._check_order(primary, reference, evidence)
        return self._allow_for_the_sql(found, volatile, verdict, primary, reference)

    # -- pairing the rows of the differing buckets ---------------------------------
    def _pair(self, primary: SpilledAnswer, reference: SpilledAnswer, plan: _Plan,
              differing: list[int], evidence: dict[str, Any]) -> Verdict:
        n_p, n_r = primary.rows, reference.rows
        if primary.schema is not None and len(primary.schema) == 0:
            category = "match" if n_p == n_r else ("missing_rows" if n_p < n_r else "extra_rows")
            return Verdict(category, f"primary returned {n_p} rows, reference {n_r}", evidence)
        if not differing:
            return Verdict("match", f"{n_p} rows agree", evidence)
        wanted = sum(int(side.counts[differing].sum()) * side.row_bytes()
                     for side in (primary, reference))
        # pairing holds a group several times over (casts, DuckDB's hash tables)
        groups = max(1, math.ceil(wanted / max(1, self.memory_bytes // 16)))
        evidence.update(paired_rows=int(primary.counts[differing].sum()
                                        + reference.counts[differing].sum()),
                        pairing_groups=groups)
        verdicts = [self._judge_group(p, r)
                    for p, r in _groups(primary, reference, plan, differing, groups, self)]
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
        import numpy as np

        self.comparison = comparison
        self.path = os.path.join(comparison.folder, f"{name}.arrow")
        self.rows = 0
        self.spilled_bytes = 0
        self.schema: pa.Schema | None = None
        #: the schema the batches are stored in (dictionaries decoded)
        self.stored_schema: pa.Schema | None = None
        self.counts = np.zeros(BUCKETS, np.int64)
        self.sums = np.zeros(BUCKETS, np.uint64)
        self.plan: _SidePlan | None = None
        self._kept: list[pa.RecordBatch] = []
        self._kept_bytes = 0
        self._share = comparison.memory_bytes // 4 if keep else 0
        self._chunk_limit = min(_CHUNK_BYTES, max(1 << 20, comparison.memory_bytes // 8))
        self._writer: Any = None
        self._chunk: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._chunk_bytes = 0
        self._con: Any = None

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
        self._close_connection()

    def _start(self, schema: pa.Schema) -> None:
        comparison = self.comparison
        self.stored_schema = schema
        self.plan = _Plan.of(schema, schema, schema.names, comparison).side(True)

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
            if exc.errno == errno.ENOSPC or "No space left" in str(exc):
                raise GatewayError(
                    f"the comparison ran out of disk space after spilling {self.spilled_bytes} "
                    f"bytes to {self.comparison.folder}",
                    hint="free space there, or point TMPDIR at a larger disk",
                    kind="resource") from exc
            raise

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

        assert self.plan is not None
        table = pa.Table.from_batches(self._chunk, schema=self.stored_schema)
        self._chunk, self._chunk_rows, self._chunk_bytes = [], 0, 0
        self._add_sums(table, self.plan)

    def _close_connection(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def _connection(self) -> Any:
        if self._con is None:
            self._con = _cursor()
        return self._con

    def _query(self, table: pa.Table, plan: _SidePlan, sql: str) -> list[np.ndarray]:
        """The columns of ``sql`` run over ``table`` as ``chunk`` (columns c0, c1...)."""
        columns = [_rounded_bits(c, plan.mantissa_bits) if i in plan.floats else c
                   for i, c in enumerate(table.columns)]
        import pyarrow as pa

        con = self._connection()
        con.register("chunk", pa.table(columns, names=[f"c{i}" for i in range(len(columns))]))
        try:
            answer = con.sql(sql).to_arrow_table()
        finally:
            con.unregister("chunk")
        return [c.to_numpy() for c in answer.columns]

    def _add_sums(self, table: pa.Table, plan: _SidePlan) -> None:
        b, s, n = self._query(table, plan, plan.checksum_sql)
        b = b.astype("int64")
        self.counts[b] += n.astype("int64")
        self.sums[b] += s.astype("uint64")

    def buckets_of(self, table: pa.Table, plan: _SidePlan) -> np.ndarray:
        """Each row's bucket under ``plan``."""
        return self._query(table, plan, plan.bucket_sql)[0].astype("int64")

    def keys_of(self, table: pa.Table, plan: _SidePlan) -> np.ndarray:
        """The hash of each row's key columns under ``plan``."""
        return self._query(table, plan, plan.key_sql)[0]

    def rehash(self, plan: _SidePlan) -> None:
        """Recompute the checksums under the pair's plan (the types differ from the other side's)."""
        self.counts[:] = 0
        self.sums[:] = 0
        self.plan = plan
        for table in _rechunked(self.batches(), _CHUNK_ROWS):
            self._add_sums(table, plan)
        self._close_connection()


_database: Any = None
_database_lock = threading.Lock()


def _cursor() -> Any:
    """A cursor on one shared single-threaded DuckDB database (hashing needs no tables of
    its own, and opening a database costs ~40 ms on a busy machine)."""
    global _database
    import duckdb

    with _database_lock:
        if _database is None:
            _database = duckdb.connect(config={"threads": 1})
        return _database.cursor()


# -- what is hashed -------------------------------------------------------------------------
@dataclass(frozen=True)
class _SidePlan:
    """How one side is hashed: SQL over a registered table ``chunk`` (columns c0, c1...)."""

    #: per bucket: the bucket, the sum of row hashes mod 2**64, the row count
    checksum_sql: str
    #: each row's bucket
    bucket_sql: str
    #: the hash of each row's key columns (which pairing group it goes to)
    key_sql: str
    #: columns replaced by their floats' rounded bits before hashing
    floats: tuple[int, ...]
    #: the float grid: bits of the mantissa kept (52: every bit)
    mantissa_bits: int


@dataclass
class _Plan:
    """How the columns of a pair of answers are hashed, and which are keys."""

    p: _SidePlan
    r: _SidePlan
    keys: list[int] = field(default_factory=list)
    unhashed: list[int] = field(default_factory=list)
    #: hashing the floats rounded would hash differently (the plan hashes them as they are)
    rounds_floats: bool = False

    @property
    def exact(self) -> bool:
        """Equal checksums prove equal rows (every compared column is hashed)."""
        return not self.unhashed

    def side(self, primary: bool) -> _SidePlan:
        return self.p if primary else self.r

    @classmethod
    def of(cls, p: pa.Schema, r: pa.Schema, names: list[str],
           comparison: StreamingComparison, rounded: bool = False) -> _Plan:
        """The plan for answers of types ``p`` and ``r`` (the same schema twice: one side's own).

        ``rounded``: floats are hashed rounded to the tolerance's grid (else as they are,
        which is cheaper and proves equality just as well when they are equal bit for bit).
        """
        import pyarrow as pa

        opts, shape = comparison.opts, comparison.shape
        volatile = set(comparison.found.columns_in(names))
        exprs: list[tuple[str, str] | None] = []
        unhashed = []
        floats = []
        for i, (tp, tr) in enumerate(zip(p.types, r.types, strict=True)):
            if i in volatile:
                exprs.append(None)
                continue
            col = f"c{i}"
            pair = (_hashed(col, tp, tr, opts), _hashed(col, tr, tp, opts))
            if pair[0] is None or pair[1] is None:
                unhashed.append(i)
                exprs.append(None)
                continue
            if pa.types.is_floating(tp) and (rounded or tp != r.types[i]):
                floats.append(i)
            exprs.append((pair[0], pair[1]))
        if shape.group_keys and len(shape.group_keys) == len(p):
            keys = [i for i, k in enumerate(shape.group_keys) if k]
        else:
            keys = [i for i, (tp, tr) in enumerate(zip(p.types, r.types, strict=True))
                    if not pa.types.is_decimal(_common_type(tp, tr, opts) or pa.null())]
        # floats are rounded to a grid: two within the tolerance may hash apart, so
        # they never decide which group a row is paired in
        keys = [i for i in keys if exprs[i] is not None
                and not contains_float(p.types[i]) and not contains_float(r.types[i])]
        bits = _mantissa_bits(opts) if rounded else 52

        def side(which: int) -> _SidePlan:
            hashed = [e[which] for e in exprs if e is not None] or ["0"]
            row = f"hash({', '.join(hashed)})"
            parts = [exprs[i][which] for i in keys]  # type: ignore[index]
            return _SidePlan(
                f"SELECT (h >> {64 - _BUCKET_BITS})::INTEGER AS b, "
                f"(sum(h) % {_MOD})::UBIGINT AS s, count(*) AS n "
                f"FROM (SELECT {row} AS h FROM chunk) GROUP BY b",
                f"SELECT ({row} >> {64 - _BUCKET_BITS})::INTEGER AS b FROM chunk",
                f"SELECT hash({', '.join(parts) or '0'}) AS k FROM chunk",
                tuple(floats), bits)

        hashed_floats = any(exprs[i] is not None and pa.types.is_floating(t)
                            for i, t in enumerate(p.types))
        return cls(side(0), side(1), keys, unhashed, hashed_floats and not rounded)


def _hashed(col: str, own: pa.DataType, other: pa.DataType, opts: CompareOptions) -> str | None:
    """The DuckDB expression a cell of type ``own`` is hashed as, against ``other``; None: none holds."""
    import pyarrow as pa

    k, ko = _kind(own), _kind(other)
    if k == "float" and ko == "float":
        return col if opts.nan_equals_nan and opts.signed_zero_equal else None
    if "float" in (k, ko) or contains_float(own) or contains_float(other):
        return None
    if own == other:
        return col
    if k == "int" and ko == "int":
        return f"{col}::HUGEINT"
    if k in ("int", "decimal") and ko in ("int", "decimal"):
        common = _common_type(own, other, opts)
        if common is None or not pa.types.is_decimal(common):
            return None
        return f"{col}::DECIMAL({common.precision}, {common.scale})"
    if k == ko and k in ("string", "binary") and opts.strings_equivalent:
        return col
    if k == ko == "timestamp" and own.unit == other.unit and own.tz and other.tz:
        return col
    return None


def _mantissa_bits(opts: CompareOptions) -> int:
    """Mantissa bits kept: floats equal in those (and the exponent) are within ``rel_tol``."""
    if opts.rel_tol <= 0:
        return 52
    return min(52, max(0, math.ceil(-math.log2(opts.rel_tol))))


def _rounded_bits(column: Any, bits: int) -> Any:
    """A float column as uint64 bits rounded down to ``bits`` of mantissa.

    NaN becomes one NaN and -0.0 becomes 0.0; subnormals keep every bit (their
    cells would be wider than the tolerance). Two values with the same result
    differ by less than ``2**-bits`` of either.
    """
    import numpy as np
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    original = column
    if column.type != pa.float64():
        column = column.cast(pa.float64())
    if column.null_count:
        column = column.fill_null(0.0)  # the validity bitmap below keeps them null
    raw = column.to_numpy().view(np.uint64)
    exponent = raw & np.uint64(0x7FF0000000000000)
    rounded = raw & np.uint64(((1 << 64) - 1) ^ ((1 << (52 - bits)) - 1))
    odd = np.flatnonzero((exponent == 0) | (exponent == np.uint64(0x7FF0000000000000)))
    if len(odd):  # zeros, subnormals, infinities and NaN
        values = raw[odd].view(np.float64)
        rounded[odd] = np.where(values == 0, np.uint64(0),
                                np.where(np.isnan(values), np.uint64(0x7FF8000000000000),
                                         raw[odd]))
    return pa.Array.from_buffers(pa.uint64(), len(column),
                                 [original.buffers()[0], pa.py_buffer(rounded)],
                                 original.null_count, original.offset)


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
def _rehashed(primary: SpilledAnswer, reference: SpilledAnswer, plan: _Plan) -> None:
    """Recompute a side's checksums where the pair's plan is not the one it was hashed with."""
    for side in (primary, reference):
        if side.plan != plan.side(side is primary):
            side.rehash(plan.side(side is primary))


def _differing_buckets(primary: SpilledAnswer, reference: SpilledAnswer) -> list[int]:
    import numpy as np

    differ = (primary.counts != reference.counts) | (primary.sums != reference.sums)
    return [int(b) for b in np.flatnonzero(differ)]


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


def _groups(primary: SpilledAnswer, reference: SpilledAnswer, plan: _Plan, differing: list[int],
            groups: int, comparison: StreamingComparison) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The rows of the differing buckets of both sides, ``groups`` tables apart (by bucket).

    One group is gathered in memory; more are first written to files of their own,
    so each side's spill is read once whatever the number of groups.
    """
    import numpy as np
    import pyarrow as pa

    wanted = np.zeros(BUCKETS, bool)
    wanted[differing] = True

    def picked(side: SpilledAnswer, side_plan: _SidePlan) -> Iterator[tuple[np.ndarray, pa.Table]]:
        for table in _rechunked(side.batches(), _CHUNK_ROWS):
            keep = wanted[side.buckets_of(table, side_plan)]
            if keep.any():
                rows = table.filter(pa.array(keep))
                group = side.keys_of(rows, side_plan) % np.uint64(groups) if groups > 1 else \
                    np.zeros(rows.num_rows, np.uint64)
                yield group, rows

    sides = ((primary, plan.p), (reference, plan.r))
    if groups == 1:
        tables = []
        for side, side_plan in sides:
            parts = [t for _, t in picked(side, side_plan)]
            tables.append(pa.concat_tables(parts) if parts else
                          side.stored_schema.empty_table())  # type: ignore[union-attr]
            side._close_connection()
        yield tables[0], tables[1]
        return
    paths = [[os.path.join(comparison.folder, f"g{g}-{n}.arrow") for n in range(2)]
             for g in range(groups)]
    for n, (side, side_plan) in enumerate(sides):
        schema = side.stored_schema
        writers = [pa.ipc.new_stream(paths[g][n], schema) for g in range(groups)]
        try:
            for group, table in picked(side, side_plan):
                for g in np.unique(group):
                    writers[g].write_table(table.filter(pa.array(group == g)))
        finally:
            for w in writers:
                w.close()
            side._close_connection()
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
