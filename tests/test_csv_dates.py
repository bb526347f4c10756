"""Dates whose day and month order is ambiguous: read as DuckDB reads them, or refused."""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from gateway.errors import Unsupported
from tests.csv_support import gateway_for, write

ORDERS = {"dmY": "%d{s}%m{s}%Y", "mdY": "%m{s}%d{s}%Y", "dmy": "%d{s}%m{s}%y",
          "mdy": "%m{s}%d{s}%y", "Ymd": "%Y{s}%m{s}%d", "ymd": "%y{s}%m{s}%d"}
_files = itertools.count()


@pytest.mark.parametrize(("values", "expected"), [
    (["01/02/2024", "03/04/2024"], [dt.date(2024, 2, 1), dt.date(2024, 4, 3)]),
    (["01/02/24", "03/04/24"], [dt.date(2001, 2, 24), dt.date(2003, 4, 24)]),
    (["01.02.24", "13.04.24"], [dt.date(2001, 2, 24), dt.date(2013, 4, 24)]),
    (["01/02/2024", "03/04/2024", "02/13/2024"],
     [dt.date(2024, 1, 2), dt.date(2024, 3, 4), dt.date(2024, 2, 13)]),
])
def test_ambiguous_dates_are_read_as_duckdb_reads_them(tmp_path, values, expected):
    """csv read 01/02/24 as 1 February 2024; DuckDB's sniffer tries its formats from
    the last (%y/%m/%d) back, value by value: 24 February 2001."""
    path = write(tmp_path, "d.csv", "d\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            got = gw.execute("SELECT d FROM t", engine=engine).to_arrow()
            assert got.column("d").to_pylist() == expected, engine


@pytest.mark.parametrize("values", [
    ["10/02/30", "19/11/37", "16/04/65"], ["10-02-30"], ["28.02.30"], ["10/02/29"],
    ["13/04/24", "10/02/30"],
])
def test_a_date_its_format_parses_into_a_day_its_month_lacks_keeps_the_column_text(
        tmp_path, values):
    """Failed on main with hypothesis' 10/02/30, 19/11/37, 16/04/65: DuckDB's first
    format, %y/%m/%d, parses 10/02/30 (a day up to 31) into 2010-02-30, which is no
    date, so the column stays VARCHAR; csv dropped that format and read %d/%m/%y."""
    path = write(tmp_path, "d.csv", "d\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            got = gw.execute("SELECT d FROM t", engine=engine).to_arrow()
            assert got.column("d").to_pylist() == values, engine


@settings(max_examples=25, deadline=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=list(HealthCheck))
@example(dates=[dt.date(2030, 2, 10), dt.date(2037, 11, 19), dt.date(2065, 4, 16)],
         order="dmy", separator="/", unpadded=False)
@given(dates=st.lists(st.dates(dt.date(1950, 1, 1), dt.date(2049, 12, 31)), min_size=1,
                      max_size=6),
       order=st.sampled_from(sorted(ORDERS)), separator=st.sampled_from(["/", "-", "."]),
       unpadded=st.booleans())
def test_a_date_is_never_read_otherwise_than_by_duckdb(tmp_path_factory, dates, order,
                                                       separator, unpadded):
    fmt = ORDERS[order].format(s=separator)
    values = [d.strftime(fmt) for d in dates]
    if unpadded:  # days and months without their leading zero (years keep theirs)
        values = [separator.join(p if len(p) == 4 or i == order.lower().index("y") else
                                 p.lstrip("0") for i, p in enumerate(v.split(separator)))
                  for v in values]
    folder = tmp_path_factory.mktemp("dates")
    path = write(folder, f"d{next(_files)}.csv", "d\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        expected = gw.execute("SELECT d FROM t", engine="duck").to_arrow()
        try:
            got = gw.execute("SELECT d FROM t", engine="csv").to_arrow()
        except Unsupported:
            return  # refused: the fallback reads it as DuckDB does
        assert got.column("d").to_pylist() == expected.column("d").to_pylist(), values
        assert got.schema == expected.schema, values


def test_iso_dates_without_leading_zeros_are_dates(tmp_path):
    """DuckDB leaves ISO's %Y-%m-%d out of its format candidates and reads the values
    with its own ISO parser when no candidate fits: 2005-10-3 is a date (the corpus's
    hive_types/himym.csv)."""
    path = write(tmp_path, "d.csv", "d\n2005-09-19\n2005-10-3\n")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            got = gw.execute("SELECT d FROM t", engine=engine).to_arrow()
            assert got.column("d").to_pylist() == [dt.date(2005, 9, 19), dt.date(2005, 10, 3)]


@pytest.mark.parametrize("values", [["10-28-16", "06-26-5"], ["06/26/123"]])
def test_a_year_with_fewer_digits_than_its_format_writes_is_left_to_duckdb(tmp_path, values):
    """DuckDB's parser reads a one-digit %y after the first value and a %Y of one to
    three digits (06-26-5 is 2005-06-26 there), strptime does not: csv dropped the
    format and read the column as text."""
    path = write(tmp_path, "d.csv", "d\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        assert gw.execute("SELECT d FROM t", engine="duck").to_arrow().schema.types == \
            [pa.date32()]
        with pytest.raises(Unsupported, match="fewer digits"):
            gw.execute("SELECT d FROM t", engine="csv").to_arrow()


@pytest.mark.parametrize(("values", "expected"), [
    (["5-06-26"], [dt.date(2026, 6, 5)]), (["2.2.20"], [dt.date(2020, 2, 2)]),
    (["06-26-5"], ["06-26-5"]), (["2.20.2"], ["2.20.2"]),
])
def test_a_one_digit_year_in_the_first_value_does_not_fit_a_format(tmp_path, values, expected):
    """DuckDB's sniffer does not take 5 as the %y of the first value: 5-06-26 is
    5 June 2026 (%d-%m-%y), 06-26-5 alone is text."""
    path = write(tmp_path, "d.csv", "d\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            got = gw.execute("SELECT d FROM t", engine=engine).to_arrow()
            assert got.column("d").to_pylist() == expected, engine
