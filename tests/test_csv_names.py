"""The csv engine names its answer's columns as DuckDB does.

The shadow comparator forgives engine-chosen names (``ignore_engine_chosen_names``),
so a csv answer with ``A + 1`` where DuckDB says ``(A + 1)``, or ``A`` where the file
says ``a``, passed every check while a client reading columns by name got others.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp, parse_one

from gateway_csv.naming import KEYWORDS
from gateway_csv.query import output_name
from tests.csv_support import assert_same, gateway_for, write

CSV = "a,Bc,year,d,x\n1,x,3,2024-01-02,1.5\n2,y,4,2023-05-06,-2.25\n3,,5,2022-01-01,0\n"

ITEMS = [
    "A", "t.A", '"BC"', "bc", "A + 1", "a*2", "-a", "max(A)", "MAX(year)", "min(YEAR)",
    "sum(a)", "avg(x)", "count(*)", "COUNT(bc)", "count(DISTINCT a)", "lower(bc)",
    "upper(BC)", "length(bc)", "substr(bc, 1, 2)", "abs(a)", "round(x, 1)", "floor(x)",
    "bc || 'x'", "a = 1", "a <> 1", "a != 1", "a > 1 AND a < 3", "NOT a = 1", "a IS NULL",
    "a IS NOT NULL", "bc LIKE 'x%'", "bc ILIKE 'X%'", "a IN (1, 2)", "a BETWEEN 1 AND 2",
    "CASE WHEN a > 1 THEN 'y' ELSE 'n' END", "year(d)", "date_part('year', d)",
    "extract(year FROM d)", "strftime(d, '%Y')", "trim(bc)", "coalesce(a, 0)", "a % 2",
    "a / 2", "a // 2", "x > 1.5", "(a)", "a - -1",
]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    path = write(tmp_path_factory.mktemp("names"), "t.csv", CSV)
    with gateway_for(path) as gw:
        yield gw


@pytest.mark.parametrize("item", ITEMS)
def test_an_unaliased_item_is_named_as_duckdb_names_it(gw, item):
    assert_same(gw, f"SELECT {item} FROM t")


@pytest.mark.parametrize("sql", [
    "SELECT A FROM t",  # the projection answered without the planner
    "SELECT A, bc FROM t ORDER BY a",
    "SELECT year(d), count(*) FROM t GROUP BY 1 ORDER BY 1",
    "SELECT a % 2, count(*) FROM t GROUP BY a % 2 ORDER BY 1",
    "SELECT lower(bc) AS l, a > 1 FROM t WHERE a > 0",
])
def test_statements_name_their_columns_as_duckdb_does(gw, sql):
    assert_same(gw, sql)


def test_a_zero_length_quoted_name_is_refused_as_duckdb_refuses_it(gw):
    from gateway.errors import QueryError

    with pytest.raises(QueryError, match="zero-length"):
        gw.execute('SELECT a AS "" FROM t WHERE true', engine="csv").to_arrow()


def test_the_keyword_list_is_duckdbs():
    found = {row[0] for row in duckdb.sql("SELECT keyword_name FROM duckdb_keywords()")
             .fetchall()}
    assert found == KEYWORDS


_con = duckdb.connect()


@settings(max_examples=150, deadline=None)
@given(fn=st.sampled_from(["count", "COUNT", "sum", "Sum", "avg", "min", "MAX"]),
       name=st.one_of(st.sampled_from(["year", "a", "A", "Mixed_Case", "select", "x1", "_u",
                                       "order", "date", "value", "name", "_0", "_9x", "__0"]),
                      st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)),
       quoted=st.booleans())
def test_the_names_given_without_asking_duckdb_are_duckdbs(fn, name, quoted):
    """output_name names an aggregate of a plain column itself; where it does, DuckDB
    must give that very name (a keyword column is written quoted: max("year"))."""
    column = f'"{name}"' if quoted else name
    try:
        item = parse_one(f"SELECT {fn}({column}) FROM t", read="duckdb").expressions[0]
    except Exception:
        return
    for col in item.find_all(exp.Column):  # as the planner leaves them (gateway_csv.query)
        col.this.set("quoted", False)
    ours = output_name(item, [name])
    if ours is None:
        return
    _con.execute(f'CREATE OR REPLACE TABLE t ("{name}" BIGINT)')
    theirs = _con.execute(f"SELECT {fn}({column}) FROM t").description[0][0]
    assert ours == theirs


@pytest.mark.parametrize("sql", [
    "SELECT a FROM t WHERE true LIMIT 99999999999999999999",
    "SELECT a FROM t WHERE true LIMIT 9223372036854775808",
    "SELECT a FROM t WHERE true LIMIT 1 OFFSET 9223372036854775807",
])
def test_limits_past_bigint_are_left_to_duckdb(gw, sql):
    """The planner answered "Python int too large to convert to C long" where DuckDB
    answers (2^63) or refuses (out of range) in its own words."""
    from gateway.errors import Unsupported

    with pytest.raises(Unsupported, match="2\\^62"):
        gw.execute(sql, engine="csv").to_arrow()
