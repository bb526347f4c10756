"""The classes issue #39 found running DuckDB's sqllogictest files through the csv engine.

Each: the csv engine alone refuses it as Unsupported (never a wrong answer, never an
internal message), and with ``fallback = "duck"`` the answer (or error) is DuckDB's.
"""

from __future__ import annotations

import pytest

import gateway
from tests.csv_support import assert_same, gateway_for, write

U = "a,b,i\n1,30,1\n3,10,2\n2,20,3\n"


def _same_outcome(gw: gateway.Gateway, sql: str) -> None:
    """The csv engine (falling back) and DuckDB both answer alike, or both refuse."""
    try:
        expected = gw.execute(sql, engine="duck").to_arrow()
    except gateway.QueryError:
        with pytest.raises(gateway.QueryError):
            gw.execute(sql, engine="csv").to_arrow()
        return
    got = gw.execute(sql, engine="csv")
    table = got.to_arrow()
    assert table.equals(expected), f"{sql}: {table} against {expected}"  # schema included


CLASSES = [
    # native wrong answer: sorted by the column, not the alias
    "SELECT a, b AS a FROM t ORDER BY a LIMIT 1",
    # native answers to SQL DuckDB's binder refuses
    "SELECT zzz.* FROM t",
    "SELECT zzz.a FROM t",
    "SELECT a FROM t ORDER BY 'x', i",
    "SELECT a FROM t ORDER BY true",
    # csv errors where DuckDB answers
    "SELECT a FROM t WHERE 'a' LIKE 'a' ESCAPE chr(92)",
    "SELECT 3!",
    "SELECT i % 2 AS k FROM t WHERE k <> 0",
    # a select item naming an earlier one's alias (test_scalar_projection.test), reached
    # once INTEGER arithmetic was native
    "SELECT 1 AS x, x * 2",
    "SELECT a AS k, k || 'y' AS l FROM t",
    "SELECT [x * 2 FOR x IN [1, 2]] AS l FROM t",
    "SELECT COUNT() FROM t",
    # types and names
    "SELECT 'x' || NULL FROM t",
    "SELECT +i FROM t",
    # found on DuckDB's own test/sql files (aggregate/distinct, function/date)
    "SELECT DISTINCT a FROM t ORDER BY a, b",
    "SELECT DISTINCT i % 2 FROM t WHERE i < 3 ORDER BY i",
    "SELECT 'j': 42",
]


@pytest.mark.parametrize("sql", CLASSES)
def test_each_class_is_unsupported_alone_and_duckdbs_with_the_fallback(tmp_path, sql):
    path = write(tmp_path, "t.csv", U)
    with gateway_for(path) as gw, pytest.raises(gateway.Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        _same_outcome(gw, sql)


@pytest.mark.parametrize("sql", [
    # a trailing semicolon and comment: one statement ("expected one statement, got 2")
    "SELECT a FROM t; -- a note", "SELECT a FROM t;\n-- a note\n", "SELECT a FROM t -- a note",
    # what stays native beside the refusals above
    "SELECT t.a, t.b FROM t ORDER BY t.a", "SELECT x.a FROM t AS x WHERE x.i > 1 ORDER BY 1",
    "SELECT b AS a FROM t ORDER BY a", "SELECT a + 1 AS s FROM t",
    "SELECT a FROM t ORDER BY 1 DESC",
    # native again (issue #39): INTEGER / INTEGER is a DOUBLE
    "SELECT 7 / 2 AS h, -7 / 2 AS n, 7 / 0 AS z, a / 2 AS g FROM t",
    # INTEGER arithmetic, // and % (issue #39), and HUGEINT / BIGINT (sum / count)
    "SELECT 7 // 2 AS q, -7 // 2 AS r, -7 % 2 AS m, 7 % -2 AS n, 7 * 3 - 9 AS p FROM t",
    "SELECT sum(i) / count(*) AS mean, sum(i) / 3 AS third FROM t",
    "SELECT i + 1 AS i, i * 2 AS j FROM t"])
def test_what_the_csv_engine_answers_itself(tmp_path, sql):
    path = write(tmp_path, "t.csv", U)
    with gateway_for(path) as gw:
        assert_same(gw, sql)


@pytest.mark.parametrize("content", ["d,n\n0020-01-01 (BC),1\n2020-01-01,2\n",
                                     "d,n\n10000-01-01,1\n9000-01-01,2\n",
                                     "d,n\n2020-01-01 10:00:00,1\n0020-01-01 10:00:00 (BC),2\n"])
def test_dates_the_scanner_cannot_read_are_not_text(tmp_path, content):
    """DuckDB types these DATE or TIMESTAMP; read as text, max and ORDER BY were wrong."""
    path = write(tmp_path, "d.csv", content)
    with gateway_for(path) as gw, pytest.raises(gateway.Unsupported, match="dates such as"):
        gw.execute("SELECT max(d) FROM t", engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        for sql in ("SELECT max(d) AS m, min(d) AS l FROM t",
                    "SELECT d FROM t ORDER BY d DESC LIMIT 1"):
            _same_outcome(gw, sql)


def test_a_text_column_of_dates_and_words_stays_native(tmp_path):
    path = write(tmp_path, "d.csv", "d\n10000-01-01\nhello\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT max(d) AS m FROM t")


def test_date_trunc_by_a_column_goes_to_the_fallback(tmp_path):
    """DuckDB's test_date_trunc.test: ``date_trunc(s, d)`` with the unit in a column was
    answered natively, wrong: sqlglot reads the column s as the unit 's' (seconds)."""
    path = write(tmp_path, "t.csv", "s,d\nyear,1992-12-02\nmonth,1993-03-04\nday,1994-05-06\n")
    with gateway_for(path) as gw, pytest.raises(gateway.Unsupported):
        gw.execute("SELECT date_trunc(s, d) FROM t", engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        _same_outcome(gw, "SELECT date_trunc(s, d) AS t FROM t")
        answer = gw.execute("SELECT date_trunc('month', d) AS m FROM t", engine="csv")
        assert answer.notes.get("answered_by", "csv") == "csv"


def test_a_bare_select_is_a_syntax_error_as_in_duckdb(tmp_path):
    """DuckDB's test_scalar_projection.test: ``SELECT`` alone was answered natively (no
    columns, no rows) where DuckDB refuses it."""
    path = write(tmp_path, "t.csv", U)
    with gateway_for(path) as gw, pytest.raises(gateway.QueryError, match="selection list"):
        gw.execute("SELECT", engine="csv").to_arrow()
