"""The streaming comparison agrees with the in-memory one, spills within its cap, and cleans up."""

from __future__ import annotations

import datetime as dt
import os

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import GatewayError
from gateway.verify.compare import compare_tables
from gateway.verify.compare_stream import StreamingComparison, compare_streams
from gateway.verify.verdict import CompareOptions
from tests.test_compare_properties import FAST, ROWS, table

#: so small that every side spills from its first batch and rows are paired in many groups
TINY = 4096


def streamed(p: pa.Table, r: pa.Table, sql: str | None = None, memory: int = TINY,
             options: CompareOptions | None = None, batch: int = 7):
    return compare_streams(p.to_batches(batch), r.to_batches(batch), p.schema, r.schema,
                           sql=sql, options=options, memory_bytes=memory)


def assert_agree(p: pa.Table, r: pa.Table, sql: str | None = None,
                 options: CompareOptions | None = None) -> None:
    memory = compare_tables(p, r, sql=sql, options=options)
    for cap in (TINY, 1 << 30):
        verdict = streamed(p, r, sql, cap, options)
        assert verdict.category == memory.category, (cap, verdict.message, memory.message)
        for count in ("missing_count", "extra_count", "changed_count"):
            assert verdict.evidence.get(count) == memory.evidence.get(count), (cap, count)
        assert verdict.evidence["compared"] == "streamed"


def ints(values, t=None):
    return pa.table({"k": pa.array(range(len(values)), pa.int64()),
                     "v": pa.array(values, t or pa.int64())})


CASES = {
    "same rows in another order and other types": (
        pa.table({"i": pa.array([3, 1, 2], pa.int32()), "s": pa.array(["c", "a", "b"])}),
        pa.table({"i": pa.array([1, 2, 3], pa.int64()),
                  "s": pa.array(["a", "b", "c"], pa.large_string())}), None),
    "a float within the tolerance": (ints([1.0, 2.0 * (1 + 1e-12)], pa.float64()),
                                     ints([1.0, 2.0], pa.float64()), None),
    "a float beyond the tolerance": (ints([1.0, 2.000001], pa.float64()),
                                     ints([1.0, 2.0], pa.float64()), None),
    "infinity against a large float": (ints([float("inf")], pa.float64()),
                                       ints([1e308], pa.float64()), None),
    "NaN against NULL": (ints([float("nan")], pa.float64()), ints([None], pa.float64()), None),
    "-0.0 against 0.0": (ints([-0.0], pa.float64()), ints([0.0], pa.float64()), None),
    "an integer past 2**53 against the float next to it": (
        ints([2**53 + 1]), ints([float(2**53)], pa.float64()), None),
    "nested lists in narrower types": (
        pa.table({"l": pa.array([[1, 2], [3]], pa.list_(pa.int32()))}),
        pa.table({"l": pa.array([[1, 2], [3]], pa.large_list(pa.int64()))}), None),
    "structs with a float a little off": (
        pa.table({"s": pa.array([{"a": 1, "b": 1.0}], pa.struct([("a", pa.int64()),
                                                               ("b", pa.float64())]))}),
        pa.table({"s": pa.array([{"a": 1, "b": 1.0 + 1e-13}], pa.struct([("a", pa.int64()),
                                                                        ("b", pa.float64())]))}),
        None),
    "maps in another entry order": (
        pa.table({"m": pa.array([[("a", 1), ("b", 2)]], pa.map_(pa.string(), pa.int64()))}),
        pa.table({"m": pa.array([[("b", 2), ("a", 1)]], pa.map_(pa.string(), pa.int64()))}),
        None),
    "one instant in two time zones": (
        pa.table({"t": pa.array([dt.datetime(2024, 1, 1, 12)], pa.timestamp("us", "UTC"))}),
        pa.table({"t": pa.array([dt.datetime(2024, 1, 1, 12)],
                                pa.timestamp("us", "UTC")).cast(pa.timestamp("us",
                                                                             "Europe/Paris"))}),
        None),
    "dictionary-encoded strings": (
        pa.table({"s": pa.array(["x", "y", "x"]).dictionary_encode()}),
        pa.table({"s": pa.array(["x", "x", "y"])}), None),
    "a missing row": (ints([1, 2, 3]).slice(0, 2), ints([1, 2, 3]), None),
    "an extra duplicate": (pa.table({"v": [1, 1, 2]}), pa.table({"v": [1, 2]}), None),
    "rows out of the ORDER BY's order": (
        pa.table({"v": [2, 1, 3]}), pa.table({"v": [1, 2, 3]}), "SELECT v FROM t ORDER BY v"),
    "rows in order": (
        pa.table({"v": [1, 2, 3]}), pa.table({"v": [1, 2, 3]}), "SELECT v FROM t ORDER BY v"),
    "a volatile column": (
        pa.table({"v": [1, 2], "r": [0.1, 0.2]}), pa.table({"v": [2, 1], "r": [0.9, 0.3]}),
        "SELECT v, random() AS r FROM t"),
    "another column type": (pa.table({"v": ["1"]}), pa.table({"v": [1]}), None),
    "no rows": (pa.table({"v": pa.array([], pa.int64())}), pa.table({"v": [1]}), None),
}


