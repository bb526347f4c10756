"""The csv engine's silent wrong answers and hangs of issue #22, each pinned by a test.

Each answer is compared with DuckDB's own ``read_csv`` of the same file through the
gateway; where the csv engine cannot give DuckDB's answer it must say Unsupported, so
that the fallback engine answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.errors import QueryError, Unsupported
from tests.csv_support import assert_same, gateway_for, write

ROOT = Path(__file__).resolve().parent.parent
ROWS = ("i,y,s,ts,d\n"
        "1,1.5,a\\b,2024-03-10 02:30:00,2024-01-05\n"
        "2,,%\\,2024-03-10 03:00:00.120,1969-12-31\n"
        "3,nan,İx,2024-01-01 00:00:00,2000-02-29\n"
        "4,0.0,C:\\dir\\,1969-07-20 20:17:40.000001,1900-03-01\n")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    path = write(tmp_path_factory.mktemp("wrong"), "rows.csv", ROWS)
    with gateway_for(path) as gw:
        yield gw


@pytest.mark.parametrize("sql", [
    "SELECT count(*) AS n FROM t WHERE y <= 'nan'::DOUBLE",
    "SELECT count(*) AS n FROM t WHERE 'nan'::DOUBLE >= y",
    "SELECT i, y < 'nan'::DOUBLE AS a, y >= 'nan'::DOUBLE AS b, y = 'nan'::DOUBLE AS c, "
    "y <> 'nan'::DOUBLE AS d FROM t ORDER BY i",
])
def test_a_null_compared_with_nan_is_null(gw, sql):
    assert_same(gw, sql)


@pytest.mark.parametrize("sql", [
    "SELECT i, s LIKE '%\\%' AS a, s LIKE 'a\\b' AS b, s NOT LIKE '%\\' AS c FROM t ORDER BY i",
    "SELECT count(*) AS n FROM t WHERE s LIKE '%\\%'",
    "SELECT count(*) AS n FROM t WHERE s NOT LIKE 'C:\\dir\\'",
    "SELECT i, s ILIKE '%\\X' AS a FROM t ORDER BY i",
])
def test_like_has_no_escape_character_unless_escape_names_one(gw, sql):
    got = assert_same(gw, sql)
    assert got.num_rows > 0


def test_like_counts_rows_ending_in_a_backslash(gw):
    got = gw.execute("SELECT count(*) AS n FROM t WHERE s LIKE '%\\'", engine="csv").to_arrow()
    assert got.column("n").to_pylist() == [2]


@pytest.mark.parametrize("sql", [
    "SELECT substr('hello', 5, -1) AS x",
    "SELECT i, substr(s, 2, -1) AS a, substr(s, 9, -2) AS b, substr(s, 3, -5) AS c, "
    "substr(s, 2, 0) AS d, substr(s, 2, NULL) AS e FROM t ORDER BY i",
])
def test_substr_with_a_negative_length_takes_the_characters_before_the_start(gw, sql):
    assert_same(gw, sql)


def test_strftime_with_an_empty_format_is_left_to_the_fallback(gw):
    with pytest.raises(Unsupported):
        gw.execute("SELECT strftime(ts, '') AS x FROM t", engine="csv").to_arrow()
    with pytest.raises(QueryError, match="Empty format"):
        gw.execute("SELECT strftime(ts, '') AS x FROM t", engine="duck").to_arrow()


@pytest.mark.parametrize("sql", [
    "SELECT i, CAST(CASE WHEN i > 0 THEN ts END AS VARCHAR) AS x FROM t ORDER BY i",
    "SELECT i, CASE WHEN i > 0 THEN ts END || '' AS x FROM t ORDER BY i",
    "SELECT count(*) AS n FROM t "
    "WHERE CAST(CASE WHEN i > 0 THEN ts END AS VARCHAR) = '2024-03-10 02:30:00'",
])
def test_a_timestamp_as_text_is_written_as_duckdb_writes_it(gw, sql):
    got = assert_same(gw, sql)
    assert "00.000000" not in str(got.to_pylist())


def test_a_timestamptz_as_text_ends_in_the_zone_offset(tmp_path):
    path = write(tmp_path, "tz.csv", "i,ts\n1,2024-03-10 02:30:00+00\n"
                                     "2,2024-01-01 10:00:00.5+00\n3,1969-12-31 13:45:24.53603+00\n")
    with gateway_for(path) as gw:
        got = assert_same(gw, "SELECT CAST(CASE WHEN i > 0 THEN ts END AS VARCHAR) AS x FROM t")
        assert got.column("x").to_pylist() == ["2024-03-10 02:30:00+00",
                                               "2024-01-01 10:00:00.5+00",
                                               "1969-12-31 13:45:24.53603+00"]


@pytest.mark.parametrize("sql", ["SELECT 0.0::DOUBLE || '' AS x",
                                 "SELECT i, CASE WHEN i > 0 THEN y END || '|' AS x FROM t "
                                 "ORDER BY i"])
def test_a_double_joined_with_text_keeps_its_fraction(gw, sql):
    assert_same(gw, sql)


@pytest.mark.parametrize("sql", ["SELECT CAST(i AS VARCHAR) AS x FROM t",
                                 "SELECT y || '' AS x FROM t",
                                 "SELECT CAST(ts AS VARCHAR) AS x FROM t"])
def test_a_csv_column_cast_to_text_is_left_to_the_fallback(gw, sql):
    """DuckDB 2.0's read_csv reads a column cast to VARCHAR as its raw text (`007` for 7),
    and then binds the column as VARCHAR in the whole query."""
    with pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()


@pytest.mark.parametrize("sql", ["SELECT d - DATE '2000-01-01' AS x FROM t"])
def test_what_duckdb_computes_otherwise_is_left_to_the_fallback(gw, sql):
    """DATE - DATE is a BIGINT of days in DuckDB 2.0 (csv's was a duration)."""
    with pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()


@pytest.mark.parametrize("sql", ["SELECT y // 2 AS x FROM t", "SELECT 7.0::DOUBLE // 2 AS x",
                                 "SELECT y // -4 AS x FROM t"])
def test_the_integer_division_of_doubles_divides_as_in_duckdb(gw, sql):
    """DuckDB 2.0's // of doubles is the plain quotient (the csv engine once floored it,
    then left it to the fallback; native again since issue 39)."""
    assert_same(gw, sql)


@pytest.mark.parametrize("sql", ["SELECT y // 0 AS x FROM t", "SELECT 7.0::DOUBLE // -0.0 AS x"])
def test_the_integer_division_of_doubles_by_zero_is_duckdbs_error(gw, sql):
    """/ of doubles by zero is inf, but // is DuckDB's "Division by zero" error: not a
    native answer, so the fallback says it."""
    with pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()


@pytest.mark.parametrize("sql", ["SELECT 'İ' ILIKE 'i' AS x", "SELECT 'i' ILIKE 'İ' AS x",
                                 "SELECT i, s ILIKE 'i%' AS x FROM t ORDER BY i"])
def test_ilike_folds_the_dotted_capital_i_as_duckdb_does(gw, sql):
    assert_same(gw, sql)


def test_hugeint_sums_that_can_pass_38_digits_are_left_to_the_fallback(tmp_path):
    big = "9" * 38
    path = write(tmp_path, "huge.csv", f"h,g\n{big},1\n{big},1\n-5,2\n")
    with gateway_for(path) as gw:
        for sql in ("SELECT sum(h) AS s FROM t", "SELECT avg(h) AS a FROM t",
                    "SELECT g, sum(h) AS s FROM t GROUP BY g"):
            with pytest.raises(Unsupported):
                gw.execute(sql, engine="csv").to_arrow()
            with pytest.raises(QueryError, match="Overflow in HUGEINT addition"):
                gw.execute(sql, engine="duck").to_arrow()
        assert_same(gw, "SELECT sum(h) AS s FROM t WHERE h < 0")


TRUNCATE_WHILE_CHUNKING = r"""
import os, sys
from concurrent.futures import ThreadPoolExecutor
from gateway.errors import QueryError
from gateway_csv import _scanner
from gateway_csv.layout import sniff
from gateway_csv.scan import Scanner

path = sys.argv[1]
with open(path, "w") as f:
    f.write("id,name\n")
    f.writelines(f"{i},name{i}\n" for i in range(100_000))
file = _scanner.File(path)
layout = sniff(file.pread(0, 1 << 16), {}, path=path, complete=False)
os.truncate(path, 100)
scanner = Scanner(path, file, layout, ThreadPoolExecutor(1), chunk_bytes=16 << 10)
try:
    scanner.chunks()
except QueryError as exc:
    print(exc)
else:
    print("no error")
"""


def test_a_file_truncated_while_its_chunks_are_found_is_an_error_not_a_hang(tmp_path):
    run = subprocess.run([sys.executable, "-c", TRUNCATE_WHILE_CHUNKING,
                          str(tmp_path / "big.csv")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "the file changed during the scan" in run.stdout


FIFO_IN_SQL = r"""
import os, sys
from gateway.errors import QueryError
from tests.csv_support import gateway_for

os.chdir(sys.argv[1])
os.mkfifo("p.csv")
with open("r.csv", "w") as f:
    f.write("a\n1\n")
with gateway_for("r.csv") as gw:
    for engine in ("csv", "duck"):
        for sql in ("SELECT * FROM 'p.csv'", "SELECT * FROM read_csv('p.csv')"):
            try:
                gw.execute(sql, engine=engine, timeout=5).to_arrow()
            except QueryError as exc:
                print(engine, exc.kind, "FIFO" in str(exc))
            else:
                print(engine, "answered")
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_in_sql_is_refused_by_the_csv_and_duckdb_engines(tmp_path):
    run = subprocess.run([sys.executable, "-c", FIFO_IN_SQL, str(tmp_path)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:4] == ["csv unknown_object True"] * 2 + \
        ["duck unknown_object True"] * 2


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT CAST('-0.0' AS DOUBLE) * f AS x FROM t ORDER BY x",
    "SELECT CAST('-0.0' AS DOUBLE) * f AS x, count(*) AS n FROM t GROUP BY 1 ORDER BY 1",
    "SELECT count(DISTINCT CAST('-0.0' AS DOUBLE) * f) AS n FROM t",
    "SELECT count(DISTINCT CAST('-0.0' AS DOUBLE) * f) AS n, count(DISTINCT f) AS m FROM t",
])
def test_nans_of_either_sign_are_one_value(tmp_path, sql):
    """Found by arrowgate fuzz drawing from the native table: -0.0 * inf is a NaN with
    the sign bit set, which Arrow's grouping kept apart from NaN; DuckDB has one NaN."""
    path = write(tmp_path, "nan.csv", "f\ninf\n-inf\nnan\n0.0\n-0.0\n2.5\n")
    with gateway_for(path, columns={"f": "DOUBLE"}) as gw:
        assert_same(gw, sql)


def test_the_avg_of_a_hugeint_column_is_duckdbs_to_the_last_bit(tmp_path):
    """The property test found the csv engine's avg of a HUGEINT one ulp off DuckDB's."""
    path = tmp_path / "h.csv"
    path.write_text("h\n5188\n-9223372036854775813\n43229798211443556352\n")
    with gateway_for(path, fallback="duck") as gw:
        csv = gw.execute("SELECT avg(h) AS a FROM t", engine="csv")
        duck = gw.execute("SELECT avg(h) AS a FROM t", engine="duck")
        assert csv.to_arrow().to_pylist() == duck.to_arrow().to_pylist() == \
            [{"a": 1.1335475391529595e+19}]


LAZY = "s,n,d\nabc,1,2024-01-05\n7,2,1969-12-31\n"


@pytest.mark.parametrize("sql", [
    # no row reaches the cast: DuckDB answers
    "SELECT count(*) AS c FROM t WHERE n < 0 AND d = 1",
    "SELECT CASE WHEN n < 0 THEN d = 1 END AS x FROM t",
    "SELECT count(*) AS c FROM t WHERE n < 0 AND s = 7",
    "SELECT count(*) AS c FROM t WHERE n < 0 AND n = 'abc'",
    "SELECT count(*) AS c FROM t WHERE n < 0 AND d < 'abc'",
    "SELECT count(*) AS c FROM t WHERE n < 0 AND d IN (1, 2)",
    "SELECT count(n) AS c FROM t WHERE NOT n = n HAVING max(d) <> 2",
    "SELECT count(*) AS c FROM t WHERE n < 0 GROUP BY s HAVING max(d) = 1",
    "SELECT coalesce(n, 'x') AS x FROM t",
    "SELECT CASE WHEN n > 5 THEN 'x' ELSE 1 END AS x FROM t",
    # a row reaches it: DuckDB fails
    "SELECT count(*) AS c FROM t WHERE d = 1",
    "SELECT s = 7 AS x FROM t",
    "SELECT n > 'a' AS x FROM t",
    "SELECT CASE WHEN n > 1 THEN 'x' ELSE 1 END AS x FROM t",
])
def test_a_cast_duckdb_makes_only_where_rows_reach_it_is_left_to_the_fallback(tmp_path, sql):
    """Found by arrowgate fuzz on nasty values (`... WHERE NULL HAVING min(d) <> 2147483648`):
    DuckDB binds a number meeting a date (=, <>, IN), a text column (=) or a text constant
    that is no number with a cast that fails only when a row reaches it, so it answers where
    no row does; the csv engine refused every such query with a type error."""
    path = write(tmp_path, "lazy.csv", LAZY)
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        try:
            expected = gw.execute(sql, engine="duck").to_arrow()
        except QueryError as exc:
            with pytest.raises(QueryError) as caught:
                gw.execute(sql, engine="csv").to_arrow()
            assert caught.value.kind == exc.kind
        else:
            result = gw.execute(sql, engine="csv")
            assert result.engine == "duck" and result.to_arrow() == expected


@pytest.mark.parametrize(("sql", "average"), [
    ("SELECT avg(i) AS a, count(DISTINCT s) AS b, count(DISTINCT d) AS c FROM t", 1.0),
    ("SELECT g, avg(i) AS a, sum(i) AS s, count(DISTINCT s) AS b, count(DISTINCT d) AS c "
     "FROM t GROUP BY g ORDER BY g", 0.5),
])
def test_an_average_of_bigints_beside_two_distinct_counts_is_exact(tmp_path, sql, average):
    """Found by arrowgate fuzz on nasty values: with distinct counts of two expressions the
    columns are aggregated whole, and Arrow's mean added the integers up as doubles
    (2**63 - 1 and -2**63 cancelled into 0, not -1), where DuckDB's sum is exact."""
    path = write(tmp_path, "avg.csv", "g,i,s,d\n"
                 "1,9223372036854775807,a,2024-01-01\n1,-9223372036854775808,b,2024-01-02\n"
                 "1,1,a,2024-01-01\n1,2,c,\n2,3,,2024-01-03\n2,,d,2024-01-03\n")
    with gateway_for(path) as gw:
        got = assert_same(gw, sql)
        assert got.column("a").to_pylist()[0] == average


def test_a_sum_of_doubles_that_can_pass_the_largest_double_is_left_to_the_fallback(tmp_path):
    """Found by arrowgate fuzz on nasty values: beside count(DISTINCT f) the partials are
    grouped by f, so 1.8e308 and 1e308 were added up first (inf) and met -inf (NaN),
    where DuckDB adds rows in order (-inf stays -inf)."""
    path = write(tmp_path, "big.csv", "g,f\n1,-inf\n1,1.7976931348623157e308\n1,0.5\n"
                                      "1,1e308\n2,1.5\n2,2.5\n")
    sql = "SELECT g, count(DISTINCT f) AS n, sum(f) AS s FROM t GROUP BY g ORDER BY g"
    with gateway_for(path, columns={"g": "BIGINT", "f": "DOUBLE"}) as gw:
        with pytest.raises(Unsupported, match="largest double"):
            gw.execute(sql, engine="csv").to_arrow()
        assert gw.execute(sql, engine="duck").to_arrow().column("s").to_pylist() == \
            [float("-inf"), 4.0]
        small = sql.replace("FROM t", "FROM t WHERE g = 2")
        assert assert_same(gw, small).column("s").to_pylist() == [4.0]


@pytest.mark.parametrize("sql", [
    "SELECT count(*) AS n FROM t WHERE i = 9223372036854775808",
    "SELECT count(*) AS n FROM t WHERE i < 9223372036854775808",
    "SELECT count(*) AS n FROM t WHERE i BETWEEN 0 AND 9223372036854775808",
    "SELECT count(*) AS n FROM t WHERE i <= 9223372036854775807",
])
def test_a_filter_on_an_integer_past_bigint_is_answered(gw, sql):
    """A literal past BIGINT, which DuckDB reads as HUGEINT, reached the scanner's int64
    filter and failed the statement with "int too big to convert"."""
    assert_same(gw, sql)
    # (-9223372036854775809 is the negation of a HUGEINT, which the csv engine leaves
    # to the fallback)
    with pytest.raises(Unsupported):
        gw.execute("SELECT count(*) AS n FROM t WHERE i > -9223372036854775809",
                   engine="csv").to_arrow()


@pytest.mark.parametrize("sql", [
    'SELECT s, count(*) FROM t GROUP BY s ORDER BY "count_star()"',
    'SELECT s, avg(y) FROM t GROUP BY s ORDER BY "avg(y)" DESC',
    'SELECT s, count(*) FROM t GROUP BY s HAVING "count_star()" > 0',
    'SELECT lower(s) FROM t GROUP BY "lower(s)"',
])
def test_the_name_duckdb_gives_an_expression_is_no_name_to_refer_to(gw, sql):
    """DuckDB refuses ORDER BY "count_star()" (Referenced column not found): the name
    it gives an unaliased expression is the answer's, not the statement's. The csv
    engine sorted by it and answered."""
    with pytest.raises(QueryError):
        gw.execute(sql, engine="duck").to_arrow()
    with pytest.raises(QueryError):
        gw.execute(sql, engine="csv").to_arrow()


@pytest.mark.parametrize("sql", [
    "SELECT * EXCLUDE (s) FROM t ORDER BY i",
    "SELECT t.* EXCLUDE (s, ts) FROM t ORDER BY i",
    "SELECT * RENAME (s AS text) FROM t ORDER BY i",
    "SELECT * REPLACE (i + 1 AS i) FROM t ORDER BY i",
    "SELECT i FROM t ORDER BY i LIMIT 50%",
    "SELECT i, count(*) AS n FROM t GROUP BY i ORDER BY i LIMIT 50 PERCENT",
    # clauses the planner did not know, and ignored
    "SELECT count(*) AS n FROM t TABLESAMPLE 10%",
    "SELECT count(*) AS n FROM t USING SAMPLE 1",
    "SELECT a FROM t AS x(a) ORDER BY a",
    "SELECT i FROM t AS x(a) ORDER BY i",
])
def test_star_modifiers_and_percent_limits_are_not_ignored(gw, sql):
    """sqlglot renamed EXCLUDE's argument (except_), so the csv engine answered SELECT *
    EXCLUDE (s) with s in it; LIMIT 10% was LIMIT 10. Either DuckDB's answer or the
    fallback's."""
    try:
        got = gw.execute(sql, engine="csv").to_arrow()
    except Unsupported:
        return
    assert got == gw.execute(sql, engine="duck").to_arrow()


def test_a_group_key_in_parentheses_is_the_key(gw):
    """GROUP BY (s) failed with "column 's' must appear in the GROUP BY clause"."""
    assert_same(gw, "SELECT s, count(*) AS n FROM t GROUP BY (s) ORDER BY s")


@pytest.mark.parametrize("sql", [
    "\u017fELECT i FROM t ORDER BY i",  # a long s: sqlglot read SELECT, DuckDB refuses it
    "SELECT \u017fum(i) AS x FROM t",  # sum, with a long s
    "SELECT i FROM t cro\u00df JOIN t AS u ORDER BY i LIMIT 1",  # CROSS, with an sz: an alias
])
def test_a_word_python_folds_to_a_keyword_is_not_read_as_one(gw, sql):
    """sqlglot upper-cases words to find keywords and functions, and Python folds the long
    s (U+017F) to S, the dotless i to I and the sz to SS: the csv engine answered SELECT
    spelt with a long s, which DuckDB refuses."""
    with pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()


def test_a_name_with_a_folding_letter_still_works(gw):
    assert_same(gw, "SELECT i AS Stra\u00dfe FROM t ORDER BY i")
