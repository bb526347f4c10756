"""The rows a streaming comparison could not prove in place, split into groups small enough to pair.

:class:`Route` sends a row to a group by the hash of some of its columns in their
common types; :func:`route_to_files` writes each group of both sides to files of
its own, reading every side once. The hash only routes: which rows are equal is
decided by their values, in the group.

A group is routed by the row's key columns, so that a row whose measures changed
meets its partner. When keys have few distinct values, one group can hold far
more than its share: such a group is split again by every column
(:func:`left_in_parts`), and a part whose two sides, each sorted on every column,
are equal row for row drops out (the comparator's own proof of a match); a part
that differs is split again, down to a few hundred rows. Only what is left of
the parts, together, is paired on keys, in full (exact copies split between
parts cancel there): the verdict is the same as the whole group's.

Within a group, :func:`unproven_rows` gives each reference row the primary row
with its routing hash and leaves out the pairs Arrow finds equal: only the rest
needs the pairing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from gateway.verify.compare import pairing_for
from gateway.verify.compare_types import _cast, compared_type, contains_float
from gateway.verify.verdict import CompareOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.sql.query_shape import QueryShape


class Route:
    """Which group a row goes to: the hash of its key columns in their common types.

    Keys are the pairing's (GROUP BY keys, else the columns that are neither
    floats nor decimals) without those holding floats; ``every_column``: every
    column that has a common type instead (the second level); ``seed``: hashed
    with this number too, so that a level does not repeat the one above's split.
    """

    def __init__(self, p: pa.Schema, r: pa.Schema, names: list[str], opts: CompareOptions,
                 shape: QueryShape, found: Nondeterminism, every_column: bool = False,
                 seed: int = 0):
        import pyarrow as pa

        volatile = set(found.columns_in(names))
        types = [(p.field(i).type, r.field(i).type,
                  compared_type(p.field(i).type, r.field(i).type, opts)) for i in range(len(p))]
        if every_column:
            self.keys = [(i, c) for i, (_, _, c) in enumerate(types)
                         if c is not None and i not in volatile]
        else:
            if shape.group_keys and len(shape.group_keys) == len(types):
                keys = [i for i, k in enumerate(shape.group_keys) if k]
            else:
                keys = [i for i, (_, _, c) in enumerate(types)
                        if c is not None and not pa.types.is_decimal(c)]
            self.keys = [(i, types[i][2]) for i in keys
                         if i not in volatile and types[i][2] is not None
                         and not contains_float(types[i][0]) and not contains_float(types[i][1])]
        self.key_names = [names[i] for i, _ in self.keys]
        #: the keys hashed as stored: one type on both sides, which DuckDB reads as it is
        #: (equal values then hash alike without a cast to the common type)
        self._as_stored = {i for i, _ in self.keys
                           if p.field(i).type == r.field(i).type
                           and _read_as_stored(p.field(i).type)}
        self._seed = seed

    def groups_of(self, table: pa.Table, groups: int) -> pa.Array:
        """Each row's group, of ``groups`` (uint64)."""
        import pyarrow as pa

        if groups == 1:
            return pa.repeat(pa.scalar(0, pa.uint64()), table.num_rows)
        return self.hashes_and_groups(table, groups)[1]

    def hashes_and_groups(self, table: pa.Table, groups: int) -> tuple[pa.Array | None, pa.Array]:
        """Each row's hash on the route's columns (None without any) and its group."""
        import pyarrow as pa

        if not self.keys:
            return None, pa.repeat(pa.scalar(0, pa.uint64()), table.num_rows)
        from gateway.verify.row_hashes import row_hashes

        keys = pa.table([table.column(i) if i in self._as_stored else _cast(table.column(i), t)
                         for i, t in self.keys],
                        names=[f"k{n}" for n in range(len(self.keys))])
        hashes = row_hashes(keys, self._seed)
        if groups == 1:
            return hashes, pa.repeat(pa.scalar(0, pa.uint64()), table.num_rows)
        return hashes, group_of_hash(hashes, groups)


def _read_as_stored(t: pa.DataType) -> bool:
    """True for the types a row is hashed in as stored: numbers, booleans, strings, bytes,
    dates and times, and lists, structs and maps of them (a stored map's entries are in
    key order already: :mod:`gateway.verify.spilled_answer`)."""
    import pyarrow as pa

    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _read_as_stored(t.value_type)
    if pa.types.is_map(t):
        return _read_as_stored(t.key_type) and _read_as_stored(t.item_type)
    if pa.types.is_struct(t):
        return all(_read_as_stored(f.type) for f in t)
    return any(check(t) for check in (
        pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string,
        pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
        pa.types.is_date, pa.types.is_timestamp, pa.types.is_time))


#: the column :func:`route_to_files` adds with ``with_hashes``: each row's hash on the route's
#: columns, which orders a group's rows for :func:`gateway.verify.row_hashes.equal_as_multisets`
ROW_HASH = "__arrowgate_row_hash"


