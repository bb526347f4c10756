"""Rows of two answers paired by their values, in C, before any is left to the pairing.

The streaming comparison's first step for answers in different orders
(:mod:`gateway.verify.compare_stream`): the C kernel ``_row_match`` reads both sides'
batches where they are (Arrow's C data interface: memory-mapped spills are not copied),
writes each row as bytes that two rows share exactly when their values are equal, with its
hash, to the file of its range of hashes (both sides read once), then, a range at a time,
gives each reference row the first primary row of its hash with the same bytes and proves
both. The hash only offers candidates; no row is proven without its values. What is left
without an equal partner (changed rows, floats within a tolerance, NaNs) goes to the
pairing, which decides as before: rows equal by value cancel there all the same.

The kernel's equality is never looser than the comparator's: NULL equals NULL, a row
holding a NaN is never proven, -0.0 equals 0.0 (so it is asked only with
``signed_zero_equal``), all else byte for byte, maps as stored (their entries in key
order, :mod:`gateway.verify.spilled_answer`). It is asked only where each column has one
type on both sides (:meth:`gateway.verify.compare_stream.StreamingComparison._unmatched`).

Memory: one bit a row a side (which rows are proven), one range of both sides at a time
(``part_bytes`` each, about), and 64 KiB a range while the rows are written. Rows of one
value share a hash, so a range can hold far more than its share (an answer of a few
distinct rows in another order: every record in a handful of ranges); a range of more than
twice ``part_bytes`` a side is not held but read as a stream, its rows counted by value
(each distinct value held once, within the same bound; past it, the range's rows are left
to the pairing).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gateway.verify import _row_match

if TYPE_CHECKING:
    import pyarrow as pa

#: every row's hash is ANDed with this before it is used: a test sets it to 0 to make every
#: row of both sides collide (the values must still decide)
HASH_MASK = (1 << 64) - 1
#: the most files a side's rows are written to at once (open files, write buffers)
_MAX_PARTS = 512


def unmatched_rows(primary: list[pa.RecordBatch], reference: list[pa.RecordBatch],
                   columns: list[int], folder: str, part_bytes: int
                   ) -> tuple[pa.Array, pa.Array] | None:
    """The rows of each side (indices over its batches in order, int64) left without an
    equal partner on the other side, comparing ``columns`` (indices); None when a column's
    type is one the kernel does not read (a union, a view, a dictionary, a half float).

    ``primary`` and ``reference`` hold batches of one schema each, the two alike on
    ``columns``; the rows go through files in ``folder``, about ``part_bytes`` a side each,
    removed before this returns.
    """
    import pyarrow as pa

    if not primary or not reference:
        return None
    size = max(sum(b.nbytes for b in side) for side in (primary, reference))
    parts = max(1, min(_MAX_PARTS, math.ceil(size / max(1, part_bytes))))
    left = _row_match.prove([b.__arrow_c_array__() for b in primary],
                            [b.__arrow_c_array__() for b in reference], tuple(columns),
                            folder, parts, HASH_MASK, 2 * max(1, part_bytes))
    if left is None:
        return None
    p_left, r_left = (pa.Array.from_buffers(pa.int64(), len(b) // 8, [None, pa.py_buffer(b)])
                      for b in left)
    return p_left, r_left
