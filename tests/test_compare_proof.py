"""A "match" is proof: rows are equal only when their values compare equal, never by a hash.

DuckDB's ``hash()`` takes ``[]``, NULL and ``[NULL]`` alike, a NULL struct like a struct
of NULLs, and ``hash(0) = 0``: each case is checked in memory and streamed, at a cap
that spills every batch and at one that holds everything.
"""

from __future__ import annotations

import decimal

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.verify.compare import compare_tables
from gateway.verify.compare_stream import compare_streams
from gateway.verify.verdict import CompareOptions

#: so small that every side spills from its first batch and rows are paired in many groups
TINY = 4096
CAPS = (TINY, 1 << 20, 1 << 30)

INTS = pa.list_(pa.int64())
POINT = pa.struct([("a", pa.int64()), ("b", pa.string())])


def verdicts(p: pa.Table, r: pa.Table, sql: str | None = None, batch: int = 7):
    """The in-memory verdict, then the streamed one at each cap."""
    yield "memory", compare_tables(p, r, sql=sql)
    for cap in CAPS:
        yield cap, compare_streams(p.to_batches(batch), r.to_batches(batch), p.schema, r.schema,
                                   sql=sql, memory_bytes=cap)


def assert_never_match(p: pa.Table, r: pa.Table, expected: str = "values", **kw) -> None:
    for where, verdict in verdicts(p, r, **kw):
        assert verdict.category == expected, (where, verdict.category, verdict.message)


def one_column(values, type_):
    return pa.table({"k": pa.array(range(len(values)), pa.int64()), "v": pa.array(values, type_)})


HASH_COLLISIONS = {
    "an empty list against NULL": ([[1], []], [[1], None], INTS),
    "NULL against a list of one NULL": ([None, [2]], [[None], [2]], INTS),
    "an empty list against a list of one NULL": ([[], [2]], [[None], [2]], INTS),
    "a NULL struct against a struct of NULLs": (
        [None, {"a": 1, "b": "x"}], [{"a": None, "b": None}, {"a": 1, "b": "x"}], POINT),
    "a list that lost a leading zero": ([[0, 5], [1]], [[0, 0, 5], [1]], INTS),
}


@pytest.mark.parametrize("name", HASH_COLLISIONS)
def test_values_that_hash_alike_are_no_match(name):
    primary, reference, type_ = HASH_COLLISIONS[name]
    assert_never_match(one_column(primary, type_), one_column(reference, type_))


@pytest.mark.parametrize("name", HASH_COLLISIONS)
def test_values_that_hash_alike_are_no_match_as_the_first_column(name):
    primary, reference, type_ = HASH_COLLISIONS[name]
    assert_never_match(pa.table({"v": pa.array(primary, type_)}),
                       pa.table({"v": pa.array(reference, type_)}))


def test_a_lost_duplicate_zero_in_a_sorted_list_is_no_match():
    con = duckdb.connect()
    sql = ("SELECT list(x ORDER BY x) AS xs, g FROM (SELECT i % 100 AS g, i % 3 * (i % 7) AS x "
           "FROM range(3000) t(i)) GROUP BY g")
    reference = con.sql(sql).to_arrow_table()
    primary = con.sql(f"SELECT CASE WHEN g = 7 THEN xs[2:] ELSE xs END AS xs, g FROM ({sql})"
                      ).to_arrow_table()
    assert_never_match(primary, reference, sql=sql, batch=16)


def test_one_null_list_turned_empty_among_a_million_rows_is_no_match():
    con = duckdb.connect()
    sql = ("SELECT i, CASE WHEN i % 1000 = 0 THEN NULL ELSE [i % 7, i % 5] END AS l "
           "FROM range(1000000) t(i)")
    reference = con.sql(sql).to_arrow_table()
    primary = con.sql(f"SELECT i, CASE WHEN i = 500000 THEN [] ELSE l END AS l FROM ({sql})"
                      ).to_arrow_table()
    verdict = compare_tables(primary, reference)
    assert verdict.category == "values", verdict.message
    for cap in (1 << 20, 1 << 30):
        verdict = compare_streams(primary.to_batches(100_000), reference.to_batches(100_000),
                                  primary.schema, reference.schema, memory_bytes=cap)
        assert verdict.category == "values", (cap, verdict.message)