def group_of_hash(hashes: pa.Array, groups: int) -> pa.Array:
    """``hashes`` modulo ``groups`` (uint64), in Arrow's integer kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    quotient = pc.divide(hashes, pa.scalar(groups, pa.uint64()))
    return pc.subtract(hashes, pc.multiply(quotient, pa.scalar(groups, pa.uint64())))


def without_row_hash(table: pa.Table) -> tuple[pa.Table, pa.ChunkedArray | None]:
    """``table`` without :data:`ROW_HASH`, and that column (None when it has none)."""
    if ROW_HASH not in table.column_names:
        return table, None
    return table.drop_columns([ROW_HASH]), table.column(ROW_HASH)


def in_groups(table: pa.Table, group: pa.Array, groups: int) -> tuple[pa.Table, list[int]]:
    """``table``'s rows ordered by ``group`` (each row's group, of ``groups``), keeping their
    order within a group, and where each group starts: group ``g`` is rows
    ``bounds[g]`` to ``bounds[g + 1]``."""
    import pyarrow.compute as pc

    counts = [0] * groups
    found = pc.value_counts(group)
    for g, n in zip(found.field("values").to_pylist(), found.field("counts").to_pylist(),
                    strict=True):
        counts[g] = n
    # (a table of one chunk takes rows several times faster than one of many)
    return table.combine_chunks().take(pc.sort_indices(group)), list(accumulate(counts, initial=0))


#: bytes buffered per group file while routing
_WRITE_BUFFER = 1 << 16


def route_to_files(sides: list[tuple[Iterator[pa.Table], pa.Schema]], route: Route,
                   groups: int, folder: str, prefix: str,
                   with_hashes: bool = False) -> list[list[str]]:
    """Each side's rows (read once, a table at a time) written to ``groups`` files by
    ``route``: the paths, by group then side. ``with_hashes``: the rows' hashes are
    written beside them, as column :data:`ROW_HASH` (when the route has columns)."""
    import pyarrow as pa

    paths = [[os.path.join(folder, f"{prefix}{g}-{n}.arrow") for n in range(len(sides))]
             for g in range(groups)]
    hashed = with_hashes and bool(route.keys)
    for n, (tables, schema) in enumerate(sides):
        if hashed:
            schema = schema.append(pa.field(ROW_HASH, pa.uint64()))
        # buffered: a group's slice of a table is a message of a few buffers per column,
        # each a write of its own to an unbuffered file
        files = [pa.output_stream(paths[g][n], buffer_size=_WRITE_BUFFER)
                 for g in range(groups)]
        writers = [pa.ipc.new_stream(f, schema) for f in files]
        try:
            for table in tables:
                hashes, group = route.hashes_and_groups(table, groups)
                if hashed:
                    table = table.append_column(ROW_HASH, hashes)
                table, bounds = in_groups(table, group, groups)
                for g in range(groups):
                    if bounds[g + 1] > bounds[g]:
                        writers[g].write_table(table.slice(bounds[g], bounds[g + 1] - bounds[g]))
        finally:
            for w, f in zip(writers, files, strict=True):
                w.close()
                f.close()
    return paths


def unproven_rows(p: pa.Table, r: pa.Table, hashes: tuple[Any, Any]
                  ) -> tuple[pa.Array, pa.Array] | None:
    """The rows of ``p`` and of ``r`` (their indices) not proven equal to a partner on the
    other side; None when a hash repeats on either side.

    Each of ``r``'s rows is given the row of ``p`` with its hash (a hash join, one to
    one when no hash repeats); the pairs are compared by Arrow's equality a run at a
    time, halved while few runs differ (:func:`gateway.verify.spilled_answer._differing_runs`),
    so a pair drops out only when its values are equal. ``p`` and ``r`` are in types in
    which Arrow's equality is the comparator's.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from gateway.verify.compare_types import _counting
    from gateway.verify.spilled_answer import _differing_runs

    p_hashes, r_hashes = (h.combine_chunks() if isinstance(h, pa.ChunkedArray) else h
                          for h in hashes)
    if len(pc.unique(p_hashes)) != len(p_hashes) or len(pc.unique(r_hashes)) != len(r_hashes):
        return None
    position = pc.index_in(r_hashes, value_set=p_hashes)
    found = position.is_valid()
    r_found = pc.indices_nonzero(found)
    p_found = position.filter(found).cast(pa.int64())
    runs = _differing_runs(p.combine_chunks().take(p_found), r.combine_chunks().take(r_found))
    differing = pa.concat_arrays([pa.array([], pa.int64())] + [
        pc.add(_counting(stop - start), start)
        for start, stop in runs])
    proven_p = pc.filter(p_found, pc.invert(pc.is_in(_counting(len(p_found)),
                                                     value_set=differing)))
    p_left = pc.indices_nonzero(pc.invert(pc.is_in(_counting(p.num_rows), value_set=proven_p)))
    r_left = pa.concat_arrays([pc.indices_nonzero(pc.invert(found)).cast(pa.int64()),
                               r_found.cast(pa.int64()).take(differing)])
    return p_left.cast(pa.int64()), r_left


