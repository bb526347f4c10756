"""Order-insensitive checksums of an answer's rows that prove equality, and find what differs.

Used by :mod:`gateway.compare_stream`. A :class:`ChecksumPlan` says how each
column of a pair of answers is hashed so that equal hashes mean values the
comparator's equivalences take as equal (the rules are in docs/shadow.md,
"What a checksum proves"). :class:`RowHashes` keeps one side's row count and
sum of row hashes (mod 2**64) as tables are added, in DuckDB (vectorised, one
thread): two equal answers cost that one pass. When the sums differ, the
rows are hashed again and summed per bucket, each row's bucket stored
(:meth:`RowHashes.store`), with as many buckets as the answer needs for a
few differing rows to touch few rows (:func:`bucket_bits`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.compare import CompareOptions, _common_type, _kind, contains_float

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gateway.query_shape import QueryShape

#: the fewest and the most buckets (the top bits of the row hash) an answer is split into
MIN_BUCKET_BITS = 12
MAX_BUCKET_BITS = 22
#: about this many rows per bucket, where the cap allows
ROWS_PER_BUCKET = 64
#: row hashes read back from a stored file at once
_READ_ROWS = 1 << 20
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

    #: the sum of the row hashes mod 2**64 and the row count
    total_sql: str
    #: each row's hash
    hash_sql: str
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
                f"SELECT (sum({row}) % {_MOD})::UBIGINT AS s, count(*) AS n FROM chunk",
                f"SELECT {row} AS h FROM chunk",
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


def bucket_bits(rows: int, memory_bytes: int) -> int:
    """How many top bits of the row hash make the buckets of answers of up to ``rows`` rows.

    About :data:`ROWS_PER_BUCKET` rows a bucket, so that a few differing rows make
    few rows to pair; the two sides' bucket sums and counts (16 bytes a bucket)
    take at most an eighth of ``memory_bytes``.
    """
    wanted = max(1, math.ceil(rows / ROWS_PER_BUCKET)).bit_length()
    allowed = max(1, memory_bytes // (8 * 2 * 16)).bit_length() - 1
    return max(MIN_BUCKET_BITS, min(MAX_BUCKET_BITS, wanted, allowed))


class RowHashes:
    """One side's row count and sum of row hashes (mod 2**64) under a plan; by bucket on demand.

    ``path``: the file :meth:`store` writes each row's bucket to, in the order
    the rows were added.
    """

    def __init__(self, plan: SidePlan, path: str):
        self.plan = plan
        self.path = path
        self.count = 0
        self.sum = 0
        #: :meth:`store` ran: each row's bucket is in ``path``, the buckets' sums below
        self.stored = False
        self.bits = 0
        self.counts: np.ndarray | None = None
        self.sums: np.ndarray | None = None
        self._con: Any = None

    def add(self, table: pa.Table) -> None:
        """Add ``table``'s rows to the count and the sum."""
        s, n = self._query(table, self.plan.total_sql)
        if len(n) and int(n[0]):
            self.count += int(n[0])
            self.sum = (self.sum + int(s[0])) % _MOD

    def same_total(self, other: RowHashes) -> bool:
        return (self.count, self.sum) == (other.count, other.sum)

    def store(self, tables: Iterator[pa.Table], bits: int) -> None:
        """Hash every row of ``tables`` (the whole answer, again): the count and the sum
        anew, the row count and hash sum of each bucket (the top ``bits`` bits of the
        row hash), and each row's bucket in ``path`` (the hash's top 32 bits, 4 bytes a row)."""
        import numpy as np

        self.count, self.sum, self.stored, self.bits = 0, 0, False, bits
        self.counts = np.zeros(1 << bits, np.int64)
        self.sums = np.zeros(1 << bits, np.uint64)
        shift = np.uint32(32 - bits)
        with open(self.path, "wb") as f:
            for table in tables:
                h = self.hashes_of(table)
                top = (h >> np.uint64(32)).astype(np.uint32)
                f.write(top.data)  # (ndarray.tofile hides a full disk's ENOSPC)
                b = top >> shift
                np.add.at(self.sums, b, h)
                self.counts += np.bincount(b, minlength=1 << bits)
                self.count += len(h)
                self.sum = (self.sum + int(h.sum(dtype=np.uint64))) % _MOD
        self.stored = True
        self.close()

    def hashes_of(self, table: pa.Table) -> np.ndarray:
        """Each row's hash (uint64)."""
        import numpy as np

        return np.ascontiguousarray(self._query(table, self.plan.hash_sql)[0], dtype=np.uint64)

    def stored_buckets(self) -> Iterator[np.ndarray]:
        """Each row's bucket (see :meth:`store`), in the order the rows were added, a million
        at a time (read, not mapped: mapped pages would count against the process's memory)."""
        import numpy as np

        assert self.stored
        shift = np.uint32(32 - self.bits)
        with open(self.path, "rb") as f:
            while True:
                top = np.fromfile(f, np.uint32, _READ_ROWS)
                if not len(top):
                    return
                yield top >> shift

    def keys_of(self, table: pa.Table) -> np.ndarray:
        """The hash of each row's key columns."""
        return self._query(table, self.plan.key_sql)[0]

    def close(self) -> None:
        """Give back the DuckDB cursor (another call opens one again)."""
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