# -- generated: one minimal change to a nested answer is never a match -------------------------
ELEMENT = st.one_of(st.none(), st.integers(-3, 3))
LIST = st.one_of(st.none(), st.lists(ELEMENT, max_size=4))
STRUCT = st.one_of(st.none(), st.fixed_dictionaries({"a": st.one_of(st.none(), st.integers(0, 2)),
                                                      "b": st.one_of(st.none(), st.just(""),
                                                                     st.just("x"))}))
NESTED_ROWS = st.lists(st.tuples(LIST, STRUCT), min_size=1, max_size=12)
SCHEMA = pa.schema([("l", INTS), ("s", POINT)])


def _null_into_empty(row, at):
    return ([] if row[0] is None else None, row[1]) if row[0] in (None, []) else None


def _null_struct_into_nulls(row, at):
    if row[1] is None:
        return row[0], {"a": None, "b": None}
    if row[1] == {"a": None, "b": None}:
        return row[0], None
    return None


def _drop_element(row, at):
    return (row[0][:at] + row[0][at + 1:], row[1]) if row[0] else None


def _duplicate_element(row, at):
    return (row[0][:at + 1] + row[0][at:], row[1]) if row[0] else None


def _add_zero(row, at):
    return ([*row[0][:at], 0, *row[0][at:]], row[1]) if row[0] is not None else None


def _empty_string_into_null(row, at):
    if row[1] is None or row[1]["b"] not in (None, ""):
        return None
    return row[0], {"a": row[1]["a"], "b": None if row[1]["b"] == "" else ""}


def nested_table(rows):
    return pa.Table.from_pylist([{"l": items, "s": point} for items, point in rows], SCHEMA)


CHANGES = [_null_into_empty, _null_struct_into_nulls, _drop_element, _duplicate_element,
           _add_zero, _empty_string_into_null]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=NESTED_ROWS, data=st.data())
def test_one_minimal_nested_change_is_never_a_match(rows, data):
    at_row = data.draw(st.integers(0, len(rows) - 1))
    change = data.draw(st.sampled_from(CHANGES))
    row = rows[at_row]
    changed = change(row, data.draw(st.integers(0, max(0, len(row[0] or []) - 1))))
    assume(changed is not None and changed != row)
    primary = nested_table([*rows[:at_row], changed, *rows[at_row + 1:]])
    reference = nested_table(rows)
    for where, verdict in verdicts(primary, reference, batch=3):
        assert verdict.category != "match", (where, change.__name__, verdict.message)


# -- one verdict whatever the cap ----------------------------------------------------------------
def _cut_answers(sql: str, changed: str):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, i % 1000 AS g, i * 2 AS v FROM range(400000) t(i)")
    reference = con.sql(sql).to_arrow_table()
    primary = con.sql(f"SELECT * REPLACE ({changed}) FROM ({sql})").to_arrow_table()
    return primary, reference


def assert_one_verdict(primary: pa.Table, reference: pa.Table, sql: str, expected: str) -> None:
    for where, verdict in verdicts(primary, reference, sql=sql, batch=20_000):
        if where == TINY:
            continue  # 300,000 rows in 4 KiB groups: covered by the smaller cases
        assert verdict.category == expected, (where, verdict.category, verdict.message)


def test_a_wrong_value_inside_a_limit_cut_is_values_at_every_cap():
    sql = "SELECT id, v FROM t ORDER BY id LIMIT 300000"
    primary, reference = _cut_answers(sql, "CASE WHEN id = 150000 THEN -1 ELSE v END AS v")
    assert_one_verdict(primary, reference, sql, "values")