@pytest.mark.parametrize("name", CASES)
def test_the_streamed_verdict_is_the_in_memory_one(name):
    p, r, sql = CASES[name]
    assert_agree(p, r, sql)


def test_nan_and_signed_zero_options_still_hold_when_streamed():
    options = CompareOptions(nan_equals_nan=False, signed_zero_equal=False)
    assert_agree(ints([float("nan"), -0.0], pa.float64()), ints([float("nan"), 0.0],
                                                                pa.float64()), None, options)


@FAST
@given(rows=ROWS, data=st.data())
def test_streamed_and_in_memory_agree_on_a_shuffle_in_other_types(rows, data):
    order = data.draw(st.permutations(range(len(rows))))
    primary = table([rows[i] for i in order], int_type=pa.float64(), str_type=pa.large_string())
    assert_agree(primary, table(rows), "SELECT i, s, f FROM t")


@FAST
@given(rows=ROWS, data=st.data())
def test_streamed_and_in_memory_agree_on_one_planted_difference(rows, data):
    at = data.draw(st.integers(0, len(rows) - 1))
    i, s, f = rows[at]
    what = data.draw(st.sampled_from(["int", "float", "drop"]))
    changed = list(rows)
    if what == "drop":
        del changed[at]
    elif what == "int":
        changed[at] = ((i or 0) + 1, s, f)
    else:
        changed[at] = (i, s, (f or 0.0) * (1 + 1e-6) + 1e-6)
    assert_agree(table(changed), table(rows))


def test_a_tiny_cap_spills_and_the_files_are_removed():
    con = duckdb.connect()
    answer = con.sql("SELECT i, i % 13 AS g, (i * 0.5)::DOUBLE AS f FROM range(200000) t(i)"
                     ).to_arrow_table()
    shuffled = con.sql("SELECT * FROM answer ORDER BY hash(i)").to_arrow_table()
    seen = {}

    def look(folder):
        seen["folder"] = folder
        seen["files"] = {f: os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)}

    verdict = compare_streams(shuffled.to_batches(10000), answer.to_batches(10000),
                              shuffled.schema, answer.schema, memory_bytes=1 << 20,
                              on_spill=look)
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["spilled_bytes"] >= 2 * answer.nbytes * 0.9
    assert sum(seen["files"].values()) > answer.nbytes  # both sides are on disk
    assert not os.path.exists(seen["folder"])


