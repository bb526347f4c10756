"""Shuffled answers with nested columns: ordered by a row hash, proven by their values (issue 37).

Two answers holding the same rows in another order, with LIST, STRUCT and MAP
columns, were paired by DuckDB's ``EXCEPT ALL`` (0.15M rows/s per core). They
are now sorted by each row's hash and compared by Arrow's equality; the hash
only orders, so values that hash alike but differ are still told apart.
"""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest

from gateway.verify.compare import compare_tables, pairing_for
from gateway.verify.compare_stream import compare_streams
from gateway.verify.compare_types import _entries_in_key_order
from gateway.verify.row_hashes import equal_as_multisets, row_hashes
from gateway.verify.row_pairing import RowPairing
from gateway.verify.verdict import CompareOptions


def _answer(rows: int, seed: int | None = None, reversed_maps: bool = False,
            change: int | None = None) -> pa.Table:
    """``rows`` rows with a list, a struct and a map; shuffled by ``seed`` when given."""
    order = list(range(rows))
    if seed is not None:
        random.Random(seed).shuffle(order)
    entries = (lambda i: [("z", i % 5), ("k", i % 11)]) if reversed_maps else \
        (lambda i: [("k", i % 11), ("z", i % 5)])
    return pa.table({
        "id": pa.array([i % (rows // 3 or 1) for i in order], pa.int64()),
        "s": pa.array([str(i % 7) for i in order]),
        "f": pa.array([i * 1.5 for i in order]),
        "l": pa.array([None if i % 10 == 0 else [i % 100, -1 if i == change else i]
                       for i in order], pa.list_(pa.int64())),
        "st": pa.array([{"a": i % 13, "b": f"x{i % 17}"} for i in order],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "m": pa.array([entries(i) for i in order], pa.map_(pa.string(), pa.int64())),
    })


def _pairing(p: pa.Table, r: pa.Table) -> RowPairing:
    verdict, pairing, _, _ = pairing_for(p, r, None, CompareOptions(), order=False)
    assert verdict is None and pairing is not None
    return pairing


def test_shuffled_nested_answers_are_proven_equal_in_arrow():
    """Issue 37: Arrow could not sort a LIST, STRUCT or MAP column, so equal answers in
    another order went to DuckDB's EXCEPT ALL; they are now proven without DuckDB."""
    p, r = _answer(3000, seed=1), _answer(3000)
    assert _pairing(p, r)._equal_once_sorted()
    assert compare_tables(p, r).ok


def test_nested_values_differing_only_in_map_entry_order_match_when_shuffled():
    p, r = _answer(3000, seed=2, reversed_maps=True), _answer(3000)
    assert _pairing(p, r)._equal_once_sorted()
    verdict = compare_tables(p, r)
    assert verdict.ok, verdict.message


def test_a_differing_nested_value_is_found_in_shuffled_rows():
    p, r = _answer(3000, seed=3, change=1234), _answer(3000)
    assert not _pairing(p, r)._equal_once_sorted()
    verdict = compare_tables(p, r)
    assert verdict.category == "values"
    assert verdict.evidence["changed_count"] + verdict.evidence.get("missing_count", 0) >= 1
    assert "1234" in repr(verdict.evidence)


@pytest.mark.parametrize("primary, reference", [
    ([[], None, [None]], [None, [], []]),   # DuckDB hashes [], NULL and [NULL] alike
    ([[0], [0, 0]], [[0, 0], [0, 0]]),
], ids=["empty_null_and_null_element", "lengths"])
def test_values_hashing_alike_are_never_equal_by_their_hash(primary, reference):
    p = pa.table({"l": pa.array(primary, pa.list_(pa.int64()))})
    r = pa.table({"l": pa.array(reference, pa.list_(pa.int64()))})
    assert not equal_as_multisets(p, r)
    assert compare_tables(p, r).category == "values"


def test_row_hashes_take_maps_at_any_depth_as_their_entries():
    """A map in a struct in a list hashes as its entries (DuckDB reads an Arrow map far
    slower than a list of structs); equal rows hash alike, whatever their chunks."""
    maps = pa.array([[("a", 1)], [("b", 2), ("c", 3)], None], pa.map_(pa.string(), pa.int64()))
    struct = pa.StructArray.from_arrays([maps, pa.array([1, 2, 3])], ["m", "x"])
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 3], pa.int32()), struct)
    table = pa.table({"v": nested})
    whole = row_hashes(table).to_pylist()
    in_chunks = row_hashes(pa.Table.from_batches(table.to_batches(max_chunksize=1))).to_pylist()
    assert whole == in_chunks and len(set(whole)) == 2


def test_maps_already_in_key_order_are_left_as_they_are():
    """Only maps out of key order are sorted (the check costs a few ns a row, the sort
    tens); a null map's entries stay where its neighbours need them."""
    ordered = pa.MapArray.from_arrays(pa.array([0, 2, 3, 5], pa.int32()),
                                      pa.array(["a", "b", "z", "c", "d"]),
                                      pa.array([1, 2, 9, 3, 4]),
                                      mask=pa.array([False, True, False]))
    assert _entries_in_key_order(ordered) is ordered
    shuffled = pa.MapArray.from_arrays(pa.array([0, 2, 3, 5], pa.int32()),
                                       pa.array(["b", "a", "z", "d", "c"]),
                                       pa.array([2, 1, 9, 4, 3]),
                                       mask=pa.array([False, True, False]))
    assert _entries_in_key_order(shuffled).to_pylist() == ordered.to_pylist()


def _reader(sql: str) -> pa.RecordBatchReader:
    con = duckdb.connect(config={"threads": 1})
    con.execute("SET enable_progress_bar = false")
    return con.sql(sql).to_arrow_reader(20_000)


_NESTED = ("SELECT j AS id, (j % 1000)::VARCHAR AS s, (j * 1.5)::DOUBLE AS f, "
           "CASE WHEN j % 10 = 0 THEN NULL ELSE [j % 100, {third}] END AS l, "
           "{{'a': j % 13, 'b': 'x' || (j % 17)}} AS st, MAP {{{entries}}} AS m "
           "FROM (SELECT {j} AS j FROM range(200000) t(i))")


@pytest.mark.parametrize("third, expected", [("j", "match"),
                                             ("CASE WHEN j = 123457 THEN -1 ELSE j END",
                                              "values")])
def test_streamed_shuffled_nested_answers(monkeypatch, third, expected):
    """Past the cap, rows the row matcher leaves (here all: as when it does not read a
    column's type) go to groups by the hash of their keys, which is kept beside them to
    order each group: the same verdicts as in memory."""
    from gateway.verify import row_match

    monkeypatch.setattr(row_match, "unmatched_rows", lambda *args: None)
    primary = _NESTED.format(third=third, entries="'z': j % 5, 'k' || (j % 3): j % 11",
                             j="(i * 7919) % 200000")
    reference = _NESTED.format(third="j", entries="'k' || (j % 3): j % 11, 'z': j % 5", j="i")
    p, r = _reader(primary), _reader(reference)
    verdict = compare_streams(p, r, p.schema, r.schema, memory_bytes=16 << 20)
    assert verdict.category == expected, verdict.message
    assert verdict.evidence["pairing_groups"] > 1
    if expected == "values":
        # the list is a key column: the changed row is a missing and an extra one
        assert verdict.evidence["missing_count"] == verdict.evidence["extra_count"] == 1
        assert "123457" in repr(verdict.evidence)


def test_rows_duckdb_cannot_hash_are_left_to_the_pairing(monkeypatch):
    """A type DuckDB does not read from Arrow makes no proof, and no error: the pairing
    decides, as it did before rows were hashed."""
    from gateway.verify import row_hashes as module
    def unreadable(table, seed=0):
        raise duckdb.NotImplementedException("a type DuckDB does not read")

    monkeypatch.setattr(module, "row_hashes", unreadable)
    p, r = _answer(300, seed=4), _answer(300)
    assert not _pairing(p, r)._equal_once_sorted()
    assert compare_tables(p, r).ok


def test_shuffled_rows_are_put_in_one_order_by_a_hash_join_not_a_sort(monkeypatch):
    """Each reference row is given the primary row with its hash, and only the primary is
    moved: nothing is sorted when every row's hash is its own on each side."""
    import pyarrow.compute as pc

    p, r = _answer(3000, seed=5), _answer(3000)

    def no_sort(*args, **kwargs):
        raise AssertionError("rows sorted")

    monkeypatch.setattr(pc, "sort_indices", no_sort)
    assert equal_as_multisets(p, r)


@pytest.mark.parametrize("primary, reference, equal", [
    ([1, 2, 3], [3, 3, 1], False),   # a row twice where the other side has it once
    ([1, 1, 2], [2, 1, 1], True),    # rows repeated on both sides: sorted instead
    ([1, 2, 2], [1, 1, 2], False),
    ([1, 2], [2, 1, 1], False),
])
def test_the_hash_join_gives_each_primary_row_to_one_reference_row(primary, reference, equal):
    """The join proves nothing unless it is a permutation: a reference repeating a row the
    primary holds once would otherwise equal the primary taken in its order."""
    p = pa.table({"x": pa.array(primary, pa.int64()), "l": pa.array([[v] for v in primary])})
    r = pa.table({"x": pa.array(reference, pa.int64()),
                  "l": pa.array([[v] for v in reference])})
    assert equal_as_multisets(p, r) is equal
    assert compare_tables(p, r).ok is equal


@pytest.mark.parametrize("third, differing", [("j", 0),
                                              ("CASE WHEN j = 123457 THEN -1 ELSE j END", 2)])
def test_streamed_groups_equal_in_arrow_are_not_paired(monkeypatch, third, differing):
    """A group whose rows, put in one order by their routing hashes, Arrow finds equal on
    both sides is a match as it is: only the groups that differ are paired (here the two
    the changed row and its partner went to)."""
    from gateway.verify import compare_stream, row_match

    monkeypatch.setattr(row_match, "unmatched_rows", lambda *args: None)
    paired: list[int] = []
    real = compare_stream.pairing_for

    def counted(p, r, *args, **kwargs):
        if kwargs.get("order") is False:
            paired.append(p.num_rows)
        return real(p, r, *args, **kwargs)

    monkeypatch.setattr(compare_stream, "pairing_for", counted)
    primary = _NESTED.format(third=third, entries="'z': j % 5, 'k' || (j % 3): j % 11",
                             j="(i * 7919) % 200000")
    reference = _NESTED.format(third="j", entries="'k' || (j % 3): j % 11, 'z': j % 5", j="i")
    p, r = _reader(primary), _reader(reference)
    verdict = compare_streams(p, r, p.schema, r.schema, memory_bytes=16 << 20)
    assert verdict.category == ("values" if differing else "match"), verdict.message
    assert verdict.evidence["pairing_groups"] > 2
    assert len(paired) == differing
    # and of those groups, only the rows not equal to the partner their hash gives them
    assert all(rows <= 64 for rows in paired), paired


def test_rows_hashing_alike_but_differing_are_left_to_the_pairing():
    """A row is dropped from a group only when Arrow finds it equal to the row whose hash
    is its own: NULL against [] hash alike and are both left (with the run of rows
    around them, at most 64); a row without a partner is left; a hash repeated on a
    side makes no join at all."""
    from gateway.verify.pairing_groups import unproven_rows

    lists = pa.list_(pa.int64())
    order = list(range(1000))
    random.Random(7).shuffle(order)
    p = pa.table({"i": range(1000), "l": pa.array([None if i == 500 else [i]
                                                    for i in range(1000)], lists)})
    r = pa.table({"i": order, "l": pa.array([[] if i == 500 else [i] for i in order], lists)})
    hashes = (row_hashes(p), row_hashes(r))
    assert hashes[0][500] == hashes[1][order.index(500)]
    p_left, r_left = unproven_rows(p, r, hashes)
    left = sorted(p.column("i").take(p_left).to_pylist())
    assert 500 in left and len(left) <= 64
    assert sorted(r.column("i").take(r_left).to_pylist()) == left
    extra = pa.table({"i": [1000], "l": pa.array([[1000]], lists)})
    p_left, r_left = unproven_rows(p, pa.concat_tables([r, extra]),
                                   (hashes[0], pa.concat_arrays([hashes[1],
                                                                 row_hashes(extra)])))
    assert 1000 in r_left.to_pylist() and len(r_left) == len(p_left) + 1
    twice = pa.concat_tables([p, p.slice(0, 1)])
    assert unproven_rows(twice, r, (row_hashes(twice), hashes[1])) is None


def test_keys_of_one_type_on_both_sides_are_hashed_as_stored(monkeypatch):
    """Routing casts a key only when the sides' types differ (a cast copies every string
    and list): one type on both sides, equal values hash alike as they are."""
    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.sql.query_shape import QueryShape
    from gateway.verify import pairing_groups

    p, r = _answer(300, seed=6), _answer(300)
    route = pairing_groups.Route(p.schema, r.schema, p.column_names, CompareOptions(),
                                 QueryShape.of(None, "duckdb"), Nondeterminism.of(None))

    def no_cast(column, target):
        raise AssertionError(f"{column.type} cast to {target}")

    monkeypatch.setattr(pairing_groups, "_cast", no_cast)
    by_row = {}
    for table in (p, r):
        groups = route.groups_of(table, 7).to_pylist()
        for row, group in zip(table.to_pylist(), groups, strict=True):
            assert by_row.setdefault(repr(row), group) == group
    assert len(set(by_row.values())) > 1


def test_keys_of_other_types_on_each_side_are_cast_before_they_are_hashed():
    """int32 against int64, string against large_string: equal values go to one group."""
    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.sql.query_shape import QueryShape
    from gateway.verify.pairing_groups import Route

    values = list(range(200))
    p = pa.table({"i": pa.array(values, pa.int32()), "s": pa.array([str(v) for v in values])})
    r = pa.table({"i": pa.array(values, pa.int64()),
                  "s": pa.array([str(v) for v in values], pa.large_string())})
    route = Route(p.schema, r.schema, p.column_names, CompareOptions(), QueryShape.of(None, "duckdb"),
                  Nondeterminism.of(None))
    assert route.groups_of(p, 7).to_pylist() == route.groups_of(r, 7).to_pylist()
