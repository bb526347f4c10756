"""The long tail of DuckDB's CSV sniffer (issue #22, item 5): each class read as
DuckDB 2.0.1's ``read_csv`` reads it, or refused (``Unsupported``, so the duckdb
engine answers)."""

from __future__ import annotations

import pytest

from gateway.errors import Unsupported
from tests.csv_support import assert_same, gateway_for, write

SAME = {
    # DuckDB appends each name's own collision count while the name is taken
    "duplicate_names": "a,a_1,a,a_1,A\n1,2,3,4,5\n",
    # blank lines only: the first is a header (column0), each further one a NULL row
    "blank_lines": "\n" * 9,
    "blank_lines_crlf": "\r\n" * 4,
    # leading empty lines are skipped; the first line of blanks is the header
    "blank_lines_and_blanks": "\n \n\n  \n",
    "tabs_only": "\t\n\t\n",
    # DuckDB's strict DOUBLE cast refuses trailing blanks: the column stays text
    "double_with_trailing_blank": "a,b\n1 ,2.5 \n3 ,4.5 \n",
    "double_tab": "a\n1.5\t\n",
    # ...but integers met before the first non-integer value are never tested as DOUBLE
    "integer_with_blank_then_double": "a\n1 \n2.5\n",
    "double_then_integer_with_blank": "a\n2.5\n1 \n",
    # BOOLEAN takes no blanks on either side
    "boolean_with_blank": "a\ntrue \nfalse\n",
    "boolean_with_leading_blank": "a\n true\nfalse\n",
    "inf_with_blank": "a\n1\ninf \n",
    # a CR inside a quoted field of a file whose rows end in LF or CRLF is a character
    "quoted_cr_lf": 'a,b\n"x\ry",1\n"p",2\n',
    "quoted_cr_crlf": 'a,b\r\n"x\ry",1\r\n"p",2\r\n',
    "quoted_lf_in_cr_file": 'a,b\r"x\ny",1\r"p",2\r',
    "cr_file": "a,b\r1,2\r3,4\r",
    # DuckDB's TIME parser does not take one minute digit without seconds: text
    "not_a_time": "t\n12:0\n13:0\n",
    "one_line_not_a_time": "12:0\n",
    # digits of other scripts are no numbers, dates or times to DuckDB: text (a column of
    # them was sniffed BIGINT, DOUBLE or DATE, and the scan then failed on every value)
    "arabic_indic_digits": "a,b\n\u0663,x\n\u0664\u0665,y\n",
    "fullwidth_decimal": "a\n\uff11.5\n2.5\n",
    "devanagari_date": "d\n\u0968\u0966\u0968\u096a-01-02\n2024-01-03\n",
    "fullwidth_time": "t\n\uff11\uff12:30\n",
    "fullwidth_date_other_format": "d\n\uff10\uff11/02/2024\n03/04/2024\n",
    # nor are letters that only fold to ASCII ones (long s, dotless and dotted i)
    "long_s_in_yes": "a\nye\u017f\nno\n",
    "dotless_i_in_inf": "a\n1.5\n\u0131nf\n",
    "dotted_capital_i_in_infinity": "a\n\u0130NFINITY\n2.5\n",
}


@pytest.mark.parametrize("name", sorted(SAME))
def test_read_as_duckdb_reads_it(tmp_path, name):
    path = write(tmp_path, f"{name}.csv", SAME[name])
    with gateway_for(path) as gw:
        got = assert_same(gw, "SELECT * FROM t")
        assert got.schema == gw.execute("SELECT * FROM t", engine="duck").to_arrow().schema
        assert_same(gw, "SELECT count(*) FROM t")


