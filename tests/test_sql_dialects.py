"""Placeholder styles and transpiling (gateway.drivers.dialects), shared by the adbc and odbc engines."""

from __future__ import annotations

import pytest

import gateway
from gateway.drivers.dialects import SqlRewriter


@pytest.mark.parametrize(("sql", "values", "expected"), [
    ("SELECT ?, ?", [1, 2], ("SELECT ?, ?", [1, 2])),
    ("SELECT $2, $1, $2", [1, 2], ("SELECT ?, ?, ?", [2, 1, 2])),
    ("SELECT @p2, @p1", [1, 2], ("SELECT ?, ?", [2, 1])),
    ("SELECT :a, :b, :a", {"a": 1, "b": 2}, ("SELECT ?, ?, ?", [1, 2, 1])),
    ("SELECT '?', ? -- ?", [1], ("SELECT '?', ? -- ?", [1])),
    ("SELECT x::int, ?", [1], ("SELECT x::int, ?", [1])),
])
def test_to_qmark(sql, values, expected):
    assert SqlRewriter("sqlite", "qmark", None, "e").rewrite(sql, values) == expected


@pytest.mark.parametrize(("sql", "values", "expected"), [
    ("SELECT ?, '?', ?", [1, 2], ("SELECT $1, '?', $2", [1, 2])),
    ("SELECT @p1, a[1:2]", [1], ("SELECT $1, a[1:2]", [1])),
    ("SELECT :name", {"name": 3}, ("SELECT $1", [3])),
])
def test_to_numeric(sql, values, expected):
    assert SqlRewriter("postgres", "numeric", None, "e").rewrite(sql, values) == expected


def test_transpile_keeps_the_placeholders_and_their_values():
    pg = SqlRewriter("postgres", "numeric", "duckdb", "e")
    assert pg.rewrite("SELECT year(t), $1 FROM x WHERE a = $1", [5]) == (
        "SELECT EXTRACT(YEAR FROM t), $1 FROM x WHERE a = $1", [5])
    lite = SqlRewriter("sqlite", "qmark", "duckdb", "e")
    assert lite.rewrite("SELECT i / 2, $2, $1 FROM x", [1, 2]) == (
        "SELECT CAST(i AS REAL) / 2, ?, ? FROM x", [2, 1])


def test_wrong_values_name_the_problem():
    rw = SqlRewriter("sqlite", "qmark", None, "e")
    with pytest.raises(gateway.QueryError, match="takes 2 parameter"):
        rw.rewrite("SELECT ?, ?", [1])
    with pytest.raises(gateway.QueryError, match="no values"):
        rw.rewrite("SELECT ?", None)
    with pytest.raises(gateway.QueryError, match="no value for the placeholder"):
        rw.rewrite("SELECT :a", {"b": 1})
    with pytest.raises(gateway.QueryError, match="mixes placeholder styles"):
        rw.rewrite("SELECT ?, $1", [1])


def test_what_sqlglot_cannot_write_is_unsupported():
    with pytest.raises(gateway.Unsupported, match="cannot write this duckdb statement"):
        SqlRewriter("tsql", "qmark", "duckdb", "e").rewrite(
            "SELECT a FROM x ORDER BY 1 NULLS LAST", None)
    with pytest.raises(gateway.QueryError, match="cannot parse"):
        SqlRewriter("postgres", "numeric", "duckdb", "e").rewrite("SELEC 1 FRM", None)
