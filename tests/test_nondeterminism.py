"""Answers the SQL leaves undetermined: volatile functions, cuts without a total order, samples."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.sql.nondeterminism import Nondeterminism, side_effects
from gateway.verify.compare import compare_tables
from gateway.verify.verdict import CompareOptions


def tbl(**cols):
    return pa.table(cols)


# -- volatile functions ---------------------------------------------------------------
VOLATILE = [
    ("SELECT id, random() AS r FROM t", ["r"], "duckdb"),
    ("SELECT id, now() AS r FROM t", ["r"], "duckdb"),
    ("SELECT id, current_timestamp AS r FROM t", ["r"], "duckdb"),
    ("SELECT id, uuid() AS r FROM t", ["r"], "duckdb"),
    ("SELECT id, gen_random_uuid() AS r FROM t", ["r"], "postgres"),
    ("SELECT id, NEWID() AS r FROM t", ["r"], "tsql"),
    ("SELECT id, GETDATE() AS r FROM t", ["r"], "tsql"),
    ("SELECT id, r * 2 AS r FROM (SELECT id, random() AS r FROM t) s", ["r"], "duckdb"),
    ("WITH x AS (SELECT id, now() AS r FROM t) SELECT id, r FROM x", ["r"], "duckdb"),
    ("SELECT * FROM (SELECT id, uuid() AS r FROM t) s", ["r"], "duckdb"),
    ("SELECT id, string_agg(s, ',') AS r FROM t GROUP BY id", ["r"], "duckdb"),
    ("SELECT id, list(s) AS r FROM t GROUP BY id", ["r"], "duckdb"),
    ("SELECT id, any_value(s) AS r FROM t GROUP BY id", ["r"], "duckdb"),
]


@pytest.mark.parametrize("sql, columns, dialect", VOLATILE)
def test_volatile_columns_are_excluded_and_named(sql, columns, dialect):
    reference = tbl(id=[1, 2], r=["x", "y"])
    primary = tbl(id=[2, 1], r=["q", "z"])
    opts = CompareOptions(dialect=dialect)
    v = compare_tables(primary, reference, sql=sql, options=opts)
    assert v.category == "nondeterministic", v.message
    assert v.evidence["volatile_columns"] == columns
    # the rest is still compared: a wrong id is a divergence, and the record names r
    wrong = compare_tables(tbl(id=[1, 3], r=["q", "z"]), reference, sql=sql, options=opts)
    assert wrong.category == "values" and wrong.evidence["volatile_columns"] == columns
    # a schema difference is still a schema difference
    assert compare_tables(tbl(id=["1", "2"], r=["q", "z"]), reference, sql=sql,
                          options=opts).category == "schema"


def test_unaliased_volatile_expression_is_found_by_position():
    v = compare_tables(tbl(**{"now()": [1]}), tbl(**{"current_timestamp": [2]}), sql="SELECT now()")
    assert v.category == "nondeterministic" and v.evidence["volatile_columns"] == ["now()"]


@pytest.mark.parametrize("sql", [
    "SELECT id, r FROM t",
    "SELECT id, string_agg(s, ',' ORDER BY s) AS r FROM t GROUP BY id",
    "SELECT id, first(s ORDER BY s) AS r FROM t GROUP BY id",
    "SELECT id, 'random()' AS r FROM t",
])
def test_deterministic_queries_still_diverge(sql):
    v = compare_tables(tbl(id=[1, 2], r=["x", "q"]), tbl(id=[1, 2], r=["x", "y"]), sql=sql)
    assert v.category == "values", v.message


def test_equal_answers_with_volatile_columns_are_still_nondeterministic():
    t = tbl(id=[1], r=[0.5])
    assert compare_tables(t, t, sql="SELECT id, random() AS r FROM t").category == "nondeterministic"


@pytest.mark.parametrize("sql", [
    "SELECT id FROM t WHERE random() < 0.5",
    "SELECT id FROM t ORDER BY random() LIMIT 2",
    "SELECT id FROM (SELECT id, random() AS r FROM t) s WHERE r < 0.5",
    "SELECT id FROM t USING SAMPLE 10",
    "SELECT id FROM t TABLESAMPLE (50 PERCENT)",
    "SELECT sum(id) AS id FROM (SELECT id FROM t LIMIT 2) s",
])
def test_undetermined_row_sets_check_only_the_schema(sql):
    reference = tbl(id=[1, 2, 3])
    v = compare_tables(tbl(id=[7]), reference, sql=sql)
    assert v.category == "nondeterministic", v.message
    assert v.evidence["verified"] == ["schema"]
    assert compare_tables(reference, reference, sql=sql).ok
    assert compare_tables(tbl(id=["7"]), reference, sql=sql).category == "schema"


# -- cuts ----------------------------------------------------------------------------------
REF = tbl(g=[1, 2, 2], id=[10, 20, 30])


@pytest.mark.parametrize("sql", [
    "SELECT g, id FROM t LIMIT 3",
    "SELECT g, id FROM t FETCH FIRST 3 ROWS ONLY",
    "SELECT g, id FROM t LIMIT 3 OFFSET 5",
])
def test_a_limit_without_order_may_keep_any_rows(sql):
    v = compare_tables(tbl(g=[5, 6, 7], id=[1, 2, 3]), REF, sql=sql)
    assert v.category == "nondeterministic", v.message
    assert v.evidence["verified"] == ["schema", "row_count"]
    assert compare_tables(REF.slice(0, 2), REF, sql=sql).category == "missing_rows"


def test_top_is_a_cut_in_tsql():
    v = compare_tables(tbl(g=[5, 6, 7], id=[1, 2, 3]), REF, sql="SELECT TOP 3 g, id FROM t",
                       options=CompareOptions(dialect="tsql"))
    assert v.category == "nondeterministic"


def test_a_limit_the_answer_does_not_reach_cut_nothing():
    v = compare_tables(tbl(g=[5, 6, 7], id=[1, 2, 3]), REF, sql="SELECT g, id FROM t LIMIT 10")
    assert v.category == "values"


def test_rows_strictly_inside_an_ordered_cut_are_checked():
    sql = "SELECT g, id FROM t ORDER BY g LIMIT 3"
    tie = tbl(g=[1, 2, 2], id=[10, 20, 40])
    v = compare_tables(tie, REF, sql=sql)
    assert v.category == "nondeterministic"
    assert v.evidence["verified"] == ["schema", "row_count", "rows_inside_the_cut", "order"]
    inside = tbl(g=[1, 2, 2], id=[11, 20, 30])
    assert compare_tables(inside, REF, sql=sql).category == "values"
    assert compare_tables(tie.take([1, 0, 2]), REF, sql=sql).category == "order"


def test_an_offset_allows_ties_at_both_edges():
    sql = "SELECT g, id FROM t ORDER BY g LIMIT 3 OFFSET 2"
    reference = tbl(g=[1, 2, 3], id=[10, 20, 30])
    first_tie = tbl(g=[1, 2, 3], id=[11, 20, 30])
    assert compare_tables(first_tie, reference, sql=sql).category == "nondeterministic"
    assert compare_tables(first_tie, reference, sql=sql.replace(" OFFSET 2", "")).category \
        == "values"


def test_an_order_over_every_column_fixes_the_cut():
    sql = "SELECT g, id FROM t ORDER BY g, id LIMIT 3"
    assert Nondeterminism.of(sql).cut is None
    assert compare_tables(tbl(g=[1, 2, 2], id=[10, 20, 40]), REF, sql=sql).category == "values"


def test_dialect_is_an_argument():
    assert Nondeterminism.of("SELECT TOP 2 a FROM t", "tsql").cut is not None
    assert Nondeterminism.of("SELECT NEWID() AS g", "tsql").functions == ["uuid"]
    assert not Nondeterminism.of("SELECT a FROM t").any
    assert not Nondeterminism.of("not sql at all (").any


def test_side_effects_are_found():
    assert side_effects("SELECT nextval('s')") == ["nextval"]
    assert side_effects("SELECT a, setval('s', 5) FROM t") == ["setval"]
    assert side_effects("SELECT random()") == []
    # a session's settings, seed and locks, which a pooled connection would carry on
    assert side_effects("SELECT set_config('TimeZone', 'UTC', false)", "postgres") == \
        ["set_config"]
    assert side_effects("SELECT setseed(0.5)") == ["setseed"]
    assert side_effects("SELECT pg_advisory_lock(7)", "postgres") == ["pg_advisory_lock"]


# -- properties ------------------------------------------------------------------------------
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(rows=st.lists(st.integers(0, 3), min_size=2, max_size=15), data=st.data())
def test_any_valid_cut_is_never_a_divergence_and_a_planted_one_is(rows, data):
    ids = list(range(len(rows)))
    k = data.draw(st.integers(1, len(rows)))
    sql = f"SELECT g, id FROM t ORDER BY g LIMIT {k}"

    def cut(order):
        ranked = sorted(order, key=lambda i: rows[i])
        return tbl(g=[rows[i] for i in ranked[:k]], id=[ids[i] for i in ranked[:k]])

    reference = cut(data.draw(st.permutations(ids)))
    primary = cut(data.draw(st.permutations(ids)))
    v = compare_tables(primary, reference, sql=sql)
    assert v.category in ("match", "nondeterministic"), v.message
    g = reference.column("g").to_pylist()
    inside = [i for i in range(k) if g[i] != g[-1]]
    if inside:
        at = data.draw(st.sampled_from(inside))
        planted = reference.set_column(1, "id", pa.array(
            [v + 1000 if i == at else v for i, v in enumerate(reference.column("id").to_pylist())]))
        assert compare_tables(planted, reference, sql=sql).category == "values"


def test_a_text_is_read_once_and_each_caller_gets_its_own_reading(monkeypatch):
    """A comparison asked twice per statement, and a replay compares the answers to one
    prepared text with every parameter set: sqlglot read it each time (issue 37)."""
    from gateway.sql import nondeterminism
    read = []
    parse_one = nondeterminism._parse_one

    def counted(sql, dialect):
        read.append(sql)
        return parse_one(sql, dialect)

    monkeypatch.setattr(nondeterminism, "_parse_one", counted)
    sql = "SELECT g, random() AS r FROM t LIMIT 3 -- read once"
    first = Nondeterminism.of(sql)
    first.functions.append("changed by its caller")
    second = Nondeterminism.of(sql)
    assert read == [sql]
    assert second.functions == ["rand"] and second.cut is not None
    long = "SELECT random() AS r" + " " * nondeterminism._KEPT_CHARS
    assert Nondeterminism.of(long).functions == Nondeterminism.of(long).functions == ["rand"]
    assert read == [sql, long, long]  # long texts are not kept


def test_a_query_shape_is_read_once_and_each_caller_gets_its_own(monkeypatch):
    """As for nondeterminism: a replay compares the answers to one prepared text with every
    parameter set, and sqlglot read its shape each time (issue 37)."""
    import sqlglot

    from gateway.sql.query_shape import QueryShape

    read = []
    parse = sqlglot.parse

    def counted(sql, *args, **kwargs):
        read.append(sql)
        return parse(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse", counted)
    sql = "SELECT g, count(*) FROM t GROUP BY g ORDER BY g -- shape read once"
    first = QueryShape.of(sql, "duckdb")
    first.order.clear()
    first.group_keys.append(True)
    second = QueryShape.of(sql, "duckdb")
    assert read == [sql]
    assert [t.column for t in second.order] == [0] and second.group_keys == [True, False]