def test_other_rows_tied_at_the_edge_of_a_limit_are_nondeterministic_at_every_cap():
    sql = "SELECT g, id FROM t ORDER BY g LIMIT 300000"
    # the last rows all have g = 749: the primary keeps other rows of that g
    primary, reference = _cut_answers(sql, "CASE WHEN g = 749 THEN id + 1000 ELSE id END AS id")
    assert_one_verdict(primary, reference, sql, "nondeterministic")


def test_a_limit_the_answer_does_not_reach_is_checked_at_every_cap():
    for limit, expected in ((300000, "nondeterministic"), (500000, "values")):
        sql = f"SELECT id, v FROM t WHERE id < 300000 LIMIT {limit}"
        primary, reference = _cut_answers(sql, "CASE WHEN id = 7 THEN -1 ELSE v END AS v")
        assert_one_verdict(primary, reference, sql, expected)


# -- exact numbers stay exact ------------------------------------------------------------------
def decimals(values, type_):
    return pa.table({"k": pa.array(range(len(values)), pa.int64()),
                     "d": pa.array([decimal.Decimal(v) for v in values], type_)})


def test_decimals_past_38_digits_together_compare_exactly():
    wide = "1234567890123456789012345678901234.56"  # DECIMAL(38,2) against (38,4): 40 digits
    reference = decimals([wide, "1.00"], pa.decimal128(38, 2))
    assert_never_match(decimals([wide + "01", "1"], pa.decimal128(38, 4)), reference)
    for where, verdict in verdicts(decimals([wide + "00", "1"], pa.decimal128(38, 4)), reference):
        assert verdict.ok, (where, verdict.message)


def test_an_integer_against_a_decimal_past_38_digits_compares_exactly():
    whole = 123456789012345678  # BIGINT against DECIMAL(38,20): 39 digits
    reference = pa.table({"k": [1], "d": pa.array([whole], pa.int64())})
    off = pa.table({"k": [1], "d": pa.array([decimal.Decimal(f"{whole}.00000000000000000001")],
                                            pa.decimal128(38, 20))})
    assert_never_match(off, reference)
    same = pa.table({"k": [1], "d": pa.array([decimal.Decimal(whole)], pa.decimal128(38, 20))})
    for where, verdict in verdicts(same, reference):
        assert verdict.ok, (where, verdict.message)


def test_128_bit_integers_compare_exactly_with_decimals_and_integers():
    con = duckdb.connect()
    huge = con.sql("SELECT (10::HUGEINT ** 35)::HUGEINT + 1 AS d").to_arrow_table()
    assert huge.schema.field(0).type == pa.decimal128(38, 0)  # how DuckDB hands out HUGEINT
    assert_never_match(pa.table({"d": pa.array([decimal.Decimal(10**35)], pa.decimal128(38, 2))}),
                       huge, expected="values")
    top = con.sql("SELECT 9223372036854775806::HUGEINT AS d").to_arrow_table()
    assert_never_match(pa.table({"d": pa.array([2**63 - 1], pa.int64())}), top)


# -- intervals -----------------------------------------------------------------------------------
def intervals(*texts: str) -> pa.Table:
    con = duckdb.connect()
    values = ", ".join(f"({i}, INTERVAL '{t}')" for i, t in enumerate(texts))
    return con.sql(f"SELECT * FROM (VALUES {values}) v(k, i)").to_arrow_table()


def test_an_interval_of_31_days_is_not_one_month_and_a_day():
    primary, reference = intervals("31 days", "2 hours"), intervals("1 month 1 day", "2 hours")
    assert_never_match(primary, reference)
    assert_never_match(intervals("24 hours"), intervals("1 day"))


