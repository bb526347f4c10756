"""The comparator: each category on a minimal case, and every equivalence never flagged."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from gateway.errors import QueryError, Unsupported
from gateway.verify.compare import compare_outcomes, compare_tables, compare_with_noise
from gateway.verify.verdict import CATEGORIES, CompareOptions

BASE = pa.table({"k": ["a", "b", None], "n": [1, 2, 3], "x": [1.5, 2.5, 3.5]})


def verdict(primary, reference=BASE, **kw):
    v = compare_tables(primary, reference, **kw)
    json.dumps(v.evidence, allow_nan=False)  # evidence is always strict JSON
    assert v.category in CATEGORIES
    return v


# -- equivalences: never a divergence ------------------------------------------------
UTC = dt.UTC
EQUIVALENT = {
    "int_vs_float": (pa.table({"v": pa.array([1, 2], pa.int64())}),
                     pa.table({"v": pa.array([1.0, 2.0], pa.float64())})),
    "int_vs_decimal": (pa.table({"v": pa.array([1, 2], pa.int32())}),
                       pa.table({"v": pa.array([decimal.Decimal("1.00"), decimal.Decimal("2.00")],
                                               pa.decimal128(10, 2))})),
    "float_vs_decimal": (pa.table({"v": [0.1, 2.5]}),
                         pa.table({"v": pa.array([decimal.Decimal("0.1"), decimal.Decimal("2.5")],
                                                 pa.decimal128(5, 1))})),
    "int32_vs_int64": (pa.table({"v": pa.array([1, None], pa.int32())}),
                       pa.table({"v": pa.array([1, None], pa.int64())})),
    "timestamp_units": (
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("s"))}),
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("ns"))})),
    "timestamp_zones_same_instant": (
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 12, tzinfo=UTC)],
                                pa.timestamp("us", tz="UTC"))}),
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 12, tzinfo=UTC)],
                                pa.timestamp("ms", tz="Asia/Tokyo"))})),
    "naive_timestamp_as_utc": (
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 12)], pa.timestamp("us"))}),
        pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 12, tzinfo=UTC)],
                                pa.timestamp("us", tz="UTC"))})),
    "string_vs_large_string": (pa.table({"s": pa.array(["x", None], pa.string())}),
                               pa.table({"s": pa.array(["x", None], pa.large_string())})),
    "string_vs_string_view": (pa.table({"s": pa.array(["x", "y"], pa.string())}),
                              pa.table({"s": pa.array(["x", "y"], pa.string_view())})),
    "list_vs_large_list": (pa.table({"l": pa.array([[1, 2], None], pa.list_(pa.int64()))}),
                           pa.table({"l": pa.array([[1, 2], None], pa.large_list(pa.int64()))})),
    "nested_rows_shuffled": (pa.table({"l": [[1], [2, 3]], "s": [{"x": 1}, {"x": 2}]}),
                             pa.table({"l": [[2, 3], [1]], "s": [{"x": 2}, {"x": 1}]})),
    "dictionary_vs_plain": (pa.table({"s": pa.array(["x", "y", "x"]).dictionary_encode()}),
                            pa.table({"s": ["x", "y", "x"]})),
    "row_order_without_order_by": (BASE.take([2, 0, 1]), BASE),
    "floats_within_tolerance": (pa.table({"v": [0.1 + 0.2, 1e12 + 0.0001]}),
                                pa.table({"v": [0.3, 1e12]})),
    "nan_vs_nan": (pa.table({"v": [float("nan"), 1.0]}), pa.table({"v": [float("nan"), 1.0]})),
    "negative_zero": (pa.table({"v": [-0.0, 1.0]}), pa.table({"v": [0.0, 1.0]})),
    "null_typed_column": (pa.table({"v": pa.nulls(2)}), pa.table({"v": pa.nulls(2, pa.int32())})),
    "empty_answers": (BASE.slice(0, 0), BASE.slice(0, 0)),
}


@pytest.mark.parametrize("name", list(EQUIVALENT))
def test_equivalent_representations_are_not_divergence(name):
    primary, reference = EQUIVALENT[name]
    v = verdict(primary, reference)
    assert v.ok, v.message


@pytest.mark.parametrize("name", ["int_vs_float", "timestamp_units", "string_vs_large_string",
                                  "nan_vs_nan", "negative_zero", "row_order_without_order_by"])
def test_each_equivalence_can_be_switched_off(name):
    option = {"int_vs_float": "numeric_types_equivalent", "timestamp_units": "timestamps_equivalent",
              "string_vs_large_string": "strings_equivalent", "nan_vs_nan": "nan_equals_nan",
              "negative_zero": "signed_zero_equal",
              "row_order_without_order_by": "ignore_order_without_order_by"}[name]
    primary, reference = EQUIVALENT[name]
    v = verdict(primary, reference, options=CompareOptions(**{option: False}))
    assert not v.ok
    expected = {"nan_vs_nan": "values", "negative_zero": "values",
                "row_order_without_order_by": "order"}.get(name, "schema")
    assert v.category == expected, v.message


def test_ties_on_order_by_keys_are_not_order_divergence():
    reference = pa.table({"g": ["x", "x", "y", "y"], "id": [1, 2, 3, 4]})
    primary = reference.take([1, 0, 3, 2])
    assert verdict(primary, reference, sql="SELECT g, id FROM t ORDER BY g").ok
    v = verdict(primary, reference, sql="SELECT g, id FROM t ORDER BY g, id")
    assert v.category == "order"
    assert v.evidence["first_out_of_order"] == 1


def test_tie_breakers_after_a_float_key_off_in_its_last_bits_are_not_judged():
    # PostgreSQL's avg() was 5.055000000000001 where DuckDB's was 5.055, and each engine
    # ordered its rows by its own value before the tie-breaker (found by arrowgate fuzz)
    sql = "SELECT k, avg(v) AS a FROM t GROUP BY k ORDER BY a, k DESC"
    primary = pa.table({"k": [1, 2, 3], "a": [5.055, 5.055000000000001, 5.06]})
    reference = pa.table({"k": [2, 1, 3], "a": [5.055, 5.055, 5.06]})
    v = verdict(primary, reference, sql=sql)
    assert v.ok and v.evidence["order_checked_keys"] == ["a"]
    # the float key itself is still checked, and exact floats keep their tie-breakers
    assert verdict(primary.take([2, 0, 1]), reference, sql=sql).category == "order"
    exact = pa.table({"k": [1, 2, 3], "a": [5.055, 5.055, 5.06]})
    assert verdict(exact, reference, sql=sql).category == "order"


def test_order_by_mapped_through_ordinal_alias_and_expression():
    reference = pa.table({"k": ["a", "b", "c"], "n": [3, 2, 1]})
    primary = reference.take([2, 1, 0])
    for sql in ("SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY 2 DESC",
                "SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY n DESC",
                "SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY count(*) DESC",
                "SELECT * FROM t ORDER BY n DESC"):
        assert verdict(primary, reference, sql=sql).category == "order", sql


def test_order_by_a_hidden_key_is_its_own_outcome_never_a_match():
    """Issue 37: an order that cannot be checked was "match" with "order not checked" in
    its details: the user was told the answers agree."""
    reference = pa.table({"k": ["a", "b"]})
    v = verdict(reference.take([1, 0]), reference, sql="SELECT k FROM t ORDER BY other_col")
    assert v.category == "order_unchecked" and not v.ok
    assert v.evidence["order_checked"] is False and "not checked" in v.message
    # answers equal row for row are in the same order, whatever the keys
    assert verdict(reference, reference, sql="SELECT k FROM t ORDER BY other_col").ok


@pytest.mark.parametrize("sql, right, wrong", [
    ("SELECT x FROM t ORDER BY -x", [3, 2, 1], [1, 2, 3]),
    ("SELECT x FROM t ORDER BY x + 0", [1, 2, 3], [3, 1, 2]),
    ("SELECT x FROM t ORDER BY ALL DESC", [3, 2, 1], [1, 3, 2]),
    ("SELECT x AS y FROM t ORDER BY abs(y - 2), y", [2, 1, 3], [1, 2, 3]),
])
def test_order_by_an_expression_of_the_answer_is_checked(sql, right, wrong):
    """Issue 37: ``ORDER BY -x``, ``x + 0``, ``ALL`` answered in another order were
    "match"; their keys are computed on both answers now."""
    name = "y" if " AS y" in sql else "x"
    reference = pa.table({name: right})
    assert verdict(pa.table({name: wrong}), reference, sql=sql).category == "order"
    assert verdict(pa.table({name: right}), reference, sql=sql).ok


@pytest.mark.parametrize("key", ["lower(s)", "s COLLATE NOCASE"])
def test_order_by_a_case_blind_key_allows_ties_and_finds_disorder(key):
    sql = f"SELECT s FROM t ORDER BY {key}"
    reference = pa.table({"s": ["A", "a", "b"]})
    assert verdict(pa.table({"s": ["a", "A", "b"]}), reference, sql=sql).ok  # tied keys
    assert verdict(pa.table({"s": ["b", "A", "a"]}), reference, sql=sql).category == "order"


def test_tolerance_per_run_and_per_query():
    primary, reference = pa.table({"v": [1.001]}), pa.table({"v": [1.0]})
    assert verdict(primary, reference).category == "values"
    assert verdict(primary, reference, options=CompareOptions(rel_tol=0.01)).ok
    assert verdict(primary, reference, sql="SELECT v FROM t -- arrowgate: rel_tol=0.01").ok
    assert verdict(primary, reference, sql="-- arrowgate: abs_tol=0.005\nSELECT v FROM t").ok


# -- categories ------------------------------------------------------------------------
def test_schema_column_count_names_and_types():
    assert verdict(BASE.drop_columns(["x"])).category == "schema"
    renamed = verdict(BASE.rename_columns(["k", "n", "y"]))
    assert renamed.category == "schema" and "'y'" in renamed.message
    retyped = verdict(BASE.set_column(0, "k", pa.array([1, 2, 3])))
    assert retyped.category == "schema" and "string" in retyped.message


def test_engine_chosen_names_of_unaliased_expressions_are_not_compared():
    primary = pa.table({"cab": ["a"], "count(*)": [1]})
    reference = pa.table({"cab": ["a"], "count_star()": [1]})
    assert verdict(primary, reference, sql="SELECT cab, count(*) FROM t GROUP BY cab").ok
    assert verdict(primary, reference).category == "schema"  # without the SQL: compared


def test_names_are_compared_up_to_their_first_nul():
    """DuckDB's Arrow answers cut a name at a NUL byte (Arrow's C data interface holds
    NUL-terminated names), where the csv engine keeps the name DuckDB itself binds: found
    by bench/csv_corpus_fuzz.py, a CASE over a text constant holding NUL bytes (a value
    of nullterm.csv)."""
    primary = pa.table({"CASE WHEN ((s >= '\x00w')) THEN (s) END": ["a"]})
    reference = pa.table({"CASE WHEN ((s >= '": ["a"]})
    sql = "SELECT CASE WHEN s >= '\x00w' THEN s END FROM t"
    assert verdict(primary, reference, sql=sql,
                   options=CompareOptions(ignore_engine_chosen_names=False)).ok
    other = pa.table({"CASE WHEN ((s > '": ["a"]})
    assert verdict(primary, other, sql=sql,
                   options=CompareOptions(ignore_engine_chosen_names=False)).category == "schema"


def test_missing_and_extra_rows_with_samples():
    missing = verdict(BASE.slice(0, 2))
    assert missing.category == "missing_rows"
    assert missing.evidence["missing"] == [{"k": None, "n": 3, "x": 3.5}]
    extra = verdict(pa.concat_tables([BASE, BASE.slice(0, 1)]))
    assert extra.category == "extra_rows"
    assert extra.evidence["extra"] == [{"k": "a", "n": 1, "x": 1.5}]


def test_row_count_when_neither_side_contains_the_other():
    other = pa.table({"k": ["z"], "n": [9], "x": [9.5]})
    assert verdict(pa.concat_tables([BASE.slice(0, 1), other])).category == "row_count"


def test_values_evidence_has_row_key_and_both_values():
    changed = BASE.set_column(2, "x", pa.array([1.5, 2.75, 3.5]))
    v = verdict(changed)
    assert v.category == "values"
    assert v.evidence["differences"] == [
        {"key": {"k": "b", "n": 2}, "column": "x", "primary": 2.75, "reference": 2.5}]
    assert "2.75" in v.message and "2.5" in v.message


def test_values_keyed_by_group_by_columns():
    reference = pa.table({"g": ["a", "b"], "n": [10, 20]})
    primary = pa.table({"g": ["a", "b"], "n": [10, 21]})
    v = verdict(primary, reference, sql="SELECT g, count(*) AS n FROM t GROUP BY g")
    assert v.category == "values"
    assert v.evidence["differences"][0] == {"key": {"g": "b"}, "column": "n",
                                            "primary": 21, "reference": 20}


def test_errors():
    boom = QueryError("boom", engine="p")
    assert compare_outcomes(boom, BASE).category == "error"
    assert compare_outcomes(BASE, boom).category == "error"
    # the same kind: a match only with the same message (the engine's name aside)
    assert compare_outcomes(boom, QueryError("boom", engine="r")).ok
    both_failed = compare_outcomes(boom, QueryError("other words", engine="r"))
    assert both_failed.category == "both_error" and not both_failed.ok
    assert "'boom'" in both_failed.message and "'other words'" in both_failed.message
    both = compare_outcomes(boom, Unsupported("no", engine="r"))
    assert both.category == "error" and "QueryError" in both.message
    assert compare_outcomes(BASE, BASE).ok


def test_noise_marks_nondeterministic_answers():
    a, b, c = (pa.table({"r": [v]}) for v in (0.1, 0.2, 0.3))
    assert compare_with_noise(a, b, c).category == "nondeterministic"
    assert compare_with_noise(a, b, b).category == "values"  # the reference is stable
    assert compare_with_noise(a, a, c).ok


def test_nested_values_differ():
    reference = pa.table({"k": [1, 2], "l": [[1, 2], None]})
    v = verdict(pa.table({"k": [1, 2], "l": [[1, 3], None]}), reference)
    assert v.category == "values" and v.evidence["differences"][0]["primary"] == [1, 3]


def test_evidence_is_strict_json_for_awkward_values():
    reference = pa.table({"k": [1], "v": [float("nan")], "d": [decimal.Decimal("1.5")],
                          "t": [dt.datetime(2024, 1, 1)], "b": [b"\x00"]})
    primary = pa.table({"k": [1], "v": [float("inf")], "d": [decimal.Decimal("1.5")],
                        "t": [dt.datetime(2024, 1, 1)], "b": [b"\x01"]})
    v = verdict(primary, reference)
    assert v.category == "values"


def test_large_answers_compare_without_python_row_loops():
    import duckdb

    con = duckdb.connect()
    answer = con.sql("SELECT i AS id, i * 0.5 AS v, (i % 97)::VARCHAR AS s "
                     "FROM range(1000000) t(i)").to_arrow_table()
    con.register("answer", answer)
    shuffled = con.sql("SELECT * FROM answer ORDER BY hash(id)").to_arrow_table()
    assert verdict(shuffled, answer).ok
    changed = con.sql("SELECT id, CASE WHEN id = 777 THEN v + 1 ELSE v END AS v, s "
                      "FROM answer").to_arrow_table()
    v = verdict(changed, answer)
    assert v.category == "values" and v.evidence["differences"][0]["key"]["id"] == 777


def test_answers_past_the_direct_pairing_size_take_the_hash_bucket_path():
    import duckdb

    con = duckdb.connect()
    answer = con.sql("SELECT i % 5000 AS k, i * 0.25 AS v FROM range(60000) t(i)").to_arrow_table()
    con.register("answer", answer)

    def variant(sql):
        return con.sql(sql).to_arrow_table()

    nudged = variant("SELECT k, v * (1 + 1e-12) AS v FROM answer")
    assert verdict(nudged, answer).ok  # nothing cancels by hash; all paired within tolerance
    off = verdict(variant("SELECT k, v * (1 + 1e-6) AS v FROM answer"), answer)
    assert off.category == "values" and off.evidence["changed_count"] == 59999  # v = 0 is exact
    unique = variant("SELECT i AS id, i * 0.25 AS v FROM range(60000) t(i)")
    con.register("u", unique)
    shifted = variant("SELECT id, v * (1 + 1e-12) AS v FROM u WHERE id <> 400")
    assert verdict(shifted, unique).category == "missing_rows"  # positions no longer line up
    assert verdict(variant("SELECT * FROM answer WHERE v <> 100"), answer).category == "missing_rows"
    assert verdict(variant("SELECT * FROM answer UNION ALL SELECT 7, 1.75"),
                   answer).category == "extra_rows"
    changed = verdict(variant("SELECT k, CASE WHEN v = 100 THEN -1 ELSE v END AS v FROM answer"),
                      answer)
    assert changed.category == "values" and changed.evidence["changed_count"] == 1
    # i * 0.25 is a DECIMAL in DuckDB: compared exactly, shown as exact text
    assert changed.evidence["differences"][0] == {"key": {"k": 400}, "column": "v",
                                                  "primary": "-1.00", "reference": "100.00"}


def test_rows_tied_at_the_limit_boundary_may_differ():
    sql = "SELECT id, amount FROM t ORDER BY amount DESC LIMIT 3"
    reference = pa.table({"id": [1, 2, 3], "amount": [9.0, 5.0, 5.0]})
    other_tie = pa.table({"id": [1, 2, 4], "amount": [9.0, 5.0, 5.0]})  # id 4 also has 5.0
    v = verdict(other_tie, reference, sql=sql)
    assert v.category == "nondeterministic" and v.evidence["tied_at_cut"] == 1
    assert "LIMIT" in v.message
    not_a_tie = pa.table({"id": [1, 2, 4], "amount": [9.0, 5.0, 4.0]})
    assert verdict(not_a_tie, reference, sql=sql).category == "values"
    without_limit = sql.replace(" LIMIT 3", "")
    assert verdict(other_tie, reference, sql=without_limit).category == "values"


def test_rows_tied_within_a_float_keys_tolerance_at_the_limit_may_differ():
    """Found by `arrowgate fuzz` (csv against DuckDB, drug_exposure.csv): two engines'
    avg() of the same huge integers differed in the last bit, so each ordered its
    groups by its own value and kept another group at the LIMIT; a values divergence
    between two correct answers."""
    sql = "SELECT g, n, m FROM t ORDER BY m ASC, n DESC LIMIT 3"
    m = -9.133360720296561e18
    near = -9.13336072029656e18  # one bit away
    reference = pa.table({"g": ["a", "b", "c"], "n": [5, 4, 3], "m": [m, m, m]})
    primary = pa.table({"g": ["a", "b", "d"], "n": [5, 4, 2], "m": [m, m, m]})
    assert near != m and abs(near - m) <= 1e-9 * abs(m)
    v = verdict(primary, reference, sql=sql)
    assert v.category == "nondeterministic", v.message
    assert v.evidence["tied_at_cut"] == 1
    far = pa.table({"g": ["a", "b", "d"], "n": [5, 4, 2], "m": [m, m, m * 0.5]})
    assert verdict(far, reference, sql=sql).category == "values"  # not tied: a real difference


def test_comparisons_in_threads_at_once_keep_their_own_tables():
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        reference = pa.table({"k": list(range(50)), "v": [float(i)] * 50})
        primary = reference.take(list(range(49, -1, -1)))
        if i % 2:
            primary = primary.set_column(1, "v", pa.array([float(i) + 1] * 50))
        return compare_tables(primary, reference, options=CompareOptions(signed_zero_equal=i % 3 > 0))

    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(one, range(32)))
    assert [v.category for v in verdicts] == ["values" if i % 2 else "match" for i in range(32)]


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT ON (g) g, v FROM t ORDER BY g",
    "SELECT g, v FROM t QUALIFY row_number() OVER (PARTITION BY g ORDER BY k) = 1",
    "SELECT g, v FROM (SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY k) AS rn "
    "FROM t) WHERE rn = 1",
])
def test_rows_picked_among_ties_are_undetermined_not_values(sql):
    """Issue 37: DISTINCT ON keeping another row of a group, and QUALIFY or rn = 1 over
    rows tied on the window's ORDER BY, were "values" where the SQL leaves them open."""
    one, other = pa.table({"g": [1, 2], "v": [10, 20]}), pa.table({"g": [1, 2], "v": [11, 20]})
    assert verdict(one, other, sql=sql).category == "nondeterministic"