REFUSED = {
    # DuckDB reads them exactly, as HUGEINT (which decimal128(38, 0) cannot hold) or BIGNUM
    "integer_39_digits": ("a\n170141183460469231731687303715884105727\n1\n", "39 digits"),
    "integer_50_digits": ("a\n" + "12345" * 10 + "\n", "50 digits"),
    # DuckDB's sniffer takes inf as a DATE (infinity)
    "date_and_inf": ("a\n2024-01-01\ninf\n", "infinity"),
    "date_and_minus_infinity": ("a\n-infinity\n2024-01-01\n", "infinity"),
    # rows ending in a lone CR, and a CR inside a quoted field: DuckDB keeps it
    "quoted_cr_in_cr_file": ('a,b\r"x\ry",1\r"p",2\r', "carriage return"),
    # DuckDB reads it (as UTF-8 holding NULs); the csv engine does not
    "utf16_le_without_bom": ("a,b\n1,2\n".encode("utf-16-le"), "UTF-16"),
    "utf16_be_without_bom": ("a,b\n1,2\n".encode("utf-16-be"), "UTF-16"),
    # DuckDB's TIME parser takes free digit counts, 24:00:00, and drops nanoseconds
    "time_one_digit_hour": ("t\n1:02:03\n", "1:02:03"),
    "time_hh_mm_one_digit": ("t\n3:45\n12:30\n", "3:45"),
    "time_24": ("t\n24:00:00\n", "24:00:00"),
    "time_one_digit_seconds": ("t\n12:00:0\n", "12:00:0"),
    "time_nanoseconds": ("t\n12:00:00.123456789\n", "123456789"),
    # DuckDB reads ... UTC as TIMESTAMP, ... EST or ... America/New_York as TIMESTAMPTZ
    "zone_utc": ("t\n2024-01-01 10:00:00 UTC\n", "named time zone"),
    "zone_est": ("t\n2024-01-01 10:00:00 EST\n2024-07-01T10:00 America/New_York\n",
                 "named time zone"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_clearly(tmp_path, name):
    content, message = REFUSED[name]
    path = write(tmp_path, f"{name}.csv", content)
    with gateway_for(path) as gw:
        gw.execute("SELECT count(*) FROM t", engine="duck").to_arrow()  # DuckDB reads it
        with pytest.raises(Unsupported, match=message):
            gw.execute("SELECT * FROM t", engine="csv")


@pytest.mark.parametrize(("before", "row", "late"), [
    (20478, "1", "2.5"),  # the last row of DuckDB's sample: DOUBLE
    (20479, "1.5", "2.5 "),  # the first row past it: DuckDB's type is DOUBLE, not text
    (20478, "1.5", "2.5 "),  # the last row of the sample: text
])
def test_types_come_from_duckdbs_sample_of_20480_rows(tmp_path, before, row, late):
    """DuckDB types columns on 20,480 rows from the header on; the csv engine used to
    read one row more (and on wide rows, only the first 512 KiB)."""
    path = write(tmp_path, "s.csv", "a\n" + f"{row}\n" * before + f"{late}\n" + f"{row}\n" * 5)
    with gateway_for(path) as gw:
        got = gw.execute("SELECT a FROM t", engine="csv").to_arrow()
        expected = gw.execute("SELECT a FROM t", engine="duck").to_arrow()
        assert got.schema == expected.schema
        assert got.equals(expected)


def test_wide_rows_are_typed_on_duckdbs_whole_sample(tmp_path):
    """Rows of ~600 bytes: 512 KiB held ~900 of DuckDB's 20,480 sampled rows, so a
    value after them made DuckDB's column text where the csv engine's was DOUBLE."""
    pad = "x" * 600
    path = write(tmp_path, "w.csv", "a,b\n" + f"1.5,{pad}\n" * 3000 + f"2.5 ,{pad}\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT a FROM t")
        assert gw.execute("SELECT a FROM t", engine="csv").to_arrow().schema.field("a").type \
            == "string"


def test_blanks_in_a_refined_chunk_are_refused(tmp_path):
    """Past its first 2,048 rows DuckDB casts whole chunks: an integer ending in a blank
    in the chunk of the first decimal value keeps the column text."""
    path = write(tmp_path, "c.csv", "a\n" + "1\n" * 3000 + "1 \n2.5\n" + "1\n" * 5)
    with gateway_for(path) as gw:
        assert gw.execute("SELECT a FROM t", engine="duck").to_arrow().schema.field("a").type \
            == "string"
        with pytest.raises(Unsupported, match="blanks"):
            gw.execute("SELECT a FROM t", engine="csv")


def test_rows_past_the_first_8_mib_of_duckdbs_sample_are_typed_too(tmp_path):
    """Rows of ~500 bytes: DuckDB's 20,480 sampled rows take ~10 MiB, and the csv engine
    typed the column on the first 8 MiB, BIGINT, then failed at row 19,000's text."""
    pad = "p" * 500
    rows = "".join(f"{i},{'abc' if i == 19000 else i},{pad}\n" for i in range(21000))
    path = write(tmp_path, "w.csv", "id,x,pad\n" + rows)
    with gateway_for(path) as gw:
        got = assert_same(gw, "SELECT x FROM t WHERE id >= 18990 AND id <= 19010")
        assert got.schema.field("x").type == "string"


def test_a_sample_past_the_bytes_read_for_it_is_refused(tmp_path, monkeypatch):
    """Past SAMPLE_BYTES the csv engine would type on fewer rows than DuckDB: it refuses,
    and the duckdb engine answers."""
    from gateway_csv import layout

    monkeypatch.setattr(layout, "DIALECT_BYTES", 1 << 16)
    monkeypatch.setattr(layout, "SAMPLE_BYTES", 1 << 18)
    pad = "p" * 100
    path = write(tmp_path, "w.csv", "id,pad\n" + "".join(f"{i},{pad}\n" for i in range(21000)))
    with gateway_for(path) as gw, pytest.raises(Unsupported, match="20,480 rows") as refused:
        gw.execute("SELECT id FROM t", engine="csv")
    # its hint once told to declare the columns' types, which changed nothing
    assert "duckdb engine" in refused.value.hint and "columns" not in refused.value.hint


def test_a_long_file_of_cr_line_ends_is_not_taken_for_one_long_row(tmp_path, monkeypatch):
    """A guard: the head is read on until it holds DuckDB's sample, counting LFs; a file of
    CR-only line ends must reach it too (opening.py rewrites its ends to LF first)."""
    from gateway_csv import layout

    monkeypatch.setattr(layout, "DIALECT_BYTES", 1 << 16)
    monkeypatch.setattr(layout, "SAMPLE_BYTES", 1 << 18)
    path = write(tmp_path, "cr.csv", "a,b\r" + "".join(f"{i},x{i}\r" for i in range(30000)))
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT count(*), max(a) FROM t")