def test_a_planted_difference_in_a_large_answer_is_pinpointed_with_evidence():
    con = duckdb.connect()
    sql = ("SELECT i AS id, (i % 1000)::VARCHAR AS s, (i * 1.5)::DOUBLE AS f "
           "FROM range(2000000) t(i)")
    reference = con.sql(sql).to_arrow_reader(100_000)
    primary = duckdb.connect().sql(
        f"SELECT id, s, CASE WHEN id = 1234567 THEN -1.0 ELSE f END AS f FROM ({sql})"
    ).to_arrow_reader(100_000)
    verdict = compare_streams(primary, reference, primary.schema, reference.schema,
                              memory_bytes=8 << 20)
    assert verdict.category == "values", verdict.message
    assert verdict.evidence["changed_count"] == 1
    assert verdict.evidence["paired_rows"] <= 2 * 64  # one short run of rows each side
    assert verdict.evidence["differences"] == [
        {"key": {"id": 1234567, "s": "567"}, "column": "f", "primary": -1.0,
         "reference": 1851850.5}]


def test_floats_off_within_the_tolerance_everywhere_match_once_paired():
    con = duckdb.connect()
    sql = "SELECT i AS id, (i / 7)::DOUBLE AS f FROM range(300000) t(i)"
    reference = con.sql(sql).to_arrow_table()
    primary = con.sql(f"SELECT id, f * (1 + 1e-12) AS f FROM ({sql})").to_arrow_table()
    verdict = streamed(primary, reference, memory=1 << 20, batch=50_000)
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["pairing_groups"] > 1


def test_a_full_disk_is_a_resource_error():
    with StreamingComparison("SELECT 1", memory_bytes=1) as comparison:
        side = comparison.side(keep=False)
        side.path = "/dev/full"
        with pytest.raises(GatewayError) as caught:
            side.add(pa.record_batch({"v": pa.array(range(100_000))}))
    assert caught.value.kind == "resource" and "disk space" in str(caught.value)


def test_equal_answers_in_one_order_are_proven_in_place_and_shuffled_ones_by_pairing():
    con = duckdb.connect()
    answer = con.sql("SELECT i, i % 13 AS g FROM range(100000) t(i)").to_arrow_table()
    shuffled = con.sql("SELECT * FROM answer ORDER BY hash(i)").to_arrow_table()
    same = compare_streams(answer.to_batches(10000), answer.to_batches(7000), answer.schema,
                           answer.schema, memory_bytes=1 << 20)
    assert same.category == "match", same.message
    assert same.evidence["paired_rows"] == 0 and same.evidence["proven_in_place"]
    verdict = compare_streams(shuffled.to_batches(10000), answer.to_batches(10000),
                              shuffled.schema, answer.schema, memory_bytes=1 << 20)
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["paired_rows"] == 200000


def test_cells_swapped_between_rows_are_no_match():
    """Two rows that swap a cell keep every column's multiset of values: only a comparison
    of whole rows tells them apart."""
    con = duckdb.connect()
    p = con.sql("SELECT i, i % 3 AS g, (i % 5)::VARCHAR AS s FROM range(100000) t(i)"
                ).to_arrow_table()
    r = con.sql("SELECT i, CASE WHEN i % 2 = 0 THEN (i + 1) % 3 ELSE (i - 1) % 3 END AS g, "
                "(i % 5)::VARCHAR AS s FROM range(100000) t(i)").to_arrow_table()
    verdict = streamed(p, r, memory=1 << 20, batch=10_000)
    assert verdict.category == "values", verdict.message
    for column in ("s", "g"):  # one pair of rows swapping one cell, either column
        swapped = p.to_pylist()
        swapped[10][column], swapped[11][column] = swapped[11][column], swapped[10][column]
        if swapped[10][column] == swapped[11][column]:
            continue
        other = pa.Table.from_pylist(swapped, p.schema)
        verdict = streamed(p, other, memory=1 << 20, batch=10_000)
        assert verdict.category == "values", (column, verdict.message)
        assert verdict.evidence["paired_rows"] <= 2 * 64  # one short run of rows each side
        in_memory = compare_tables(p, other)
        for count in ("missing_count", "extra_count", "changed_count"):
            assert verdict.evidence.get(count) == in_memory.evidence.get(count), count


