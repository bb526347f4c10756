"""Order-insensitive checksums of an answer's rows, by bucket, that prove equality.

Used by :mod:`gateway.compare_stream`. A :class:`ChecksumPlan` says how each
column of a pair of answers is hashed so that equal hashes mean values the
comparator's equivalences take as equal (the rules are in docs/shadow.md,
"What a checksum proves"); :class:`BucketChecksums` adds tables to one side's
per-bucket row counts and sums of row hashes, in DuckDB (vectorised, one
thread).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.compare import CompareOptions, _common_type, _kind, contains_float

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gateway.query_shape import QueryShape

#: checksum buckets per answer: the top bits of the row hash
BUCKET_BITS = 12
BUCKETS = 1 << BUCKET_BITS
_MOD = 1 << 64


_database: Any = None
_database_lock = threading.Lock()


def cursor() -> Any:
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
class SidePlan:
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
class ChecksumPlan:
    """How the columns of a pair of answers are hashed, and which are keys."""

    p: SidePlan
    r: SidePlan
    keys: list[int] = field(default_factory=list)
    unhashed: list[int] = field(default_factory=list)
    #: hashing the floats rounded would hash differently (the plan hashes them as they are)
    rounds_floats: bool = False

    @property
    def exact(self) -> bool:
        """Equal checksums prove equal rows (every compared column is hashed)."""
        return not self.unhashed

    def side(self, primary: bool) -> SidePlan:
        return self.p if primary else self.r

    @classmethod
    def of(cls, p: pa.Schema, r: pa.Schema, opts: CompareOptions, shape: QueryShape,
           volatile: set[int], rounded: bool = False) -> ChecksumPlan:
        """The plan for answers of types ``p`` and ``r`` (the same schema twice: one side's own).

        ``volatile``: positions of columns left out (derived from volatile functions).

        ``rounded``: floats are hashed rounded to the tolerance's grid (else as they are,
        which is cheaper and proves equality just as well when they are equal bit for bit).
        """
        import pyarrow as pa

        exprs: list[tuple[str, str] | None] = []
        unhashed = []
        floats = []
        for i, (tp, tr) in enumerate(zip(p.types, r.types, strict=True)):
            if i in volatile:
                exprs.append(None)
                continue
            col = f"c{i}"
            pair = (hashed_as(col, tp, tr, opts), hashed_as(col, tr, tp, opts))
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
        bits = mantissa_bits(opts) if rounded else 52

        def side(which: int) -> SidePlan:
            hashed = [e[which] for e in exprs if e is not None] or ["0"]
            row = f"hash({', '.join(hashed)})"
            parts = [exprs[i][which] for i in keys]  # type: ignore[index]
            return SidePlan(
                f"SELECT (h >> {64 - BUCKET_BITS})::INTEGER AS b, "
                f"(sum(h) % {_MOD})::UBIGINT AS s, count(*) AS n "
                f"FROM (SELECT {row} AS h FROM chunk) GROUP BY b",
                f"SELECT ({row} >> {64 - BUCKET_BITS})::INTEGER AS b FROM chunk",
                f"SELECT hash({', '.join(parts) or '0'}) AS k FROM chunk",
                tuple(floats), bits)

        hashed_floats = any(exprs[i] is not None and pa.types.is_floating(t)
                            for i, t in enumerate(p.types))
        return cls(side(0), side(1), keys, unhashed, hashed_floats and not rounded)


def hashed_as(col: str, own: pa.DataType, other: pa.DataType, opts: CompareOptions) -> str | None:
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


def mantissa_bits(opts: CompareOptions) -> int:
    """Mantissa bits kept: floats equal in those (and the exponent) are within ``rel_tol``."""
    if opts.rel_tol <= 0:
        return 52
    return min(52, max(0, math.ceil(-math.log2(opts.rel_tol))))


def rounded_bits(column: Any, bits: int) -> Any:
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


class BucketChecksums:
    """Per bucket, the row count and the sum of row hashes (mod 2**64) of the tables added."""

    def __init__(self, plan: SidePlan):
        import numpy as np

        self.plan = plan
        self.counts = np.zeros(BUCKETS, np.int64)
        self.sums = np.zeros(BUCKETS, np.uint64)
        self._con: Any = None

    def add(self, table: pa.Table) -> None:
        b, s, n = self._query(table, self.plan.checksum_sql)
        b = b.astype("int64")
        self.counts[b] += n.astype("int64")
        self.sums[b] += s.astype("uint64")

    def buckets_of(self, table: pa.Table) -> np.ndarray:
        """Each row's bucket."""
        return self._query(table, self.plan.bucket_sql)[0].astype("int64")

    def keys_of(self, table: pa.Table) -> np.ndarray:
        """The hash of each row's key columns."""
        return self._query(table, self.plan.key_sql)[0]

    def differing(self, other: BucketChecksums) -> list[int]:
        """The buckets whose count or sum differ from ``other``'s."""
        import numpy as np

        differ = (self.counts != other.counts) | (self.sums != other.sums)
        return [int(b) for b in np.flatnonzero(differ)]

    def close(self) -> None:
        """Give back the DuckDB cursor (another add opens one again)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def _query(self, table: pa.Table, sql: str) -> list[np.ndarray]:
        """The columns of ``sql`` run over ``table`` as ``chunk`` (columns c0, c1...)."""
        import pyarrow as pa

        plan = self.plan
        columns = [rounded_bits(c, plan.mantissa_bits) if i in plan.floats else c
                   for i, c in enumerate(table.columns)]
        if self._con is None:
            self._con = cursor()
        con = self._con
        con.register("chunk", pa.table(columns, names=[f"c{i}" for i in range(len(columns))]))
        try:
            answer = con.sql(sql).to_arrow_table()
        finally:
            con.unregister("chunk")
        return [c.to_numpy() for c in answer.columns]
