"""strftime, date_part/extract and date_trunc against DuckDB, as fused group keys and on the
Arrow path.

As group keys the scanner groups by the timestamp truncated to the unit the
function needs and the function is computed of the few keys afterwards
(gateway_csv.temporal); the ``fused`` fixture makes any other route an error,
so each query here shows it stays fused. Chunks of 512 bytes hold a handful of rows
each, so the per-chunk tables are merged many times.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gateway.errors import Unsupported
from tests.conftest import DATA
from tests.csv_support import assert_same, gateway_for, write


def _rows() -> str:
    """Timestamps over 1969-2024 (before the epoch, leap days, ISO weeks that straddle a
    year, fractions of a second), the same instants with offsets, their dates, and NULLs."""
    start = dt.datetime(1969, 12, 30, 22, 58, 59, 500000)
    lines = ["i,g,ts,tz,d,x"]
    for i in range(240):
        t = start + dt.timedelta(days=i * 83 + i % 7, hours=i * 5, minutes=i * 7, seconds=i * 11,
                                 microseconds=(i * 123457) % 1_000_000)
        if i % 13 == 5:
            lines.append(f"{i},{i % 3},,,,{i * 0.25}")
            continue
        offset = ("+02", "-05:30", "Z", "+00:00")[i % 4]
        x = "nan" if i % 29 == 3 else "" if i % 17 == 2 else f"{(i * 37) % 101 - 50}.5"
        lines.append(f"{i},{i % 3},{t:%Y-%m-%d %H:%M:%S.%f},{t:%Y-%m-%d %H:%M:%S}{offset},{t:%Y-%m-%d},{x}")
    for fixed in ("2020-02-29 23:59:59", "2021-01-03 00:00:00", "2008-12-29 12:00:00",
                  "2024-12-30 06:30:00", "2022-05-05 01:15:00", "2022-05-05 13:15:00"):
        lines.append(f"999,2,{fixed},{fixed}Z,{fixed[:10]},1")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("temporal"), "temporal.csv", _rows())


@pytest.fixture
def fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any aggregation that leaves the fused path."""
    from gateway_csv import run

    def refuse(*args: object) -> None:
        raise AssertionError("the aggregation left the fused path")

    monkeypatch.setattr(run, "_arrow_aggregate", refuse)


FORMATS = ["%Y", "%y", "%m", "%Y-%m", "%B %Y", "%b", "%d", "%Y-%m-%d", "%a", "%A", "%w", "%u",
           "%j", "%U", "%W", "%V", "%G-W%V", "%H", "%I %p", "%Y-%m-%d %H:%M", "%M", "%S",
           "%H:%M:%S", "%X", "%T", "%c", "%x", "%-d/%-m/%-y", "%-H:%-M:%-S", "%-I", "%-j",
           "%g", "%f", "%n", "%S.%f", "%%Y is %Y", "year %Y!"]


@pytest.mark.parametrize("column", ["ts", "tz", "d"])
def test_strftime_keys_are_fused_and_match_duckdb(path, fused, column):
    with gateway_for(path, chunk_bytes=512) as gw:
        for fmt in FORMATS:
            assert_same(gw, f"SELECT strftime({column}, '{fmt}') AS k, count(*) AS n, sum(i) AS s, "
                            f"avg(x) AS a, min(ts) AS lo, max(d) AS hi FROM t GROUP BY 1")
            # csvql's and SQLite's order, written the same way in the select list
            assert_same(gw, f"SELECT strftime('{fmt}', {column}), count(*) AS n FROM t "
                            f"GROUP BY strftime('{fmt}', {column})")


PARTS = ["year", "quarter", "month", "day", "hour", "minute", "second", "millisecond",
         "microsecond", "epoch", "dow", "isodow", "doy", "week", "isoyear", "yearweek",
         "decade", "century", "millennium", "era", "YEAR", "yr", "mon", "d", "h", "mins", "s",
         "ms", "us", "weekday", "dayofyear", "weekofyear", "quarters", "millennia"]