def test_the_second_answer_is_proven_as_it_arrives_and_only_the_first_is_spilled():
    con = duckdb.connect()
    answer = con.sql("SELECT i, (i % 1000)::VARCHAR AS s, i * 0.5 AS f FROM range(400000) t(i)"
                     ).to_arrow_table()
    changed = con.sql("SELECT i, s, CASE WHEN i = 333333 THEN -1 ELSE f END AS f FROM answer"
                      ).to_arrow_table()
    for primary, category in ((answer, "match"), (changed, "values")):
        verdict = compare_streams(primary.to_batches(30000), answer.to_batches(20000),
                                  primary.schema, answer.schema, memory_bytes=1 << 20)
        assert verdict.category == category, verdict.message
        assert answer.nbytes * 0.9 <= verdict.evidence["spilled_bytes"] <= answer.nbytes * 1.1
        assert verdict.evidence["paired_rows"] <= 2 * 64


def test_a_group_over_weak_keys_is_split_again_and_judged_as_in_memory(monkeypatch):
    # rows without an equal partner, as when the row matcher does not read a column's type
    # (gateway.verify.row_match): every row is routed to the groups
    from gateway.verify import row_match

    monkeypatch.setattr(row_match, "unmatched_rows", lambda *args: None)
    con = duckdb.connect()
    reference = con.sql("SELECT i % 2 AS g, (i / 100)::DECIMAL(18, 2) AS amount, i * 1.5 AS f "
                        "FROM range(600000) t(i)").to_arrow_table()
    reversed_rows = con.sql("SELECT * FROM reference ORDER BY amount DESC").to_arrow_table()
    changed = con.sql("SELECT g, amount, CASE WHEN amount = 4321 THEN -1 ELSE f END AS f "
                      "FROM reversed_rows").to_arrow_table()
    swapped = con.sql("SELECT g, CASE WHEN amount = 100 THEN 200 WHEN amount = 200 THEN 100 "
                      "ELSE amount END AS amount, f FROM reversed_rows").to_arrow_table()
    for primary in (reversed_rows, changed, swapped):
        verdict = streamed(primary, reference, memory=8 << 20, batch=50_000)
        in_memory = compare_tables(primary, reference)
        assert verdict.category == in_memory.category, (verdict.message, in_memory.message)
        for count in ("missing_count", "extra_count", "changed_count"):
            assert verdict.evidence.get(count) == in_memory.evidence.get(count), count
        assert verdict.evidence["split_groups"] == 2, verdict.evidence


def test_a_spilled_side_is_read_back_mapped_from_files_of_an_eighth_of_the_cap():
    """Reading a spill back copies nothing into Arrow's memory pool, and its files are small
    enough that the pages mapped at once stay a fraction of the cap."""
    batch = pa.record_batch({"i": pa.array(range(100_000)),
                             "s": pa.array([f"row {i}" for i in range(100_000)])})
    with StreamingComparison(None, memory_bytes=64 << 20) as comparison:
        side = comparison.side(keep=False)
        for _ in range(40):
            side.add(batch)
        side.finish(batch.schema)
        sizes = [os.path.getsize(os.path.join(comparison.folder, f))
                 for f in os.listdir(comparison.folder)]
        assert len(sizes) >= 40 * batch.nbytes // (8 << 20)
        assert max(sizes) <= (8 << 20) + (64 << 10)  # with the files' headers
        before = pa.total_allocated_bytes()
        held = []
        for read in side.batches():
            held.append(read)
            assert pa.total_allocated_bytes() - before < 1 << 20
        assert pa.Table.from_batches(held).equals(pa.Table.from_batches([batch] * 40))
