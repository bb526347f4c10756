"""``[shadow] uncut_rows``: a LIMIT's rows checked against the reference's answer without it."""

from __future__ import annotations

import pytest

import gateway
from gateway.shadow.uncut import uncut_sql
from tests import planted_bugs
from tests.conformance.corpus import SOURCES

SQL = "SELECT trip_id, total_amount FROM trips LIMIT 5"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default store lands in the test's folder


def shadowed(sql, uncut_rows, **primary):
    config = {"engines": {"primary": {"type": "planted", **primary},
                          "reference": {"type": "duckdb"}},
              "sources": SOURCES,
              "shadow": {"reference": "reference", "store": False, "uncut_rows": uncut_rows}}
    with gateway.connect(config, plugins=[planted_bugs]) as gw:
        result = gw.execute(sql, engine="primary")
        result.to_arrow()
        assert result.shadow.wait(60)
        return result.shadow


def test_other_rows_the_limit_allows_are_verified_in_the_uncut_answer():
    off = shadowed(SQL, 0, limit_from_end=True)
    assert off.category == "nondeterministic" and "uncut" not in off.evidence
    on = shadowed(SQL, 10_000, limit_from_end=True)
    assert on.category == "nondeterministic", on.message
    assert on.evidence["verified"][-1] == "rows_in_the_uncut_answer"
    assert on.evidence["uncut"]["rows"] > 5 and "without the cut" in on.message


def test_a_row_the_uncut_answer_lacks_is_a_values_divergence():
    # a perturbed float under a LIMIT without ORDER BY: the cut alone lets it pass
    off = shadowed(SQL, 0, bug="float_perturbed", limit_from_end=True)
    assert off.category == "nondeterministic"
    on = shadowed(SQL, 10_000, bug="float_perturbed", limit_from_end=True)
    assert on.category == "values", on.message
    assert on.evidence["uncut"]["comparison"]["category"] != "missing_rows"


def test_an_uncut_answer_over_the_cap_is_not_checked():
    v = shadowed(SQL, 10, bug="float_perturbed", limit_from_end=True)
    assert v.category == "nondeterministic"
    assert "more than 10 rows" in v.evidence["uncut"]["not_checked"]


def test_a_total_order_or_a_volatile_function_needs_no_third_query():
    v = shadowed("SELECT trip_id FROM trips ORDER BY trip_id LIMIT 5", 10_000)
    assert v.category == "match" and "uncut" not in v.evidence
    v = shadowed("SELECT trip_id, random() AS r FROM trips LIMIT 5", 10_000, limit_from_end=True)
    assert v.category == "nondeterministic" and "uncut" not in v.evidence


@pytest.mark.parametrize("sql, compared, runs", [
    ("SELECT a FROM t ORDER BY b LIMIT 3 OFFSET 2", "SELECT a FROM t", "SELECT a FROM t LIMIT 101"),
    ("SELECT a FROM t UNION ALL SELECT a FROM u LIMIT 3", "SELECT a FROM t UNION ALL SELECT a FROM u",
     "SELECT a FROM t UNION ALL SELECT a FROM u LIMIT 101"),
])
def test_the_uncut_statement(sql, compared, runs):
    assert uncut_sql(sql, "duckdb", 100) == (compared, runs)


def test_a_parameter_in_the_cut_or_a_statement_not_a_query_is_not_rewritten():
    assert uncut_sql("SELECT a FROM t LIMIT ?", "duckdb", 100) is None
    assert uncut_sql("DELETE FROM t", "duckdb", 100) is None


def test_uncut_rows_must_not_be_negative(tmp_path):
    config = {"engines": {"d": {"type": "duckdb"}}, "shadow": {"reference": "d", "uncut_rows": -1}}
    with pytest.raises(gateway.ConfigError, match="uncut_rows: must not be negative"):
        gateway.connect(config)