@pytest.mark.parametrize("column", ["ts", "tz", "d"])
def test_date_part_and_extract_keys_are_fused_and_match_duckdb(path, fused, column):
    with gateway_for(path, chunk_bytes=512) as gw:
        for part in PARTS:
            if column == "tz" and part == "epoch":
                continue  # left to the fallback (test_epoch_of_a_timestamptz_falls_back)
            assert_same(gw, f"SELECT date_part('{part}', {column}) AS k, count(*) AS n, "
                            f"avg(x) AS a FROM t GROUP BY 1")
            if part.isalpha() and part.lower() == part:
                assert_same(gw, f"SELECT extract({part} FROM {column}) AS k, g, count(*) AS n "
                                f"FROM t GROUP BY g, extract({part} FROM {column}) "
                                f"ORDER BY 1, 2")


UNITS = ["year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond",
         "microsecond", "yr", "mon", "w", "d", "h", "m", "s", "ms", "us"]


@pytest.mark.parametrize("column", ["ts", "tz", "d"])
def test_date_trunc_keys_are_fused_and_match_duckdb(path, fused, column):
    """date_trunc gives TIMESTAMP for dates and timestamps, TIMESTAMPTZ for those (2.0.1)."""
    with gateway_for(path, chunk_bytes=512) as gw:
        for unit in UNITS:
            got = assert_same(gw, f"SELECT date_trunc('{unit}', {column}) AS k, count(*) AS n, "
                                  f"max(x) AS m FROM t GROUP BY 1 ORDER BY 1")
            assert str(got.schema.field("k").type) == (
                "timestamp[us, tz=Etc/UTC]" if column == "tz" else "timestamp[us]")


def test_groups_sharing_a_key_are_merged(path, fused):
    """strftime('%m') groups by month and gives the same text for every year's January:
    the scanner's groups are folded into one per key, avg from its sums and counts."""
    with gateway_for(path, chunk_bytes=512) as gw:
        got = assert_same(gw, "SELECT strftime(ts, '%m') AS m, count(*) AS n, avg(x) AS a, "
                              "sum(x) AS s, min(x) AS lo, max(ts) AS hi FROM t GROUP BY 1")
        assert got.num_rows == 13  # twelve months and NULL
        assert_same(gw, "SELECT date_part('dow', d) AS w, g, count(*) AS n, avg(i) AS a "
                        "FROM t GROUP BY 1, 2")
        assert_same(gw, "SELECT strftime(ts, '%p') AS half, round(x) AS r, count(*) AS n "
                        "FROM t WHERE i > 10 GROUP BY 1, 2")
        # the letter p is text here, not %p: 1 AM and 1 PM print alike and are one group
        assert_same(gw, "SELECT strftime(ts, '%Y-%m-%d %I p') AS k, count(*) AS n FROM t "
                        "GROUP BY 1")


def test_a_format_keeps_its_case_as_a_key(path, fused):
    """'%M' (minutes) and '%m' (months) are two keys; the keys' canonical text was lowered."""
    with gateway_for(path, chunk_bytes=512) as gw:
        assert_same(gw, "SELECT strftime(ts, '%M') AS minute, strftime(ts, '%m') AS month, "
                        "count(*) AS n FROM t GROUP BY 1, 2")


def test_the_arrow_path_prints_what_duckdb_prints(path):
    """Arrow printed %-d, %g, %f and %n literally or otherwise, and %c and %x in its
    locale's form; these now follow DuckDB off the fused path too."""
    with gateway_for(path, chunk_bytes=512) as gw:
        for fmt in FORMATS:
            assert_same(gw, f"SELECT i, strftime(ts, '{fmt}') AS a, strftime(d, '{fmt}') AS b, "
                            f"strftime('{fmt}', tz) AS c FROM t")
        for part in PARTS:
            tz = "tz" if part != "epoch" else "ts"  # (epoch of a TIMESTAMPTZ falls back)
            assert_same(gw, f"SELECT i, date_part('{part}', ts) AS a, date_part('{part}', d) AS b, "
                            f"date_part('{part}', {tz}) AS c FROM t")
        assert_same(gw, "SELECT count(DISTINCT strftime(ts, '%Y')) AS y, "
                        "extract(month FROM d) AS m FROM t GROUP BY 2")


