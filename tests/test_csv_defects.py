"""The csv engine's defects found by hostile probing (issue #11), each pinned by a test."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from gateway.errors import QueryError, Unsupported
from tests.conftest import DATA
from tests.csv_support import assert_same, gateway_for, write

ROOT = Path(__file__).resolve().parent.parent
CABS = "cab_type,n\nyellow,1\ngreen,2\nYellow,3\n,4\nyel,5\n"


def test_not_like_and_not_ilike_negate(tmp_path):
    path = write(tmp_path, "cabs.csv", CABS)
    with gateway_for(path) as gw:
        for sql in ("SELECT count(*) AS n FROM t WHERE cab_type NOT LIKE 'y%'",
                    "SELECT count(*) AS n FROM t WHERE cab_type NOT ILIKE 'Y%'",
                    "SELECT n FROM t WHERE cab_type NOT LIKE '%l_w' ORDER BY n",
                    "SELECT cab_type NOT ILIKE 'yel%' AS x FROM t ORDER BY n"):
            assert_same(gw, sql)
        got = gw.execute("SELECT count(*) AS n FROM t WHERE cab_type NOT LIKE 'y%'",
                         engine="csv").to_arrow()
        assert got.column("n").to_pylist() == [2]


TRUNCATE_MID_SCAN = r"""
import os, sys
from gateway.errors import QueryError
from tests.csv_support import gateway_for

path = sys.argv[1]
with open(path, "w") as f:
    f.write("id,name\n")
    f.writelines(f"{i},name{i}\n" for i in range(100_000))
with gateway_for(path, chunk_bytes=16 << 10) as gw:
    reader = gw.execute("SELECT * FROM t", engine="csv").reader()
    reader.read_next_batch()
    os.truncate(path, 0)
    try:
        reader.read_all()
    except QueryError as exc:
        print(exc)
    else:
        print("no error")
