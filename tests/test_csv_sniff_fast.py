"""The sniffer's fast paths give what its plain forms give: ``str.split`` where it
stands in for ``csv.reader``, and the searches over a joined sample that stand in
for value-by-value loops (typing DuckDB's 20,480-row sample is most of a cold
one-query process, docs/benchmarks.md)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import Unsupported
from gateway_csv import dialect, layout

#: unquoted text: delimiters, blanks, CR/LF line ends, digits, signs, multi-byte letters
PLAIN = st.lists(st.sampled_from([*",;|\t 1-.aé\n", "\r\n", "\n\n"]),
                 max_size=150).map("".join)
#: the same with what makes the reader do more than split: quotes, escapes, NUL, lone CR
ANY = st.lists(st.sampled_from([*",;\t 1a\n\"'\\\x00\r", "\r\n"]),
               max_size=100).map("".join)


def reader_rows(text: str, delimiter: str, quote: str, escape: str,
                limit: int) -> list[list[str]]:
    """What csv.reader gives, as _split_lines configures it."""
    kwargs = layout.reader_options(delimiter, quote, escape)
    rows = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), **kwargs):
            if row:
                rows.append(list(row))
            if len(rows) >= limit:
                break
    except csv.Error:
        pass
    return rows


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(PLAIN, ANY), delimiter=st.sampled_from([",", ";", "\t"]),
       quote=st.sampled_from(['"', "'", ""]), limit=st.integers(min_value=1, max_value=12))
def test_split_lines_is_the_readers_split(text, delimiter, quote, limit):
    escape = quote if quote != "'" else "\\"
    assert layout._split_lines(text, delimiter, quote, escape, limit) == \
        reader_rows(text, delimiter, quote, escape, limit)


def test_plain_split_takes_a_plain_sample_and_leaves_the_rest_to_the_reader():
    assert layout._split_plain("a,b\r\n1,2\r\n\r\n3,4\n", ",", '"', '"', 10) == \
        [["a", "b"], ["1", "2"], ["3", "4"]]
    for text in ('a,"b"\n', "a\x00,b\n", "a\rb\n", "a,b\\\n"):
        assert layout._split_plain(text, ",", '"', "\\", 10) is None
    # blank lines before the limit: the rows past the split may be needed
    assert layout._split_plain("a\n\n\nb\nc\nd\n", ",", '"', '"', 3) is None


def blank_after_double_by_value(values: list[str]) -> bool:
    """The value-by-value form of _blank_after_double."""
    for i, value in enumerate(values):
        if not re.fullmatch(r"[ \t]*-?[0-9]+[ \t]*", value):
            return any(v[-1:] in (" ", "\t") for v in values[i:])
    return False


VALUES = st.lists(st.sampled_from(["1", "-2", " 3", "4 ", "5\t", "2.5", "2.5 ", "x", "",
                                   " ", "-", "1e3", "٣"]), max_size=30)


@settings(max_examples=400, deadline=None)
@given(values=VALUES)
def test_blank_after_double_matches_its_value_by_value_form(values):
    assert layout._blank_after_double(values) == blank_after_double_by_value(values)


@settings(max_examples=200, deadline=None)
@given(values=VALUES)
def test_first_not_integer_matches_its_value_by_value_form(values):
    expected = next((i for i, v in enumerate(values)
                     if not re.fullmatch(r"[ \t]*-?[0-9]+[ \t]*", v)), None)
    assert layout._first_not_integer(values) == expected


@pytest.mark.parametrize("blank_before", [True, False])
def test_a_refined_chunk_counts_rows_with_their_nulls(blank_before):
    """The first decimal's row counts the NULL rows before it: 2,000 integers and 100
    NULLs put it past row 2,046, where blanks in its chunk are refused."""
    column = ["7"] * 2000 + [""] * 100 + ["2.5"]
    if blank_before:
        column[1000] = "1 "
    values = [v for v in column if v]
    if blank_before:
        with pytest.raises(Unsupported, match="blanks near its first decimal"):
            layout._refuse_blanks_in_refined_chunk(column, values, ("",))
    else:
        layout._refuse_blanks_in_refined_chunk(column, values, ("",))
    # without the NULLs the decimal sits at row 2,000, in the first chunk: no refusal
    short = [*column[:2000], "2.5"]
    layout._refuse_blanks_in_refined_chunk(short, [v for v in short if v], ("",))
    assert dialect.CHUNK_ROWS - 2 == 2046


def test_infinity_in_a_text_column_is_still_found():
    with pytest.raises(Unsupported, match="holds infinity"):
        layout._column_type(["2024-01-01", "infinity", "2024-01-02"])
    assert layout._column_type(["a", "b"]) == (layout.STR, None)


#: pieces of values of every shape the sniffer tries, and near misses
PIECES = ["0", "1", "7", "9", "12", "2024", "-", "+", ".", "e", "E", ":", "T", " ", "\t", "Z",
          "nan", "NaN", "inf", "Infinity", "true", "F", "yes", "No", "2024-01-31", "2024-02-30",
          "1969-12-31", "12:30", "23:59:59", "24:00:00", "12:30:45.123456789", "+05", "-03:30",
          "+0530", "x", "é", "\u0663", "\u0131nf", "ye\u017f"]
VALUE = st.lists(st.sampled_from(PIECES), min_size=0, max_size=5).map("".join)


@settings(max_examples=1500, deadline=None)
@given(values=st.lists(VALUE, min_size=1, max_size=6))
def test_shapes_in_c_are_the_regexes_and_parsers(values):
    """The C shapes (what the sniffer types by) are, kind by kind, the _PATTERNS
    regexes with DATE, TIMESTAMP and TIMESTAMPTZ parsed by the scanner."""
    from gateway_csv import _scanner

    assert _scanner.shapes("\n".join(values).encode()) == layout.shapes_by_regex(values)


@pytest.mark.parametrize("value", ["2024-01-31 12:30:45.5+05:30", "2024-01-31T12:30Z",
                                   " 2024-01-31 ", "2024-01-31 12:30:45.", "-.5e-3", "1.e5",
                                   "-infinity", "1e", "2024-02-29", "2023-02-29", "00:00",
                                   "2024-01-31 12:30:45+0530", "2024-01-31 12:30:45+05:3"])
def test_shapes_of_edge_values(value):
    from gateway_csv import _scanner

    assert _scanner.shapes(value.encode()) == layout.shapes_by_regex([value])


#: plain CSV text: fields of digits, letters, blanks and NULL words, rows of varying widths,
#: blank lines and CRLF line ends
PLAIN_CSV = st.lists(
    st.lists(st.sampled_from(["", "1", "-2.5", "x", " a ", "NA", "é", "2024-01-01"]),
             min_size=0, max_size=4).map(",".join),
    min_size=0, max_size=12).flatmap(
        lambda lines: st.sampled_from(["\n", "\r\n"]).map(
            lambda end: end.join(lines) + st_end(lines, end)))


def st_end(lines: list[str], end: str) -> str:
    return end if lines else ""


@settings(max_examples=600, deadline=None)
@given(text=PLAIN_CSV, ncols=st.integers(min_value=1, max_value=4),
       skip=st.integers(min_value=0, max_value=2), limit=st.integers(min_value=1, max_value=9),
       trailing=st.booleans(), nulls=st.sampled_from([("",), ("NA",), ("", "NA")]))
def test_the_c_sample_is_the_rows_sample(text, ncols, skip, limit, trailing, nulls):
    """_Sample.plain (C, straight to columns) gives what the rows _split_lines gives
    make: the first row, the row count, the body's count and its columns."""
    fast = layout._Sample.plain(text, ",", '"', '"', limit + skip, skip, ncols, trailing, nulls)
    rows = layout._split_lines(text, ",", '"', '"', limit + skip)[skip:]
    if not rows:
        assert fast is None
        return
    if trailing:
        rows = rows[:1] + [r[:ncols] if len(r) == ncols + 1 else r for r in rows[1:]]
    slow = layout._Sample.of_rows(rows, ncols, nulls)
    assert fast is not None
    assert (fast.first, fast.rows, fast.body) == (slow.first, slow.rows, slow.body)
    for f, s in zip(fast.columns, slow.columns, strict=True):
        assert (f.joined, f.count, f.rows, list(f.cells()), f.values()) == \
            (s.joined, s.count, s.rows, list(s.cells()), s.values())
    for f, s in zip(fast.with_first(nulls), slow.with_first(nulls), strict=True):
        assert (f.joined, f.count, list(f.cells())) == (s.joined, s.count, list(s.cells()))


def test_a_sample_with_quotes_is_left_to_the_reader():
    assert layout._Sample.plain('a,b\n"1",2\n', ",", '"', '"', 10, 0, 2, False, ("",)) is None
    assert layout._Sample.plain("a;b\n1;2\n", "\u00a7", '"', '"', 10, 0, 2, False, ("",)) is None


def test_a_sample_wider_than_the_c_side_takes_is_left_to_the_reader():
    """sample_columns refuses more than 65,536 columns (a ValueError, not a query error):
    such a sample is split in Python instead, and sniffed all the same."""
    wide = ",".join(f"c{i}" for i in range(70_000)) + "\n" + ",".join(["1"] * 70_000) + "\n"
    assert layout._Sample.plain(wide, ",", '"', '"', 10, 0, 70_000, False, ("",)) is None
    found = layout.sniff(wide.encode(), {}, path="wide.csv", complete=True)
    assert len(found.names) == 70_000 and found.kinds[0] == layout.INT
