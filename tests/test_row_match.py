"""The row matcher: shuffled streamed answers paired by their values in C (issue 37).

:mod:`gateway.verify.row_match` gives each reference row a primary row whose values equal
its own, found through a hash, and proves both; only the rows left without one are paired.
A hash never proves anything here: collisions, NaNs, NULLs that hash or look alike and
duplicates must all keep the verdicts the comparator gives in memory.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
import pytest

from gateway.verify import row_match
from gateway.verify.compare import compare_tables
from gateway.verify.compare_stream import compare_streams
from gateway.verify.verdict import CompareOptions

ROWS = 3000

_MAP = pa.map_(pa.string(), pa.int64())
_INNER = pa.struct([("a", pa.int64()), ("m", _MAP)])


def _answer(rows: int = ROWS, reversed_maps: bool = False) -> pa.Table:
    """Rows with a LIST, a LARGE_LIST, a FIXED_SIZE_LIST, a STRUCT, a MAP and a LIST of
    STRUCTs holding a MAP, with NULLs at every level (a NULL list, ``[]``, ``[NULL]``, a
    NULL struct, a struct of NULLs, a NULL map, an empty map)."""
    def entries(i: int) -> list[tuple[str, int]]:
        pairs = [("k", i % 11), ("z", i % 5)]
        return pairs[::-1] if reversed_maps else pairs

    def listed(i: int) -> list[int | None] | None:
        return None if i % 10 == 0 else [] if i % 7 == 0 else [None] if i % 11 == 0 \
            else [i % 100, i]

    def struct(i: int) -> dict[str, object] | None:
        return None if i % 13 == 0 else {"a": None, "b": None} if i % 17 == 0 \
            else {"a": i % 13, "b": f"x{i % 17}"}

    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "s": pa.array([None if i % 23 == 0 else str(i % 7) for i in range(rows)]),
        "f": pa.array([i * 1.5 for i in range(rows)]),
        "l": pa.array([listed(i) for i in range(rows)], pa.list_(pa.int64())),
        "ll": pa.array([[str(i), None] if i % 3 else [] for i in range(rows)],
                       pa.large_list(pa.large_string())),
        "fl": pa.array([[i % 4, None] if i % 5 else None for i in range(rows)],
                       pa.list_(pa.int32(), 2)),
        "st": pa.array([struct(i) for i in range(rows)],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "m": pa.array([None if i % 9 == 0 else [] if i % 19 == 0 else entries(i)
                       for i in range(rows)], _MAP),
        "ls": pa.array([[{"a": i % 3, "m": entries(i)}] if i % 4 else None
                        for i in range(rows)], pa.list_(_INNER)),
    })


def _shuffled(table: pa.Table, seed: int = 1) -> pa.Table:
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    return table.take(pa.array(order))


def _with(table: pa.Table, row: int, column: str, value: object) -> pa.Table:
    """``table`` with one cell replaced."""
    values = table.column(column).to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _streamed(p: pa.Table, r: pa.Table, options: CompareOptions | None = None) -> object:
    return compare_streams(p.to_batches(700), r.to_batches(1000), p.schema, r.schema,
                           options=options, memory_bytes=1 << 20)


def _assert_as_in_memory(p: pa.Table, r: pa.Table, options: CompareOptions | None = None):
    verdict = _streamed(p, r, options)
    in_memory = compare_tables(p, r, options=options)
    assert verdict.category == in_memory.category, (verdict.message, in_memory.message)
    for count in ("missing_count", "extra_count", "changed_count"):
        assert verdict.evidence.get(count) == in_memory.evidence.get(count), count
    return verdict


def test_shuffled_equal_nested_answers_are_matched_by_value_without_pairing():
    reference = _answer()
    primary = _shuffled(_answer(reversed_maps=True))
    verdict = _streamed(primary, reference)
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["matched_by_values"] == 2 * ROWS
    assert "pairing_groups" not in verdict.evidence  # nothing was left to pair


@pytest.mark.parametrize("column, value", [
    ("l", [5, -1]),                                  # a list's element
    ("m", [("k", 99), ("z", 1)]),                    # a value inside a map
    ("m", [("q", 6), ("z", 1)]),                     # a key of a map
    ("ls", [{"a": 1, "m": [("k", 6), ("z", 2)]}]),   # a map inside a list of structs
    ("st", {"a": 5, "b": "x6"}),                     # a struct's field
    ("ll", ["5", "5"]),                              # NULL against a string in a large list
    ("fl", [1, 1]),                                  # NULL against 1 in a fixed-size list
])
def test_one_differing_nested_value_is_left_to_the_pairing(column, value):
    reference = _answer()
    primary = _shuffled(_with(_answer(reversed_maps=True), 5, column, value))
    verdict = _assert_as_in_memory(primary, reference)
    assert verdict.category == "values"
    assert verdict.evidence["matched_by_values"] == 2 * ROWS - 2


@pytest.mark.parametrize("row, column, value", [
    (10, "l", []),                   # a NULL list against []
    (70, "l", [None]),               # [] against [NULL]
    (10, "l", [None]),               # a NULL list against [NULL]
    (13, "st", {"a": None, "b": None}),  # a NULL struct against a struct of NULLs
    (17, "st", None),                # a struct of NULLs against a NULL struct
    (9, "m", []),                    # a NULL map against an empty one
    (23, "s", ""),                   # a NULL string against ''
])
def test_nulls_at_each_level_are_not_taken_for_each_other(row, column, value):
    reference = _answer()
    primary = _shuffled(_with(_answer(), row, column, value))
    verdict = _assert_as_in_memory(primary, reference)
    assert verdict.category == "values"
    assert verdict.evidence["matched_by_values"] == 2 * ROWS - 2


def test_duplicate_rows_are_each_given_one_partner():
    base = _answer(300)
    doubled = pa.concat_tables([base, base.slice(0, 100)])
    other = pa.concat_tables([base, base.slice(100, 100)])  # as many rows, other repeats
    verdict = _assert_as_in_memory(_shuffled(doubled), other)
    assert verdict.category == "values"
    assert verdict.evidence["matched_by_values"] == 2 * 300
    same = _assert_as_in_memory(_shuffled(doubled, seed=2), doubled)
    assert same.category == "match"
    assert same.evidence["matched_by_values"] == 2 * 400


@pytest.mark.parametrize("change", [False, True])
def test_rows_whose_hashes_all_collide_are_told_apart_by_their_values(monkeypatch, change):
    monkeypatch.setattr(row_match, "HASH_MASK", 0)
    reference = _answer(400)
    primary = _answer(400, reversed_maps=True)
    if change:
        primary = _with(primary, 7, "m", [("k", 1), ("z", 3)])
    verdict = _assert_as_in_memory(_shuffled(primary), reference)
    assert verdict.category == ("values" if change else "match")
    assert verdict.evidence["matched_by_values"] > 0


def test_nans_are_left_to_the_pairing_and_signed_zeros_follow_the_option():
    def floats(zero: float) -> pa.Array:
        return pa.array([float("nan") if i % 50 == 0 else zero if i == 1 else i * 1.5
                         for i in range(500)])

    reference = _answer(500).set_column(2, "f", floats(0.0))
    primary = _shuffled(reference.set_column(2, "f", floats(-0.0)))
    verdict = _assert_as_in_memory(primary, reference)
    assert verdict.category == "match"
    # the ten rows holding a NaN, on each side, were paired
    assert verdict.evidence["matched_by_values"] == 2 * (500 - 10)
    strict = CompareOptions(signed_zero_equal=False)
    verdict = _assert_as_in_memory(primary, reference, strict)
    assert verdict.category == "values"
    assert "matched_by_values" not in verdict.evidence


def test_flat_types_are_matched_by_value():
    rows = 2000
    table = pa.table({
        "b": pa.array([i % 3 == 0 for i in range(rows)]),
        "i8": pa.array([i % 100 for i in range(rows)], pa.int8()),
        "u16": pa.array([i for i in range(rows)], pa.uint16()),
        "f32": pa.array([i / 4 for i in range(rows)], pa.float32()),
        "d": pa.array([decimal.Decimal(i) / 100 for i in range(rows)], pa.decimal128(12, 2)),
        "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(rows)]),
        "ts": pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(seconds=i) for i in range(rows)],
                       pa.timestamp("us", "UTC")),
        "bin": pa.array([bytes([i % 256]) * (i % 9) for i in range(rows)], pa.large_binary()),
        "fixed": pa.array([i.to_bytes(4, "little") for i in range(rows)], pa.binary(4)),
    })
    verdict = _assert_as_in_memory(_shuffled(table), table)
    assert verdict.category == "match"
    assert verdict.evidence["matched_by_values"] == 2 * rows
    changed = _assert_as_in_memory(_shuffled(_with(table, 3, "d", decimal.Decimal("9.99"))),
                                   table)
    assert changed.category == "values"
    assert changed.evidence["matched_by_values"] == 2 * rows - 2


def test_columns_of_another_type_on_each_side_are_paired_as_before():
    table = _answer(1000)
    narrower = table.set_column(0, "id", table.column("id").cast(pa.int32()))
    verdict = _assert_as_in_memory(_shuffled(narrower), table)
    assert verdict.category == "match"
    assert "matched_by_values" not in verdict.evidence


def test_the_rows_left_are_those_without_an_equal_partner(tmp_path):
    p = pa.record_batch({"x": pa.array([1, 2, 3, 4, 4], pa.int64()),
                         "l": pa.array([[1], None, [], [4], [4]])})
    r = pa.record_batch({"x": pa.array([4, 3, 2, 9, 1], pa.int64()),
                         "l": pa.array([[4], [], [], [9], [1]])})
    left = row_match.unmatched_rows([p.slice(0, 2), p.slice(2)], [r], [0, 1], str(tmp_path),
                                    1 << 20)
    assert left is not None
    # one of the primary's two (4, [4]) rows is the partner of the reference's one
    assert [a.to_pylist() for a in left] in ([[1, 3], [2, 3]], [[1, 4], [2, 3]])
    assert list(tmp_path.iterdir()) == []  # the routed rows' files are removed


def _maps(keys: list[object], key_type: pa.DataType, sizes: list[int],
          seed: int) -> pa.MapArray:
    """Maps of ``sizes`` entries over ``keys`` in a random order (items number the entries,
    so that the order of equal keys shows), every fifth map NULL with its entries kept."""
    rng = random.Random(seed)
    entries = [rng.choice(keys) for _ in range(sum(sizes))]
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(entries, key_type),
                                   pa.array(range(len(entries)), pa.int64()),
                                   mask=pa.array([i % 5 == 4 for i in range(len(sizes))]))


@pytest.mark.parametrize("keys, key_type", [
    (["b", "a", "", "ab", "a\x00", "é", "z" * 40, "z" * 39 + "y", "z" * 41], pa.string()),
    (["b", "a", "", "ab", "é", "z" * 40, "z" * 41], pa.large_string()),
    ([b"\xff", b"\x00", b"", b"\x7f\x80", b"\x80"], pa.binary()),
    ([-128, -1, 0, 1, 127], pa.int8()),
    ([-2**15, -1, 0, 2**15 - 1], pa.int16()),
    ([-2**31, -5, 0, 7, 2**31 - 1], pa.int32()),
    ([-2**63, -5, 0, 7, 2**63 - 1], pa.int64()),
    ([0, 1, 255], pa.uint8()),
    ([0, 1, 2**16 - 1], pa.uint16()),
    ([0, 1, 2**32 - 1], pa.uint32()),
    ([0, 1, 2**63, 2**64 - 1], pa.uint64()),
])
def test_map_entries_are_sorted_by_key_in_c_as_by_arrow(monkeypatch, keys, key_type):
    """Each map's entries sorted by key in C (``_row_match.key_order``) come out in the
    order Arrow's stable sort gives, equal keys in their order, NULL maps' entries too,
    short maps and long ones (more than 16 entries: merged), sliced arrays included."""
    from gateway.verify import _row_match, compare_types

    sizes = [0, 1, 2, 3, 17, 40, 2, 5, 100, 1, 16, 33]
    maps = _maps(keys, key_type, sizes, seed=len(keys))
    cases = [maps, maps.slice(3), maps.slice(2, 5)]
    in_c = [compare_types._entries_in_key_order(m) for m in cases]
    monkeypatch.setattr(_row_match, "key_order", lambda keys, offsets: None)
    by_arrow = [compare_types._entries_in_key_order(m) for m in cases]
    for c, a in zip(in_c, by_arrow, strict=True):
        assert c.offsets.to_pylist() == a.offsets.to_pylist()
        assert c.keys.to_pylist() == a.keys.to_pylist()
        assert c.items.to_pylist() == a.items.to_pylist()
        assert c.to_pylist() == a.to_pylist()
    assert in_c[0].keys.to_pylist() != maps.keys.to_pylist()  # there was sorting to do


def test_map_keys_of_other_types_are_left_to_arrow():
    """Keys this sort does not read (floats, whose NaNs Arrow places its own way; dates;
    structs) or that hold a NULL are not sorted in C."""
    from gateway.verify import _row_match

    offsets = pa.array([0, 2], pa.int32())
    for keys in (pa.array([2.0, 1.0]), pa.array([dt.date(2020, 1, 2), dt.date(2020, 1, 1)]),
                 pa.array([{"a": 2}, {"a": 1}]), pa.array([2, None])):
        assert _row_match.key_order(keys.__arrow_c_array__(),
                                    offsets.__arrow_c_array__()) is None
    assert _row_match.key_order(pa.array([1, 2]).__arrow_c_array__(),
                                offsets.__arrow_c_array__()) == b""


def _left(p: pa.Table, r: pa.Table, tmp_path) -> list[list[int]]:
    left = row_match.unmatched_rows(p.to_batches(), r.to_batches(), list(range(p.num_columns)),
                                    str(tmp_path), 1 << 20)
    assert left is not None
    return [a.to_pylist() for a in left]


def test_numbers_and_lengths_that_share_their_low_bytes_are_told_apart(tmp_path):
    """A number (or a length) is written as a tag saying how many of its bytes follow, then
    those bytes: values that agree in their low bytes, or in all but the tag, never match,
    and each equals itself, at the edges of each width."""
    ints = [0, 1, -1, 255, 256, -256, 2**16, 2**24 + 1, 2**32, -(2**31), 2**40 + 255,
            2**56, 2**62, 2**63 - 1, -(2**63)]
    uints = [0, 1, 255, 256, 2**16, 2**32, 2**56, 2**63, 2**64 - 1, 2**64 - 256]
    strings = ["", "a", "a" * 38, "a" * 39, "a" * 40, "a" * 255, "a" * 256, "b" * 1000]
    lists = [[], [0], [0] * 255, [0] * 256, [256], [0, 0]]
    for values, type_ in ((ints, pa.int64()), (uints, pa.uint64()), (strings, pa.string()),
                          (lists, pa.list_(pa.int64()))):
        table = pa.table({"v": pa.array(values, type_)})
        # each value against itself, in another order: all matched
        assert _left(table.take(pa.array(range(len(values) - 1, -1, -1))), table,
                     tmp_path) == [[], []]
        # the values at even places against those at odd places (their neighbours): none
        evens = pa.table({"v": pa.array(values[0::2], type_)})
        odds = pa.table({"v": pa.array(values[1::2], type_)})
        assert _left(evens, odds, tmp_path) == [list(range(evens.num_rows)),
                                                list(range(odds.num_rows))]
    # in a struct, beside other fields: a long string's bytes then a number
    struct = pa.struct([("s", pa.string()), ("i", pa.int64())])
    a = pa.table({"v": pa.array([{"s": "x" * 300, "i": 256}, {"s": "x" * 300, "i": 1}], struct)})
    b = pa.table({"v": pa.array([{"s": "x" * 300, "i": 1}, {"s": "x" * 300, "i": 2}], struct)})
    assert _left(a, b, tmp_path) == [[0], [1]]


def test_rows_of_a_hash_are_found_after_an_earlier_hash_of_their_slot_is_used_up(monkeypatch):
    """Four hashes that fall in one slot of the range's table (a mask keeping only bits 10
    and 11): each takes the next free slot, and a hash whose rows are all given out keeps
    its slot, so the hashes after it are still found."""
    monkeypatch.setattr(row_match, "HASH_MASK", 0xC00)
    reference = _answer(200)
    primary = _shuffled(_answer(200, reversed_maps=True), seed=3)
    verdict = _assert_as_in_memory(primary, reference)
    assert verdict.category == "match"
    assert verdict.evidence["matched_by_values"] == 2 * 200


def _few_values(rows: int, changed: int | None = None) -> pa.RecordBatch:
    """``rows`` rows of three distinct values (a number and a list), in another order than
    :func:`_few_values_sorted`; ``changed``: that row holds a fourth value."""
    keys = [(i * 7919) % 3 for i in range(rows)]
    if changed is not None:
        keys[changed] = 9
    return pa.record_batch({"k": pa.array(keys, pa.int64()),
                            "l": pa.array([[k, 1] for k in keys], pa.list_(pa.int64()))})


def test_a_range_of_few_distinct_values_is_counted_not_held(tmp_path):
    """Rows of one value share a hash, so 3 values put every row in 3 ranges: those are
    read as streams and counted (each value held once), with the same rows left over."""
    primary = _few_values(30_000, changed=12_345)
    reference = pa.record_batch({"k": pa.array(sorted(_few_values(30_000)["k"].to_pylist())),
                                 "l": pa.array([[k, 1] for k in sorted(
                                     _few_values(30_000)["k"].to_pylist())])})
    reference = reference.cast(primary.schema)
    left = row_match.unmatched_rows([primary], [reference], [0, 1], str(tmp_path), 4096)
    assert left is not None
    p_left, r_left = (a.to_pylist() for a in left)
    assert p_left == [12_345]  # the changed row, and only it
    assert len(r_left) == 1 and reference["k"][r_left[0]].as_py() == \
        _few_values(30_000)["k"][12_345].as_py()  # one row of the value it no longer holds
    assert list(tmp_path.iterdir()) == []


def test_a_range_of_too_many_distinct_values_to_count_is_left_to_the_pairing(monkeypatch,
                                                                             tmp_path):
    monkeypatch.setattr(row_match, "HASH_MASK", 0)  # every row in one range
    base = _answer(2000)
    left = row_match.unmatched_rows(_shuffled(base).to_batches(), base.to_batches(),
                                    list(range(base.num_columns)), str(tmp_path), 4096)
    assert left is not None
    assert [len(a) for a in left] == [2000, 2000]  # unproven: the pairing decides
    assert list(tmp_path.iterdir()) == []
    verdict = _assert_as_in_memory(_shuffled(base), base)
    assert verdict.category == "match"


def test_shuffled_answers_of_few_distinct_rows_keep_within_the_memory_bound():
    """2M rows of 3 values in another order: every record in 3 ranges. Held whole, those
    took 16 bytes a row a side (64 MB here; 687 MB of RssAnon for 20M rows under a 64 MiB
    cap); counted, a few KB. Measured in a process of its own (ru_maxrss only rises)."""
    code = """
import resource, sys, tempfile
import pyarrow as pa
from gateway.verify import row_match
rows = 2_000_000
keys = pa.array([0, 1, 2] * (rows // 3 + 1), pa.int64()).slice(0, rows)
primary = pa.record_batch({"k": keys})
reference = pa.record_batch({"k": keys.sort()})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with tempfile.TemporaryDirectory() as folder:
    left = row_match.unmatched_rows([primary], [reference], [0], folder, 1 << 20)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert left is not None and [len(a) for a in left] == [0, 0], left
print((after - before) // 1024)
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 16, f"peak RSS grew {done.stdout.strip()} MB"
