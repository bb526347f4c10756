"""A hash of every row of an Arrow table, to route rows and to put two answers in one order.

A hash here never decides that two rows are equal: it sends a row to a group
(:mod:`gateway.verify.pairing_groups`), or orders the rows of two answers the same way
so that Arrow's equality can then compare them value by value
(:func:`equal_as_multisets`). Rows are hashed by DuckDB's ``hash()`` (vectorized,
at every nesting level), with each map given as the list of its entries: DuckDB
reads an Arrow map about 25 times slower than a list of structs, and checks
its keys on the way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def row_hashes(table: pa.Table, seed: int = 0) -> pa.Array:
    """Each row's hash over every column of ``table`` (uint64); ``seed`` is hashed in too.

    Equal rows hash alike; so may some unequal ones (DuckDB's ``hash()`` takes ``[]``,
    NULL and ``[NULL]`` alike).
    """
    import pyarrow as pa

    from gateway.verify.workspace import connection

    hashable = pa.table([_maps_as_entries(c) for c in table.columns],
                        names=[f"h{i}" for i in range(table.num_columns)])
    con = connection(False)
    try:
        con.register("hashed_rows", hashable)
        extra = f", {seed}" if seed else ""
        hashed = con.sql(f"SELECT hash({', '.join(hashable.column_names)}{extra}) "
                         "FROM hashed_rows").to_arrow_table()
    finally:
        con.close()
    return hashed.column(0).combine_chunks().cast(pa.uint64())


def equal_as_multisets(p: pa.Table, r: pa.Table,
                       hashes: tuple[Any, Any] | None = None) -> bool:
    """True when ``p`` and ``r`` (one schema) hold the same rows, each as often, in any order.

    Both are sorted by their rows' hashes, then compared by Arrow's equality, value by
    value at every nesting level: the hash only orders. ``hashes``: each side's rows'
    hashes on some of their columns, already known (a group's route,
    :mod:`gateway.verify.pairing_groups`), and rows tied on them sorted by the columns Arrow
    sorts as well; else each row's hash on every column. False does not mean that
    they differ: rows tied on every sort key in another order on each side (a
    collision, or NULL against ``[]``) are not told apart here.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if p.num_rows != r.num_rows or p.schema != r.schema:
        return False
    import duckdb

    keys = [("__hash", "ascending")]
    if hashes is None:
        try:
            hashes = (row_hashes(p), row_hashes(r))
        except (duckdb.Error, pa.ArrowException):
            return False  # a type DuckDB does not read from Arrow: the pairing decides
    else:
        keys += [(f.name, "ascending") for f in p.schema if not pa.types.is_nested(f.type)]
    matched = matched_by_hash(p, r, hashes)
    if matched is not None:
        return matched
    ordered = []
    for table, hashed in zip((p, r), hashes, strict=True):
        # (a table of one chunk takes rows several times faster than one of many)
        table = table.combine_chunks()
        order = pc.sort_indices(table.append_column("__hash", hashed), sort_keys=keys)
        ordered.append(table.take(order))
    return bool(ordered[0].equals(ordered[1]))


def matched_by_hash(p: pa.Table, r: pa.Table, hashes: tuple[Any, Any]) -> bool | None:
    """Whether ``p``'s rows, put in ``r``'s order, equal ``r`` row for row; None when the
    hashes do not give one order (hashes repeated on a side, or missing from ``p``).

    Each of ``r``'s rows is given the row of ``p`` whose hash is its own (a hash join);
    when that is a permutation of ``p``'s rows, ``p`` taken in it and ``r`` as it is are
    compared by Arrow's equality: equal, they are the same rows, whatever the hashes
    (a permutation of ``p`` equal to ``r``); unequal, sorting both by those hashes would
    put the rows in that same order. Only ``p`` is moved, and nothing is sorted.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if p.num_rows != r.num_rows or p.schema != r.schema:
        return False
    p_hashes, r_hashes = (h.combine_chunks() if isinstance(h, pa.ChunkedArray) else h
                          for h in hashes)
    position = pc.index_in(r_hashes, value_set=p_hashes)
    if position.null_count or len(pc.unique(position)) != p.num_rows:
        return None
    # (a table of one chunk takes rows several times faster than one of many)
    return bool(p.combine_chunks().take(position).equals(r))


def _maps_as_entries(column: Any) -> Any:
    """``column`` with every map in it, at any depth, the large list of its entries."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from gateway.verify.compare_types import _holds_map

    if not _holds_map(column.type):
        return column
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_maps_as_entries(c) for c in column.chunks],
                                _entries_type(column.type))
    mask = column.is_null() if column.null_count else None
    t = column.type
    if pa.types.is_struct(t):
        fields = [_maps_as_entries(column.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(fields, names=[f.name for f in t], mask=mask)
    if pa.types.is_fixed_size_list(t):
        column, t = column.cast(pa.large_list(t.value_type)), pa.large_list(t.value_type)
    first, last = column.offsets[0].as_py(), column.offsets[-1].as_py()
    offsets = pc.subtract(column.offsets, first).cast(pa.int64())
    if pa.types.is_map(t):
        keys = _maps_as_entries(column.keys.slice(first, last - first))
        items = _maps_as_entries(column.items.slice(first, last - first))
        values = pa.StructArray.from_arrays([keys, items], names=["key", "value"])
    else:
        values = _maps_as_entries(column.values.slice(first, last - first))
    return pa.LargeListArray.from_arrays(offsets, values, mask=mask)


def _entries_type(t: pa.DataType) -> pa.DataType:
    """The type :func:`_maps_as_entries` gives a column of type ``t``."""
    import pyarrow as pa

    from gateway.verify.compare_types import _holds_map

    if not _holds_map(t):
        return t
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_entries_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.large_list(pa.struct([("key", _entries_type(t.key_type)),
                                        ("value", _entries_type(t.item_type))]))
    return pa.large_list(_entries_type(t.value_type))