def test_the_30_day_month_is_an_option():
    options = CompareOptions(interval_month_is_30_days=True)
    primary, reference = intervals("31 days", "25 hours"), intervals("1 month 1 day", "1 day 1 hour")
    assert compare_tables(primary, reference, options=options).ok
    for cap in CAPS:
        verdict = compare_streams(primary.to_batches(1), reference.to_batches(1), primary.schema,
                                  reference.schema, options=options, memory_bytes=cap)
        assert verdict.ok, (cap, verdict.message)
    assert not compare_tables(intervals("31 days"), intervals("1 month"), options=options).ok
    override = "SELECT i FROM t -- arrowgate: interval_month_is_30_days=true"
    assert compare_tables(primary, reference, sql=override).ok


def test_equal_intervals_and_nulls_match():
    primary = intervals("1 month 1 day", "3 seconds").append_column(
        "n", pa.array([None, 1], pa.int64()))
    nulls = pa.table({"k": [0, 1], "i": pa.array([None, None], pa.month_day_nano_interval())})
    for where, verdict in verdicts(primary, primary):
        assert verdict.ok, (where, verdict.message)
    assert_never_match(nulls, intervals("0 days", "0 days"))
    for where, verdict in verdicts(nulls, nulls):
        assert verdict.ok, (where, verdict.message)


# -- fewer false alarms ---------------------------------------------------------------------------
UUIDS = "SELECT i, CASE WHEN i % 5 = 0 THEN NULL ELSE uuidv4() END AS u FROM range(50) t(i)"


def test_a_uuid_column_equals_its_text_form():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS {UUIDS}")
    sql = "SELECT i, u FROM t ORDER BY i"
    as_uuid = con.execute("SET arrow_lossless_conversion = true").sql(sql).to_arrow_table()
    as_text = con.execute("SET arrow_lossless_conversion = false").sql(sql).to_arrow_table()
    assert as_uuid.schema.field("u").type.extension_name == "arrow.uuid"
    assert pa.types.is_string(as_text.schema.field("u").type)
    for primary, reference in ((as_uuid, as_text), (as_text, as_uuid), (as_uuid, as_uuid)):
        for where, verdict in verdicts(primary, reference, sql=sql):
            assert verdict.ok, (where, verdict.message)
    other = con.sql("SELECT i, CASE WHEN i = 3 THEN uuidv4() ELSE u END AS u FROM t ORDER BY i"
                    ).to_arrow_table()
    assert_never_match(as_uuid, other, sql=sql)


WINDOWED = ("SELECT g, o, v, row_number() OVER (PARTITION BY g ORDER BY o) AS w FROM t "
            "ORDER BY g, o, v")


def test_row_number_over_tied_rows_is_nondeterministic_in_those_rows_only():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 7 AS g, i % 50 AS o, i AS v FROM range(3000) t(i)")
    reference = con.sql(WINDOWED).to_arrow_table()
    other = ("SELECT g, o, v, row_number() OVER (PARTITION BY g ORDER BY o, v DESC) AS w FROM t "
             "ORDER BY g, o, v")
    primary = con.sql(other).to_arrow_table()
    assert not primary.equals(reference)
    for where, verdict in verdicts(primary, reference, sql=WINDOWED, batch=500):
        assert verdict.category == "nondeterministic", (where, verdict.message)
        assert verdict.evidence["tied_cells"] == 2 * 3000
    # a number outside its tie's range is wrong whichever way the ties were broken
    wrong = con.sql(f"SELECT g, o, v, CASE WHEN v = 7 THEN 0 ELSE w END AS w FROM ({other})"
                    ).to_arrow_table()
    for where, verdict in verdicts(wrong, reference, sql=WINDOWED, batch=500):
        assert verdict.category == "nondeterministic", (where, verdict.message)