def read_and_remove(path: str) -> pa.Table:
    """The table in an Arrow IPC stream file, which is then removed."""
    import pyarrow as pa

    # mapped, not copied: the file's pages are the page cache's, not the process's
    with pa.memory_map(path) as f:
        table = pa.ipc.open_stream(f).read_all()
    os.remove(path)
    return table


def read_in_tables(path: str, rows: int) -> Iterator[pa.Table]:
    """The rows of an Arrow IPC stream file, ``rows`` at a time."""
    import pyarrow as pa

    held: list[pa.RecordBatch] = []
    count = 0
    with pa.OSFile(path) as f, pa.ipc.open_stream(f) as reader:
        for batch in reader:
            if ROW_HASH in batch.schema.names:
                batch = batch.drop_columns([ROW_HASH])
            held.append(batch)
            count += batch.num_rows
            if count >= rows:
                yield pa.Table.from_batches(held)
                held, count = [], 0
    if held:
        yield pa.Table.from_batches(held)


#: a part that differs is split again while it holds more rows than this...
_LEAST_PART_ROWS = 256
#: ...into this many parts, at most this many times over
_SPLIT = 16
_MAX_DEPTH = 4


def left_in_parts(paths: list[str], parts: int, rows: int, names: list[str], sql: str | None,
                  opts: CompareOptions, shape: QueryShape, found: Nondeterminism,
                  folder: str, prefix: str) -> tuple[pa.Table, pa.Table] | None:
    """One group's rows (files ``paths``, one per side, read ``rows`` at a time) without the
    parts proven equal: the
    group is split into ``parts`` parts by every column; a part whose two sides, each
    sorted on every column, are equal row for row (the comparator's own proof,
    :meth:`RowPairing.judge`) drops out, and one that is not is split again (another
    seed), down to a few hundred rows. None when no part can be proven so (the
    comparison is not exact, or Arrow cannot sort a column).

    Holds one part at a time, and the rows left so far.
    """
    import pyarrow as pa

    if not (opts.nan_equals_nan and opts.signed_zero_equal):
        return None
    schemas = []
    for path in paths:
        with pa.OSFile(path) as f, pa.ipc.open_stream(f) as reader:
            schema = reader.schema
            if ROW_HASH in schema.names:
                schema = schema.remove(schema.get_field_index(ROW_HASH))
            schemas.append(schema)

    def route(seed: int) -> Route:
        return Route(schemas[0], schemas[1], names, opts, shape, found, every_column=True,
                     seed=seed)

    part_paths = route_to_files([(read_in_tables(path, rows), schema)
                                 for path, schema in zip(paths, schemas, strict=True)],
                                route(1), parts, folder, prefix)
    left: tuple[list[pa.Table], list[pa.Table]] = ([], [])
    try:
        for part in range(parts):
            p, r = (read_and_remove(path) for path in part_paths[part])
            if not _leave(p, r, sql, opts, route, 2, left):
                return None
    finally:
        for part_files in part_paths:
            for path in part_files:
                if os.path.exists(path):
                    os.remove(path)
    return tuple(pa.concat_tables(tables) if tables else pa.table(
        [pa.nulls(0, f.type) for f in schema], schema=schema)
        for tables, schema in zip(left, schemas, strict=True))


def _leave(p: pa.Table, r: pa.Table, sql: str | None, opts: CompareOptions,
           route: Callable[[int], Route], seed: int,
           left: tuple[list[pa.Table], list[pa.Table]]) -> bool:
    """Add to ``left`` what of one part is not proven equal; False when nothing can be."""
    verdict, pairing, _, _ = pairing_for(p, r, sql, opts, order=False)
    if verdict is not None or pairing is None or \
            pairing.p.schema.types != pairing.r.schema.types:
        return False
    if pairing.p.equals(pairing.r) or pairing._equal_once_sorted():
        return True
    if p.num_rows + r.num_rows <= _LEAST_PART_ROWS or seed > _MAX_DEPTH:
        left[0].append(p)
        left[1].append(r)
        return True
    splitter = route(seed)
    ordered = [in_groups(table, splitter.groups_of(table, _SPLIT), _SPLIT) for table in (p, r)]
    sizes = [[b[g + 1] - b[g] for g in range(_SPLIT)] for _, b in ordered]
    whole = [s.index(max(s)) for s, (_, b) in zip(sizes, ordered, strict=True) if max(s) == b[-1]]
    if len(whole) == 2 and whole[0] == whole[1]:  # every row alike on the columns routed
        left[0].append(p)
        left[1].append(r)
        return True
    for g in range(_SPLIT):
        sub = [t.slice(b[g], b[g + 1] - b[g]) for t, b in ordered]
        if not _leave(sub[0], sub[1], sql, opts, route, seed + 1, left):
            return False
    return True
