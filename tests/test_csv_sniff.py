"""The sniffer agrees with DuckDB's read_csv_auto on the small cases of issue #11."""

from __future__ import annotations

import pytest

from gateway.errors import QueryError, Unsupported
from tests.csv_support import assert_same, gateway_for, write

CASES = {
    "one_line_of_numbers": "42\n",
    "one_line_of_text": "hello\n",
    "empty": "",
    "blank_first_line": "\na,b\n1,2\n",
    "booleans_t_f": "a,b\nT,1\nF,2\n",
    "booleans_mixed_case": "a\nTRUE\nfalse\nT\nf\n",
    "impossible_date": "d\n2024-02-30\n2024-01-01\n",
    "header_of_delimiters": ",,\n1,2,3\n",
    "preamble_title": "My title\na,b,c\n1,2,3\n4,5,6\n",
    "comment_lines": "# A few comments\n# I'm a csv file\na;b\n# a comment\n1;3\n6;7\n",
    "one_column_blank_lines_are_nulls": "col\n1\n2\n\n3\n\n",
    "one_column_only_blank_lines": "1\n\n\n\n",
    "plus_signs_stay_text": "a\n+31\n+42\n",
    "single_quotes": "a,b\n'x,y',1\n'z',2\n",
    "header_quote_never_closed": '"hello\n world\n',
    "header_quote_closed_on_another_line": '"Pedro "the"\n"Pedro "the" legend"\n"Pedro "the"\n',
    "time": "t\n10:00:00\n11:30:01.5\n",
    "us_dates": "d\n1/2/2016\n12/31/2016\n",
    "day_first_dates": "d\n13-01-2016\n31-12-2016\n",
    "dotted_dates": "d\n13.01.2016\n31.12.2016\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sniffing_matches_duckdb(tmp_path, name):
    path = write(tmp_path, f"{name}.csv", CASES[name])
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT count(*) AS n FROM t")


def test_an_unclosed_quote_in_the_header_is_an_error_not_an_empty_table(tmp_path):
    path = write(tmp_path, "h.csv", 'a,"b,c\n1,2,3\n4,5,6\n')
    with gateway_for(path) as gw:
        # unset, the quote is sniffed as ' (as DuckDB does): the header reads a, "b, c
        assert_same(gw, "SELECT * FROM t")
    with gateway_for(path, quote='"') as gw, pytest.raises(QueryError, match="not closed on that line"):
        gw.execute("SELECT * FROM t", engine="csv")


@pytest.mark.parametrize("content", [
    b"\"'pedro;br;nl;1.72\nmark;nl\ndiego;\"\npedro;nl\"",  # afl/24.csv
    b'"\\',  # multidelimiter/unterminated_escape.csv
])
def test_a_header_quote_unclosed_under_the_quote_duckdb_detects_is_left_to_duckdb(
        tmp_path, content):
    """DuckDB's detection keeps the quote (afl/24.csv: `;` and `"`, a quoted preamble row
    over three lines, then the header `pedro;nl"`: columns pedro and nl", no rows); the
    csv engine found the header's quote unclosed and read the file unquoted, another
    table (3 rows of 1 column: `count(*)` 3 where DuckDB says 0). Found by
    bench/csv_corpus_fuzz.py."""
    path = write(tmp_path, "h.csv", content)
    with gateway_for(path) as gw:
        for sql in ("SELECT * FROM t", "SELECT count(*) AS n FROM t"):
            with pytest.raises(Unsupported, match="not closed on that line"):
                gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        assert_same(gw, "SELECT count(*) AS n FROM t")


def test_a_ragged_row_says_how_many_fields_it_has_and_why(tmp_path):
    path = write(tmp_path, "r.csv", "a,b,c,d,e\n1,2,3,4,5\n1,2,3\n")
    with gateway_for(path, delimiter=",") as gw, pytest.raises(Unsupported) as info:
        gw.execute("SELECT * FROM t", engine="csv").to_arrow()
    assert "line 3, byte 20: the row has 3 fields; the header has 5" in str(info.value)
    assert "delimiter ','" in str(info.value.hint)
    assert "first line as the header" in str(info.value.hint)


def test_a_file_in_hive_partition_folders_is_unsupported_not_short_of_columns(tmp_path):
    folder = tmp_path / "part=a" / "date=2012-01-01"
    folder.mkdir(parents=True)
    path = write(folder, "test.csv", "id,value\n1,x\n")
    with gateway_for(path) as gw:
        with pytest.raises(Unsupported, match="hive partition"):
            gw.execute("SELECT * FROM t", engine="csv")
        assert gw.execute("SELECT * FROM t", engine="duck").to_arrow().num_columns == 4
    with gateway_for(path, fallback="duck") as gw:
        assert gw.execute("SELECT * FROM t", engine="csv").to_arrow().num_columns == 4


@pytest.mark.parametrize("content", [
    "ts;t2\n2020-01-01 01:02:03;01-01-2020 01:02:03\n",  # one timestamp format per file
    "d,t\nNight,2022/01/27 11:04:57 PM\n",  # not among DuckDB's formats
    "a,t\n1,2/18/2008 02:36:48\n",  # m/d/Y takes %I:%M:%S %p in DuckDB's list
], ids=["two_formats", "year_first_pm", "month_first_24h"])
def test_timestamp_formats_are_duckdbs_one_per_file(tmp_path, content):
    path = write(tmp_path, "ts.csv", content)
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")


def test_a_backslash_before_quotes_is_sniffed_as_the_escape(tmp_path):
    path = write(tmp_path, "e.csv", '123|T|text1\n345|T|"text\\"2\\""\n"567"|T|text3\n')
    with gateway_for(path) as gw:
        got = assert_same(gw, "SELECT * FROM t")
    assert got.column(2).to_pylist() == ["text1", 'text"2"', "text3"]


@pytest.mark.parametrize("content", ['"header1;header2"\n"value1;value2"\n"v;w"\n',
                                     '"Dec 8, 2022"\n"Sep 26, 2022"\n"Aug 31, 2022"\n'],
                         ids=["quoted_lines", "quoted_commas"])
def test_a_quote_that_never_opens_a_field_is_not_a_candidate(tmp_path, content):
    path = write(tmp_path, "q.csv", content)
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")


def test_rows_ending_in_a_delimiter_do_not_make_the_header_a_preamble(tmp_path):
    # DuckDB drops the trailing empty field, and so does the csv engine
    path = write(tmp_path, "t.csv", "c1,c2\n1,2,\n3,4,\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert gw.execute("SELECT * FROM t", engine="csv").to_arrow().column_names == ["c1", "c2"]


def test_a_quote_never_closed_in_a_field_larger_than_the_csv_modules_limit(tmp_path):
    """The quote never closes, so DuckDB's sniffer (and the csv engine's) reads the
    file unquoted; with the delimiter and quote set, it is a clear error."""
    path = write(tmp_path, "big.csv", 'a\tb\n1\t"' + "x" * 600_000 + "\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT a, length(b) AS n FROM t")
    with gateway_for(path, delimiter="\t", quote='"') as gw, \
            pytest.raises(Unsupported, match="not closed"):
        gw.execute("SELECT * FROM t", engine="csv").to_arrow()


def test_a_value_in_the_dropped_trailing_field_past_the_sample_is_an_error(tmp_path):
    """The sniffer reads DuckDB's 20,480-row sample: rows past it whose dropped trailing
    field holds a value are ragged rows, a clear error, never a silently dropped value."""
    rows = "xx,2,\n" * 21000
    path = write(tmp_path, "t.csv", "a,b\n" + rows + "3,4,5\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported, match="line 21002"):
        gw.execute("SELECT b FROM t", engine="csv").to_arrow()


def test_a_ragged_row_inside_a_wide_sample_is_read_as_duckdb_reads_it(tmp_path):
    """Rows of 6 KB: DuckDB's sample holds the whole file, ragged row included, and so
    does the csv engine's (it read 8 MiB and called the row past it an error)."""
    rows = ("x" * 6000 + ",2,\n") * 1500
    path = write(tmp_path, "t.csv", "a,b\n" + rows + "3,4,5\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")


def test_a_file_no_dialect_reads_is_refused_as_duckdb_refuses_it(tmp_path):
    # CRLF then LF: DuckDB's strict state machine rejects every candidate dialect
    path = write(tmp_path, "m.csv", "a,b\r\n1,2\n3,4")
    with gateway_for(path) as gw:
        with pytest.raises(QueryError, match="no delimiter, quote and comment character"):
            gw.execute("SELECT * FROM t", engine="csv").to_arrow()
        with pytest.raises(QueryError):
            gw.execute("SELECT * FROM t", engine="duck").to_arrow()


def test_the_dialect_is_detected_in_few_candidates_on_a_plain_file(tmp_path):
    """Characters absent from the sample are not tried (the reading would be the
    same as without them); the choice is still DuckDB's."""
    from gateway_csv import dialect

    rows = "".join(f"{i},x{i},{i / 3}\n" for i in range(3000))
    path = write(tmp_path, "p.csv", "a,b,c\n" + rows)
    found = dialect.detect(path.read_bytes(), {}, True)
    assert [(d.delimiter, d.quote, d.ncols) for d in found] == [(",", "", 3)]
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")


def test_yes_and_no_are_booleans_as_in_duckdb_and_y_n_are_text(tmp_path):
    path = write(tmp_path, "yn.csv", "a,b\nyes,1\nNo,2\nYES,3\n")
    with gateway_for(path) as gw:
        got = assert_same(gw, "SELECT * FROM t")
        assert str(got.schema.field("a").type) == "bool"
    path = write(tmp_path, "y.csv", "a,b\ny,1\nn,2\n")
    with gateway_for(path) as gw:
        assert str(assert_same(gw, "SELECT * FROM t").schema.field("a").type) == "string"
    # a column declared BOOLEAN takes y/n too, as DuckDB's cast does
    with gateway_for(path, columns={"a": "BOOLEAN"}) as gw:
        assert gw.execute("SELECT a FROM t", engine="csv").to_arrow().column(0).to_pylist() == \
            [True, False]


def test_a_one_line_file_with_an_empty_value_is_a_row_as_in_duckdb(tmp_path):
    # DuckDB tests the empty value (a NULL) against BOOLEAN, which it fits: no header
    path = write(tmp_path, "one.csv", "AAA|")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT count(*) AS n FROM t")
        assert gw.execute("SELECT * FROM t", engine="csv").to_arrow().num_rows == 1