def test_distinct_on_ordered_by_every_column_is_determined():
    sql = "SELECT DISTINCT ON (g) g, v FROM t ORDER BY g, v"
    one, other = pa.table({"g": [1, 2], "v": [10, 20]}), pa.table({"g": [1, 2], "v": [11, 20]})
    assert verdict(one, other, sql=sql).category == "values"
    assert verdict(one, pa.table({"g": [1, 3], "v": [10, 20]}),
                   sql="SELECT DISTINCT ON (g) g, v FROM t ORDER BY g").category == "values"


def test_a_match_within_the_float_tolerance_says_so():
    """Issue 37: no verdict said that a float tolerance was applied, or which."""
    primary = pa.table({"k": [1, 2], "v": [0.1 + 0.2, 1.0]})
    reference = pa.table({"k": [1, 2], "v": [0.3, 1.0]})
    v = verdict(primary, reference)
    assert v.ok and "rel_tol=1e-09" in v.message
    assert v.evidence["float_tolerance"] == {"rel_tol": 1e-9, "abs_tol": 1e-12, "columns": ["v"]}
    assert "float_tolerance" not in verdict(reference, reference).evidence  # equal: none used


def test_an_order_by_expression_is_checked_beside_a_volatile_column():
    sql = "SELECT x, random() AS r FROM t ORDER BY -x"
    wrong = pa.table({"x": [1, 2, 3], "r": [0.5, 0.1, 0.9]})
    right = pa.table({"x": [3, 2, 1], "r": [0.2, 0.3, 0.4]})
    assert verdict(wrong, right, sql=sql).category == "order"