def test_row_number_outside_the_ties_is_compared():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 7 AS g, CASE WHEN i % 7 = 0 THEN i % 3 ELSE i END "
                "AS o, i AS v FROM range(3000) t(i)")
    reference = con.sql(WINDOWED).to_arrow_table()
    untied = con.sql("SELECT * FROM reference WHERE g <> 0").to_arrow_table()
    for where, verdict in verdicts(untied, untied, sql=WINDOWED, batch=500):
        assert verdict.category == "match", (where, verdict.message)  # no tie at all
    primary = con.sql(f"SELECT g, o, v, CASE WHEN v = 701 THEN w + 1 ELSE w END AS w "
                      f"FROM ({WINDOWED}) ORDER BY g, o, v").to_arrow_table()
    assert_never_match(primary, reference, sql=WINDOWED, batch=500)


def test_lag_over_a_tie_leaves_out_its_partition_only():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 7 AS g, CASE WHEN i % 7 = 0 THEN i % 3 ELSE i END "
                "AS o, i AS v FROM range(300) t(i)")
    sql = ("SELECT g, o, lag(v) OVER (PARTITION BY g ORDER BY o) AS w FROM t ORDER BY g, o, w")
    reference = con.sql(sql).to_arrow_table()
    shuffled = con.sql("SELECT g, o, lag(v) OVER (PARTITION BY g ORDER BY o, v DESC) AS w FROM t "
                       "ORDER BY g, o, w").to_arrow_table()
    for where, verdict in verdicts(shuffled, reference, sql=sql, batch=50):
        assert verdict.category == "nondeterministic", (where, verdict.message)
    broken = con.sql(f"SELECT g, o, CASE WHEN g = 1 AND o = 8 THEN -1 ELSE w END AS w "
                     f"FROM ({sql}) ORDER BY g, o, w").to_arrow_table()
    assert_never_match(broken, reference, sql=sql, batch=50)


def test_intervals_inside_nested_values_compare_their_fields():
    con = duckdb.connect()
    sql = ("SELECT [INTERVAL '{a}', NULL] AS l, {{'i': INTERVAL '{a}', 'n': 1}} AS s, "
           "[[INTERVAL '{a}']] AS ll")
    primary = con.sql(sql.format(a="31 days")).to_arrow_table()
    reference = con.sql(sql.format(a="1 month 1 day")).to_arrow_table()
    for column in primary.column_names:
        p, r = primary.select([column]), reference.select([column])
        assert_never_match(p, r)
        for where, verdict in verdicts(p, p):
            assert verdict.ok, (column, where, verdict.message)
        thirty = CompareOptions(interval_month_is_30_days=True)
        assert compare_tables(p, r, options=thirty).ok, column


CUT_ROWS = st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3)), min_size=2, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=CUT_ROWS, data=st.data())
def test_a_limit_cut_gets_one_verdict_at_every_cap(rows, data):
    """The reference keeps the first ``limit`` rows by ``k``; the primary breaks the ties
    another way, or changes one value: the streamed verdict is always the in-memory one."""
    limit = data.draw(st.integers(1, len(rows)))
    ordered = data.draw(st.booleans())
    sql = f"SELECT k, v FROM t {'ORDER BY k ' if ordered else ''}LIMIT {limit}"
    by_k = sorted(rows, key=lambda row: row[0]) if ordered else rows
    other = data.draw(st.permutations(rows))
    other = sorted(other, key=lambda row: row[0]) if ordered else other
    primary = other[:limit]
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, limit - 1))
        primary[at] = (primary[at][0], primary[at][1] + 10)
    table = pa.Table.from_pylist
    p = table([{"k": k, "v": v} for k, v in primary])
    r = table([{"k": k, "v": v} for k, v in by_k[:limit]])
    in_memory = compare_tables(p, r, sql=sql)
    for cap in (TINY, 1 << 30):
        verdict = compare_streams(p.to_batches(3), r.to_batches(3), p.schema, r.schema, sql=sql,
                                  memory_bytes=cap)
        assert verdict.category == in_memory.category, (cap, verdict.message, in_memory.message)
