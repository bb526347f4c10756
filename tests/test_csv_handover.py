"""gateway_csv.handover: what the csv engine hands to its fallback from the statement's
words alone, without importing its planner, the planner refuses too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.errors import Unsupported
from gateway_csv import handover
from tests.csv_support import gateway_for, write

#: the function itself (the fixture below replaces it in the module)
refusal = handover.refusal
DATA = "k,a,b\nx,1,2\ny,3,4\nx,5,7\n"
#: arguments each aggregate is given
TWO = {"regr_slope", "arg_max", "arg_min", "argmax", "argmin",
       "max_by", "min_by", "quantile", "quantile_cont", "quantile_disc", "approx_quantile",
       "string_agg", "group_concat", "listagg"}
REFUSED = [
    *(f"SELECT k, {name}(a, b) FROM t GROUP BY k" if name in TWO else
      f"SELECT k, {name}(a) FROM t GROUP BY k" for name in sorted(handover.AGGREGATES)),
    "SELECT k, MODE (a) AS m FROM t GROUP BY k",
    "SELECT k FROM t GROUP BY k HAVING kurtosis(a) > 0",
    "SELECT k FROM t GROUP BY k ORDER BY skewness(a)",
    "SELECT k, pow(kurtosis(a), 2) AS k2 FROM t GROUP BY k",
    "SELECT k, a FROM (SELECT k, a, rank() OVER (PARTITION BY k ORDER BY a DESC) AS n "
    "FROM t) AS s WHERE n <= 2",
    "SELECT k, sum(a) OVER () FROM t",
    "SELECT k, sum(a) over(PARTITION BY k) FROM t",
    "SELECT a FROM t WHERE a IN ( select 1 )",
    "SELECT (SELECT 1) AS one, a FROM t",
    "SELECT a FROM t WHERE EXISTS (SELECT 1)",
]


@pytest.fixture
def planner_alone(tmp_path, monkeypatch):
    """A gateway whose csv engine (no fallback) has no handover: its planner judges."""
    monkeypatch.setattr(handover, "refusal", lambda sql: None)
    with gateway_for(write(tmp_path, "t.csv", DATA)) as gw:
        yield gw


@pytest.mark.parametrize("sql", REFUSED)
def test_what_it_refuses_the_planner_refuses(planner_alone, sql):
    assert isinstance(refusal(sql), Unsupported)
    with pytest.raises(Unsupported):
        planner_alone.execute(sql, engine="csv").to_arrow()


@pytest.mark.parametrize("sql", [
    "SELECT k, sum(a) FROM t WHERE k <> 'median(' GROUP BY k",
    'SELECT k AS "median", count(*) FROM t GROUP BY k',
    "SELECT k, sum(a) AS median FROM t GROUP BY k ORDER BY median",
    "SELECT k, max(a) - min(b) AS over FROM t GROUP BY k",
    "SELECT 'over (select' AS s, a FROM t",
    "SELECT a -- median(a)\nFROM t",
    "SELECT a FROM t WHERE k = '\\' OR k = 'median('",  # a backslash: the planner reads it
    "SELECT a FROM t /* median( */",
    # the aggregates the fused scan computes since 2026-12-07 (h2o's q9, q6's stddev)
    "SELECT k, pow(corr(a, b), 2) AS r2 FROM t GROUP BY k",
    "SELECT k, stddev(a), var_pop(b), covar_samp(a, b) FROM t GROUP BY k HAVING variance(a) > 0",
])
def test_words_in_strings_names_and_comments_refuse_nothing(tmp_path, sql):
    assert refusal(sql) is None
    with gateway_for(write(tmp_path, "t.csv", DATA)) as gw:
        result = gw.execute(sql, engine="csv")
        result.to_arrow()
        assert result.engine == "csv"


@pytest.mark.parametrize("sql", [
    "SELECT k, a FROM (SELECT k, a, row_number() OVER (PARTITION BY k ORDER BY a DESC) AS n "
    "FROM t) AS s WHERE n <= 2",
    "SELECT k, a, n FROM (SELECT k, a, ROW_NUMBER ( ) over (PARTITION BY k ORDER BY a) AS n "
    "FROM t) AS s WHERE n <= 2",
])
def test_a_row_number_window_is_left_to_the_engine(tmp_path, sql):
    """A top-N per group the engine may answer (gateway_csv.topn) or refuse itself."""
    assert refusal(sql) is None
    with gateway_for(write(tmp_path, "t.csv", DATA), fallback="duck") as gw:
        result = gw.execute(sql, engine="csv")
        result.to_arrow()
        assert result.engine == ("duck" if ", n FROM" in sql else "csv")


def test_a_statement_handed_over_imports_no_planner(tmp_path):
    # sqlglot and its DuckDB dialect: about 90 ms of CPU before DuckDB starts (h2o q6, q8, q9)
    path = write(tmp_path, "t.csv", DATA)
    code = ("import sys\nimport gateway\n"
            f"config = {{'engines': {{'csv': {{'type': 'csv', 'fallback': 'duck'}}, "
            f"'duck': {{'type': 'duckdb'}}}}, 'sources': {{'t': {{'path': {str(path)!r}}}}}}}\n"
            "with gateway.connect(config) as gw:\n"
            "    result = gw.execute('SELECT k, mode(a) AS m FROM t GROUP BY k', engine='csv')\n"
            "    rows = result.to_arrow().num_rows\n"
            "print(rows, result.engine, 'sqlglot' in sys.modules,\n"
            "      'gateway_csv.shape_aggregation' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # nor the common aggregations' reader and the fused scan it imports
    assert done.stdout.split() == ["2", "duck", "False", "False"], done.stderr
