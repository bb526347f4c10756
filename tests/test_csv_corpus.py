"""Files of DuckDB's own CSV corpus, one or more per root cause of issue #11, against DuckDB.

The files (tests/fixtures/duckdb_csv/, MIT, see its README.md) are read with
default options by the csv engine and by the duckdb engine; ``bench/csv_corpus.py``
runs the same check on the whole corpus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import GatewayError
from tests.csv_support import assert_same, gateway_for

FIXTURES = Path(__file__).parent / "fixtures" / "duckdb_csv"

#: file -> the root cause it shows; both engines must give the same answer
AGREE = {
    "16857.csv": "the sniffer's regex backtracked exponentially (a hang)",
    "venue_pipe.csv": "the sniffer's regex backtracked exponentially (a hang)",
    "error/mixedtypes.csv": "the sniffer's regex backtracked exponentially (a hang)",
    "glob/crawl/d/file.csv": "a one-line file of a number is a row, not a header",
    "lineitem-carriage.csv": "rows ending in a lone CR",
    "one_r_two.csv": "rows ending in a lone CR",
    "issue5077.csv": "rows ending in a lone CR",
    "issue5077_aligned.csv": "rows ending in a lone CR",
    "test/unterminated.csv": "a quote in the header never closed: read unquoted",
    "unescaped_quotes/end_quote_3.csv": "a header quote closed on a later line: read unquoted",
    "empty_first_line.csv": "a blank first line",
    "comments/simple.csv": "comment lines",
    "test/bgzf.gz": "gzip (blocked, many members)",
    "zstd/lineitem1k.tbl.zst": "zstd",
    "auto/time.csv": "TIME values",
    "auto/time_date_timestamp_mm-dd-yyyy.csv": "non-ISO dates and timestamps, TIME",
    "dates.csv": "d/m/Y dates (DuckDB prefers day first)",
    "test/dateformat.csv": "d/m/Y dates (DuckDB prefers day first)",
    "single_quote.csv": "' as the quote",
    "bool.csv": "booleans",
    "bad_date.csv": "impossible dates stay text",
    "big_number.csv": "integers past 64 bits (HUGEINT)",
    "test/many_empty_lines.csv": "blank lines of a one-column file are NULL rows",
    "rejects/incorrect_columns/small_mix.csv":
        "ragged under every delimiter: DuckDB's dialect detection reads one column per line",
    "unescaped_quotes/some_escaped_some_not.csv":
        "quotes that do not pair up: DuckDB's dialect detection reads them unquoted",
    "unescaped_quotes/stops.csv": "stray quotes in fields: read unquoted, as DuckDB picks",
    "bug_12596.csv": "rows ending in a delimiter the header lacks: the empty field is dropped",
    "test_apple_financial.csv.gz": "a preamble, then rows ending in a delimiter the header lacks",
    "csv_quoted_newline_odd.csv": "a preamble whose quoted fields hold line ends",
    "comments/mid_line_header.csv": "comments after values, the header's too",
    "comments/mid_line_quote.csv": "comments after values; a comment character inside quotes",
    "comments/empty_space.csv": "comment lines that start with blanks",
    "14512.csv": "blanks after a closing quote",
    "empty_space_start_value.csv": "blanks before an opening quote, and unquoted blanks kept",
    "validator/quoted_new_value.csv": "blanks before an opening quote (' as the quote)",
    "test/force_not_null.csv":
        "a header over a column of only NULLs: DuckDB tests it against BOOLEAN",
}

#: files both engines refuse, or that DuckDB refuses and the csv engine reads
REFUSED = {
    "encodings/latin1.csv.gz": ("both", "latin-1 without the encoding option"),
    "test/mixed_line_endings.csv": ("both", "CRLF and LF mixed: DuckDB's sniffer (strict mode) "
                                            "finds no dialect, nor does the csv engine's port"),
}


@pytest.mark.parametrize("name", sorted(AGREE))
def test_the_csv_engine_agrees_with_duckdb(name):
    with gateway_for(FIXTURES / name, format="csv") as gw:
        assert_same(gw, "SELECT count(*) AS n FROM t")
        assert_same(gw, "SELECT * FROM t")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusals(name):
    who, _why = REFUSED[name]
    with gateway_for(FIXTURES / name, format="csv") as gw:
        with pytest.raises(GatewayError):
            gw.execute("SELECT * FROM t", engine="duck").to_arrow()
        if who == "both":
            with pytest.raises(GatewayError):
                gw.execute("SELECT * FROM t", engine="csv").to_arrow()
        else:
            assert gw.execute("SELECT * FROM t", engine="csv").to_arrow().num_rows > 0


def test_bug_7578_is_read_as_duckdb_reads_it():
    """bug_7578.csv holds a header and rows of 10 tab-separated fields; DuckDB's
    dialect detection prefers the wider comma reading (24 columns, one row), and
    the csv engine, which runs the same detection, reads the same table."""
    with gateway_for(FIXTURES / "bug_7578.csv") as gw:
        got = gw.execute("SELECT * FROM t", engine="csv").to_arrow()
        assert_same(gw, "SELECT * FROM t")
    assert (got.num_columns, got.num_rows) == (24, 1)


def test_every_fixture_is_checked():
    files = {str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.is_file()}
    assert files - {"LICENSE", "README.md"} == set(AGREE) | set(REFUSED) | {"bug_7578.csv"}