"""


def test_a_file_truncated_during_a_scan_is_an_error_not_a_crash(tmp_path):
    # in a child process, so that a SIGBUS cannot take the test run with it
    run = subprocess.run([sys.executable, "-c", TRUNCATE_MID_SCAN, str(tmp_path / "big.csv")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "the file changed during the scan" in run.stdout


def test_the_scanner_reports_a_truncated_mapping(tmp_path):
    code = ("import os, sys\n"
            "from gateway_csv import _scanner\n"
            "path = sys.argv[1]\n"
            "open(path, 'w').write(''.join(f'{i},x\\n' for i in range(50_000)))\n"
            "f = _scanner.File(path)\n"
            "os.truncate(path, 0)\n"
            "dialect = (44, 34, 34, 2, False, (b'',))\n"
            "print(_scanner.scan(f, 0, f.size, dialect, ((0, 1),), (), None, None, -1)[4])\n")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.csv")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "('changed', 0, -1)"


HUGE = ("a,b\n12345678901234567890,1\n12345678901234567891,2\n"
        "12345678901234567892,3\n12345678901234567892,4\n-99999999999999999999,5\n")


def test_integers_past_64_bits_stay_exact_as_duckdb_hugeint(tmp_path):
    path = write(tmp_path, "huge.csv", HUGE)
    with gateway_for(path) as gw:
        for sql in ("SELECT * FROM t",
                    "SELECT count(DISTINCT a) AS n, sum(a) AS s, min(a) AS lo, max(a) AS hi "
                    "FROM t",
                    "SELECT count(*) AS n FROM t WHERE a = 12345678901234567892",
                    "SELECT b FROM t WHERE a > 12345678901234567890 ORDER BY b",
                    "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY a"):
            assert_same(gw, sql)
        got = gw.execute("SELECT count(DISTINCT a) AS n FROM t", engine="csv").to_arrow()
        assert got.column("n").to_pylist() == [4]
        assert gw.execute("SELECT a FROM t", engine="csv").schema.field("a").type == \
            pa.decimal128(38, 0)


def test_sums_of_64_bit_integers_do_not_wrap(tmp_path):
    """Found by `arrowgate fuzz` on DuckDB's drug_exposure.csv: through Arrow's
    aggregation (a filter, or an aggregate the fused path does not take) a sum past
    2**63 wrapped around, silently: 3225965759071614199 where DuckDB says
    1091583866107935159543."""
    big = 9_000_000_000_000_000_000
    rows = "".join(f"{big - i},{i % 3},{'x' if i % 2 else ''}\n" for i in range(8))
    path = write(tmp_path, "big.csv", "a,g,s\n" + rows)
    with gateway_for(path) as gw:
        for sql in ("SELECT sum(a) AS s FROM t WHERE g <> 5",
                    "SELECT sum(a) AS s, min(s) AS m FROM t",
                    "SELECT g, sum(a) AS s, avg(a) AS m FROM t GROUP BY g ORDER BY g",
                    "SELECT g FROM t GROUP BY g HAVING sum(a) > 9223372036854775807 "
                    "ORDER BY g",
                    "SELECT sum(g) AS s FROM t WHERE a > 0",
                    # avg beside two distinct counts: Arrow's avg over the whole column
                    # (an avg of the sum's DECIMAL(38, 0) rounded 5.5 to 6)
                    "SELECT avg(g) AS m, count(DISTINCT a) AS x, count(DISTINCT s) AS y "
                    "FROM t",
                    "SELECT sum(a) AS s FROM t WHERE NULL",
                    "SELECT count(*) AS n, min(s) AS m FROM t WHERE NULL AND g > 0"):
            assert_same(gw, sql)
        got = gw.execute("SELECT sum(a) AS s FROM t WHERE g <> 5", engine="csv").to_arrow()
        assert got.column("s").to_pylist() == [Decimal(8 * big - 28)]
        small = gw.execute("SELECT sum(g) AS s FROM t WHERE a > 0", engine="csv").to_arrow()
        # DuckDB's sum of BIGINT is a HUGEINT, also where it fits in 64 bits
        assert small.schema.field("s").type == pa.decimal128(38, 0)


def test_distinct_takes_minus_zero_and_zero_as_one_value(tmp_path):
    """Found by `arrowgate fuzz` on DuckDB's aws_locations.csv: SELECT DISTINCT
    latitude * 0 gave 0.0 and -0.0 as two rows, DuckDB one."""
    path = write(tmp_path, "z.csv", "x,y\n1.5,1\n-2.5,2\n0.0,1\n")
    with gateway_for(path) as gw:
        for sql in ("SELECT DISTINCT x * 0 AS z FROM t",
                    "SELECT DISTINCT x * 0 AS z, y FROM t ORDER BY y"):
            assert_same(gw, sql)
        got = gw.execute("SELECT DISTINCT x * 0 AS z FROM t", engine="csv").to_arrow()
        assert got.num_rows == 1


def test_integers_past_38_digits_are_unsupported(tmp_path):
    """DuckDB reads them exactly (HUGEINT, BIGNUM); a DOUBLE would round them."""
    path = write(tmp_path, "wider.csv", "a\n1\n" + "9" * 39 + "\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported, match="39 digits"):
        gw.execute("SELECT a FROM t", engine="csv")


DEEP = [
    "SELECT " + "(" * 60 + "a" + " + 1)" * 60 + " AS x FROM t",
    "SELECT count(*) AS n FROM t WHERE " + " OR ".join(f"a = {i}" for i in range(1000)),
    "SELECT count(*) AS n FROM t WHERE " + " AND ".join(f"a <> {i}" for i in range(5, 1005)),
    "SELECT " + "".join(f"CASE WHEN a > {i} THEN " for i in range(200)) + "1"
    + " ELSE 0 END" * 200 + " AS x FROM t",
    "SELECT hour(d) AS h FROM t",
    "SELECT strftime(d, '%Z') AS z FROM t",
]


@pytest.mark.parametrize("sql", DEEP, ids=["nested_add", "or_1000", "and_1000", "case_200",
                                            "hour_of_date", "strftime_zone"])
def test_what_the_engine_cannot_evaluate_is_unsupported_and_falls_back(tmp_path, sql):
    path = write(tmp_path, "s.csv", "a,b,d\n1,2,2024-01-01\n3,4,2024-02-01\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        result = gw.execute(sql, engine="csv")
        assert result.engine == "duck"
        assert result.to_arrow() == gw.execute(sql, engine="duck").to_arrow()


# DuckDB refuses these when it binds them; its lazy casts (s = 7, n > 'a') are in
# test_csv_wrong_answers.py
MIXED = ["SELECT * FROM t WHERE s > 5", "SELECT CASE WHEN n > 1 THEN s ELSE n END AS x FROM t",
         "SELECT coalesce(s, n) AS x FROM t", "SELECT n + s AS x FROM t"]


@pytest.mark.parametrize("sql", MIXED)
def test_text_meeting_numbers_is_refused_like_duckdb(tmp_path, sql):
    path = write(tmp_path, "sv.csv", "s,n\nabc,1\n7,2\n")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            with pytest.raises(QueryError):
                gw.execute(sql, engine=engine).to_arrow()


@pytest.mark.parametrize("sql", MIXED[:-1])
def test_text_meeting_numbers_fails_with_duckdbs_error_kind(tmp_path, sql):
    """Shadow mode matches two failures only by kind: csv's must be DuckDB's."""
    path = write(tmp_path, "sv.csv", "s,n\nabc,1\n7,2\n")
    with gateway_for(path) as gw:
        kinds = set()
        for engine in ("csv", "duck"):
            with pytest.raises(QueryError) as caught:
                gw.execute(sql, engine=engine).to_arrow()
            kinds.add(caught.value.kind)
        assert kinds == {"type"}


TEMPORAL = "ts,d,n\n2020-01-01 10:00:00,2020-01-01,5\n2021-06-01 00:00:00,2021-06-01,7\n"
TIME_MEETS_NUMBER = [
    "SELECT count(*) AS c FROM t WHERE ts >= 1",
    "SELECT count(*) AS c FROM t WHERE d < 2.5",
    "SELECT count(*) AS c FROM t HAVING max(ts) >= 1",
    "SELECT max(ts) > 1 AS x FROM t",
    "SELECT ts BETWEEN 1 AND 2 AS x FROM t",
    "SELECT CASE WHEN n > 5 THEN ts ELSE 1 END AS x FROM t",
    "SELECT coalesce(ts, 1) AS x FROM t",
]


@pytest.mark.parametrize("sql", TIME_MEETS_NUMBER)
def test_a_time_meeting_a_number_is_refused_like_duckdb(tmp_path, sql):
    """Found by arrowgate fuzz: csv cast the number to a timestamp (1 microsecond after
    1970) and answered `HAVING max(ts) >= 1`, where DuckDB refuses to bind it."""
    path = write(tmp_path, "tv.csv", TEMPORAL)
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            with pytest.raises(QueryError) as caught:
                gw.execute(sql, engine=engine).to_arrow()
            assert caught.value.kind == "type", (engine, caught.value)
            if engine == "csv":
                assert "explicit cast is required" in str(caught.value)


@pytest.mark.parametrize(("sql", "kind"), [
    ("SELECT n, count(*) FROM t", "syntax"),
    ("SELECT count(*) FROM t WHERE sum(n) > 1", "syntax"),
    ("SELEC n FROM t", "syntax"),
    ("SELECT nope FROM t", "unknown_object"),
    ("SELECT n FROM nope", "unknown_object"),
    ("SELECT n FROM t GROUP BY 3", "syntax"),
])
def test_csv_errors_carry_duckdbs_kind(tmp_path, sql, kind):
    """Found by arrowgate fuzz: every csv error was kind `query`, so a shadow of csv
    against DuckDB reported two failures of the same cause as a divergence."""
    path = write(tmp_path, "tv.csv", TEMPORAL)
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            with pytest.raises(QueryError) as caught:
                gw.execute(sql, engine=engine).to_arrow()
            assert caught.value.kind == kind, (engine, caught.value)


@pytest.mark.parametrize("sql", ["SELECT n = '1' AS x FROM t", "SELECT n + '1' AS x FROM t",
                                 "SELECT n IN ('1', 2) AS x FROM t",
                                 "SELECT s || (n + 1) AS x FROM t"])
def test_text_constants_meeting_numbers_are_cast_like_duckdb(tmp_path, sql):
    path = write(tmp_path, "sv.csv", "s,n\nabc,1\n7,2\n")
    with gateway_for(path) as gw:
        assert_same(gw, sql)


@pytest.mark.parametrize("sql", [
    "SELECT count(*), count(cab_type), sum(trip_id), count(DISTINCT trip_id) FROM trips "
    "WHERE trip_id < 0",
    "SELECT count(*) AS n, count(DISTINCT trip_id) AS d FROM trips WHERE cab_type <= NULL",
])
def test_counts_over_no_rows_are_zero_beside_a_distinct_count(sql):
    """Found by arrowgate fuzz: with count(DISTINCT) beside it, count(*) over no rows
    was NULL (a sum of no partial counts), where DuckDB answers 0."""
    import gateway

    config = {"engines": {"c": {"type": "csv"}, "d": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        csv = gw.execute(sql, engine="c").to_arrow().to_pylist()
        assert csv == gw.execute(sql, engine="d").to_arrow().to_pylist()
        assert next(iter(csv[0].values())) == 0


@pytest.mark.parametrize("sql", [
    "SELECT STRFTIME('%Y', pickup_datetime) AS y, count(*) AS n FROM trips GROUP BY 1 ORDER BY 1",
    "SELECT strftime(pickup_datetime, '%Y-%m') AS ym, count(*) AS n FROM trips "
    "GROUP BY 1 ORDER BY 1",
])
def test_strftime_in_either_argument_order(sql):
    """csvql and SQLite write strftime(format, value), and DuckDB accepts both orders; the
    csv engine refused the first as 'strftime with a non-constant format'."""
    import gateway

    config = {"engines": {"c": {"type": "csv"}, "d": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        csv = gw.execute(sql, engine="c")
        assert csv.to_arrow().to_pylist() == gw.execute(sql, engine="d").to_arrow().to_pylist()
        assert csv.engine == "c"  # answered by the csv engine itself, no fallback configured


@pytest.mark.parametrize("sql", [
    "SELECT cab_type, count(*) AS k FROM t GROUP BY cab_type HAVING k >= 1 ORDER BY k, 1",
    "SELECT cab_type, sum(n) AS s FROM t GROUP BY cab_type HAVING s >= 3 AND count(*) > 0 "
    "ORDER BY 1",
    "SELECT cab_type AS c FROM t GROUP BY c HAVING c <> 'green' ORDER BY c",
])
def test_a_select_alias_in_having_is_read_as_duckdb_reads_it(tmp_path, sql):
    """csv refused `HAVING n > 1` over `count(*) AS n` ("must appear in the GROUP BY
    clause"), where DuckDB answers."""
    path = write(tmp_path, "cabs.csv", CABS)
    with gateway_for(path) as gw:
        assert_same(gw, sql)


def test_an_unknown_column_is_named_with_the_files_columns(tmp_path):
    """`SELECT nope FROM t` made a select item called nope, which the check took for an
    alias: the error came later and listed no columns ("columns: ")."""
    path = write(tmp_path, "cabs.csv", CABS)
    with gateway_for(path) as gw, pytest.raises(QueryError) as caught:
        gw.execute("SELECT nope FROM t", engine="csv").to_arrow()
    assert caught.value.kind == "unknown_object"
    assert "cab_type, n" in caught.value.hint