def test_epoch_of_a_timestamptz_falls_back(path):
    """DuckDB takes a TIMESTAMPTZ's epoch through ICU, whose doubles differ in the last
    digit from micros / 1e6 (-46311566399.9995 against -46311566399.999504 in 894)."""
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute("SELECT date_part('epoch', tz) AS e FROM t", engine="csv").to_arrow()


@pytest.mark.parametrize("sql", [
    "SELECT strftime(ts, '%z') AS k, count(*) AS n FROM t GROUP BY 1",
    "SELECT strftime(ts, '%Z') AS k, count(*) AS n FROM t GROUP BY 1",
    "SELECT date_part('julian', ts) AS k, count(*) AS n FROM t GROUP BY 1",
    "SELECT date_trunc('decade', ts) AS k, count(*) AS n FROM t GROUP BY 1",
])
def test_what_is_not_done_here_falls_back(path, sql):
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        result = gw.execute(sql, engine="csv")
        assert result.engine == "duck"


CSVQL = [
    "SELECT cab_type, COUNT(*) FROM trips GROUP BY cab_type",
    "SELECT passenger_count, AVG(total_amount) FROM trips GROUP BY passenger_count",
    "SELECT passenger_count, STRFTIME('%Y',pickup_datetime) AS y, COUNT(*) FROM trips "
    "GROUP BY passenger_count, y",
    "SELECT passenger_count, STRFTIME('%Y',pickup_datetime) AS y, ROUND(trip_distance) AS d, "
    "COUNT(*) AS c FROM trips GROUP BY passenger_count, y, d ORDER BY y, c DESC",
    "SELECT passenger_count, DATE_PART('year',pickup_datetime) AS y, ROUND(trip_distance) AS d, "
    "COUNT(*) AS c FROM trips GROUP BY passenger_count, y, d ORDER BY y, c DESC",
]


@pytest.mark.parametrize("sql", CSVQL)
def test_csvqls_taxi_queries_as_written_are_fused(fused, sql):
    """csvql's benchmark queries (its bench/bench_taxi.sh; DuckDB's date_part form last)."""
    import gateway

    config = {"engines": {"csv": {"type": "csv", "chunk_bytes": 4096}, "duck": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        assert_same(gw, sql)


def test_years_on_both_sides_of_every_new_year_match_duckdb(tmp_path, fused):
    """The scanner reads a year of 1900-2155 from a table of the days each begins and
    any other through the civil calendar: the last and first instants of every year from
    1890 to 2170 (before the epoch, across the table's edges, century leap rules), and
    years far outside, in chunks of a few rows."""
    lines = ["i,ts,d"]
    years = [*range(1890, 2171), 1, 1000, 1582, 2400, 3000, 9999]
    for i, year in enumerate(years):
        for stamp in (f"{year:04d}-01-01 00:00:00", f"{year:04d}-12-31 23:59:59",
                      f"{year:04d}-02-28 12:00:00", f"{year:04d}-03-01 00:00:01"):
            lines.append(f"{i},{stamp},{stamp[:10]}")
    path = write(tmp_path, "years.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=512) as gw:
        for column in ("ts", "d"):
            got = assert_same(gw, f"SELECT year({column}) AS y, strftime('%Y', {column}) AS s, "
                                  f"count(*) AS n, min(i) AS lo FROM t GROUP BY 1, 2 ORDER BY 1")
            assert got.num_rows == len(years)
            assert set(got.column("n").to_pylist()) == {4}
