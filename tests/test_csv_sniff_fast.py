"""The sniffer's fast paths give what its plain forms give: ``str.split`` where it
stands in for ``csv.reader``, the searches over a joined sample that stand in
for value-by-value loops, the C pass that types a plain sample without joining its
columns, and the dialect candidates left unrun (typing DuckDB's 20,480-row sample
is most of a cold one-query process, docs/benchmarks.md)."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import textwrap
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import GatewayError, Unsupported
from gateway_csv import _scanner, dialect, layout

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


#: a line with quotes, escapes, blanks and delimiters: a quoted value, a doubled quote, a
#: quote inside an unquoted value, one left open, an escape before a quote or a line end
SPECIAL_LINE = st.lists(st.sampled_from(['"', "'", "\\", ",", ";", "a", "1", " ", '""',
                                         '"x,y"', "\r"]), min_size=1, max_size=12).map("".join)


@settings(max_examples=800, deadline=None)
@given(plain=st.lists(st.lists(st.sampled_from(["1", "a", "", " x", "2.5", ";"]), min_size=1,
                               max_size=4).map(",".join), min_size=10, max_size=40),
       special=st.lists(st.tuples(st.integers(min_value=0, max_value=39), SPECIAL_LINE),
                        max_size=3),
       end=st.sampled_from(["\n", "\r\n"]), last=st.booleans(),
       quote=st.sampled_from(['"', "'"]), delimiter=st.sampled_from([",", ";"]),
       limit=st.integers(min_value=1, max_value=50))
def test_a_sample_written_without_quotes_has_the_readers_rows(plain, special, end, last, quote,
                                                              delimiter, limit):
    """Lines split at delimiters and the few quoted ones read by the reader, each alone,
    written without quotes: split at the new delimiter, the reader's rows over the
    whole text (or None, and the reader reads it all)."""
    lines = list(plain)
    for at, line in special:
        lines.insert(at % (len(lines) + 1), line)
    text = end.join(lines) + (end if last else "")
    escape = quote if quote == '"' else "\\"
    rewritten = layout.unquoted(text, delimiter, quote, escape)
    if rewritten is not None:
        assert layout._split_lines(rewritten.decode(), layout.UNQUOTED_DELIMITER, "", "",
                                   limit) == reader_rows(text, delimiter, quote, escape, limit)


@settings(max_examples=1500, deadline=None)
@given(lines=st.lists(st.one_of(SPECIAL_LINE, st.sampled_from(["1,2", "a;b", "", "x\x1f",
                                                               "é,\"ü\"", "\"a\x00\""])),
                      max_size=8),
       end=st.sampled_from(["\n", "\r\n", "\r"]), last=st.booleans(),
       quote=st.sampled_from(['"', "'", ""]), escape=st.sampled_from(['"', "'", "\\", ""]),
       delimiter=st.sampled_from([",", ";"]))
def test_the_c_form_of_a_sample_without_quotes_is_the_readers(lines, end, last, quote, escape,
                                                              delimiter):
    """_scanner.unquote gives what the reader's form gives, with no bound on the quoted
    lines, or None where it does (or where the reader's form may refuse it)."""
    text = end.join(lines) + (end if last else "")
    expected = layout.unquoted_by_reader(text, delimiter, quote, escape, budget=False)
    found = _scanner.unquote(text.encode(), ord(delimiter), ord(quote) if quote else -1,
                             ord(escape) if escape else -1)
    if found is not None:
        assert found.decode() == expected
    else:
        assert expected is None or "\x1f" in text or "\x00" in text


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(st.sampled_from(["1,2", '"a,b",1', "", "\r", "x\x1f", "y\x00", "z\rz",
                                       '"open']), max_size=12),
       limit=st.integers(min_value=1, max_value=12))
def test_the_c_form_stops_after_the_rows_a_sample_takes(lines, limit):
    """With a limit, _scanner.unquote writes (and checks) the text up to the line end of
    its limit-th row (a line not blank once a CR before its LF goes): the unlimited
    answer cut there, whatever follows; and the sample typed from it is the same."""
    text = "".join(line + "\n" for line in lines)
    args = (ord(","), ord('"'), ord('"'))
    rows, cut = 0, len(lines)
    for i, line in enumerate(lines):
        rows += line not in ("", "\r")
        if rows == limit:
            cut = i + 1
            break
    head = "".join(line + "\n" for line in lines[:cut])
    expected = _scanner.unquote(head.encode(), *args)
    assert _scanner.unquote(text.encode(), *args, limit) == expected
    if expected is not None:
        whole = _scanner.unquote(text.encode(), *args)
        sample = (0x1F, 2, 0, limit, False, (b"",))
        if whole is not None:
            assert _scanner.sample_shapes(expected, *sample) == \
                _scanner.sample_shapes(whole, *sample)


def test_the_c_form_leaves_a_field_past_the_readers_limit_to_the_reader():
    """A quoted line's field past csv.reader's size limit: the reader may refuse it
    (the limit is the process's), so C leaves the line to it."""
    text = '1,"' + "x" * 200_000 + '"\n2,b\n'
    assert _scanner.unquote(text.encode(), ord(","), ord('"'), ord('"')) is None
    assert _scanner.unquote(text.replace('"', "").encode(), ord(","), ord('"'), ord('"')) == \
        text.replace('"', "").replace(",", "\x1f").encode()


def test_a_quoted_value_in_a_plain_sample_is_written_without_quotes():
    lines = ["id,zone,n"] + [f"{i},Midtown,{i % 7}" for i in range(200)]
    lines[50] = '50,"Midtown, East",1'
    text = "\n".join(lines) + "\n"
    rewritten = layout.unquoted(text, ",", '"', '"')
    assert rewritten is not None
    assert rewritten.decode().split("\n")[50].split(layout.UNQUOTED_DELIMITER) == \
        ["50", "Midtown, East", "1"]
    # a value running over a line end: the reader reads the whole text
    lines[60] = '60,"Midtown'
    assert layout.unquoted("\n".join(lines), ",", '"', '"') is None


def test_a_sample_quoted_on_every_line_is_written_without_quotes():
    """TPC-H's lineitem ends each row with a quoted comment: the reader's form gives up
    past a tenth of the lines quoted (each read alone); the C form takes them all, and
    the sample is typed in C, not by the reader's rows in Python."""
    text = "a,b,c\n" + "".join(f'{i},2024-01-0{i % 9 + 1},"carefully, final"\n'
                                for i in range(3000))
    assert layout.unquoted_by_reader(text, ",", '"', '"') is None
    rewritten = layout.unquoted(text, ",", '"', '"')
    assert rewritten is not None
    assert rewritten.decode().split("\n")[1].split(layout.UNQUOTED_DELIMITER) == \
        ["0", "2024-01-01", "carefully, final"]
    with mock.patch.object(layout._Sample, "of_rows", side_effect=AssertionError("by rows")):
        found = layout.sniff(text.encode(), {}, path="t.csv", complete=False)
    assert found.names == ["a", "b", "c"]
    assert found.kinds == [layout.INT, layout.DATE, layout.STR]


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


#: values of a plain sample: of every shape the sniffer types by, near misses, NULL
#: words, blanks around integers and decimals
SAMPLE_VALUES = ["", "1", "-2.5", "x", " a ", "NA", "é", "2024-01-01", "1 ", " 2", "0", "07",
                 "true", "F", "12:30", "3:45", "inf", "-Infinity", "2024-01-01 10:00:00",
                 "2024-01-31T12:30Z", "2024-02-30", "1.5 ", "\t3", "1e5", "12345678901234567890",
                 "10/02/2024", "2024-01-01 10:00:00 UTC"]
#: plain CSV text: fields of digits, letters, blanks and NULL words, rows of varying widths,
#: blank lines and CRLF line ends
PLAIN_CSV = st.lists(
    st.lists(st.sampled_from(SAMPLE_VALUES), min_size=0, max_size=4).map(",".join),
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
        # typed by C in one pass, then read on demand
        assert (f.shapes(), f.integer_rows) == (s.shapes(), integer_rows(s.cells(), nulls))
        assert (f.joined, f.count, f.rows, list(f.cells()), f.values()) == \
            (s.joined, s.count, s.rows, list(s.cells()), s.values())
    for f, s in zip(fast.with_first(nulls), slow.with_first(nulls), strict=True):
        assert (f.shapes(), f.integer_rows) == (s.shapes(), integer_rows(s.cells(), nulls))
        assert (f.joined, f.count, list(f.cells())) == (s.joined, s.count, list(s.cells()))


@settings(max_examples=600, deadline=None)
@given(text=PLAIN_CSV, ncols=st.integers(min_value=1, max_value=4),
       skip=st.integers(min_value=0, max_value=2), limit=st.integers(min_value=1, max_value=9),
       trailing=st.booleans(), nulls=st.sampled_from([(b"",), (b"NA",), (b"", b"NA")]),
       split=st.integers(min_value=1, max_value=40))
def test_a_sample_typed_in_two_halves_is_typed_as_in_one(text, ncols, skip, limit, trailing,
                                                         nulls, split):
    """sample_shapes types a body of ``split`` bytes or more in two halves at once, the
    second in a thread of its own: what it gives is what one pass gives."""
    args = (text.encode(), ord(","), ncols, skip, limit + skip, trailing, nulls)
    assert _scanner.sample_shapes(*args, split) == _scanner.sample_shapes(*args, 1 << 62)


def test_the_taxi_heads_halves_are_its_whole():
    """The split on a real sample: 8 MiB of 51 columns (the benchmark's file shape)."""
    from gateway.cli.commands.data import write_taxi

    out = io.BytesIO()
    write_taxi(out, 25_000)
    head = out.getvalue()[:8 << 20]
    args = (head[:head.rfind(b"\n") + 1], ord(","), 51, 0, 20_481, False, (b"",))
    assert _scanner.sample_shapes(*args) == _scanner.sample_shapes(*args, 1 << 62)


def integer_rows(cells, nulls) -> tuple[int, int]:
    """_Column.integer_rows value by value: the row of the first value that is no integer
    (NULL rows counted) and the last row before it whose value ends in a blank."""
    blank = -1
    for row, value in enumerate(cells):
        if value is None or value in nulls:
            continue
        if not re.fullmatch(r"[ \t]*-?[0-9]+[ \t]*", value):
            return row, blank
        if value[-1:] in (" ", "\t"):
            blank = row
    return -1, blank


#: a table: a first row of names or values, then rows mostly as wide as it
TABLE = st.integers(min_value=1, max_value=4).flatmap(lambda width: st.tuples(
    st.lists(st.sampled_from(["a", "b", "id", " ", *SAMPLE_VALUES]), min_size=width,
             max_size=width),
    st.lists(st.one_of(st.lists(st.sampled_from(SAMPLE_VALUES), min_size=width, max_size=width),
                       st.lists(st.sampled_from(SAMPLE_VALUES), max_size=width + 1)),
             max_size=12),
    st.sampled_from(["\n", "\r\n"]))).map(
        lambda t: "".join(",".join(row) + t[2] for row in [t[0], *t[1]]))


def sniffed(head: bytes, options: dict, complete: bool):
    try:
        return layout.sniff(head, options, path="t.csv", complete=complete)
    except GatewayError as exc:
        return type(exc), str(exc)


@settings(max_examples=500, deadline=None)
@given(text=TABLE, nulls=st.sampled_from([None, "NA", ["", "NA"]]),
       header=st.sampled_from([None, True, False]), complete=st.booleans())
def test_sniffing_by_the_c_sample_is_sniffing_by_its_rows(text, nulls, header, complete):
    """The whole layout (names, kinds, formats, header, data start, ...) or the refusal is
    the same when the sample is typed in C as when it is split into rows in Python."""
    options = {k: v for k, v in (("null", nulls), ("header", header)) if v is not None}
    fast = sniffed(text.encode(), options, complete)
    with mock.patch.object(layout._Sample, "plain", return_value=None):
        slow = sniffed(text.encode(), options, complete)
    assert fast == slow


@pytest.mark.parametrize("blank_before", [True, False])
@pytest.mark.parametrize("header", [None, False])
def test_a_refined_chunk_is_refused_alike_by_the_c_sample(blank_before, header):
    """The integer rows C finds put the first decimal past row 2,046 (NULL rows counted)
    as the rows do, whether or not the first row is a header."""
    column = ["7"] * 2000 + [""] * 100 + ["2.5"] * 3
    if blank_before:
        column[1000] = "1 "
    head = ("a,b\n" + "".join(f"{v},x\n" for v in column)).encode()
    options = {} if header is None else {"header": header}
    fast = sniffed(head, options, True)
    with mock.patch.object(layout._Sample, "plain", return_value=None):
        assert sniffed(head, options, True) == fast
    assert (isinstance(fast, tuple) and fast[0] is Unsupported) == blank_before


def test_a_plain_sample_is_typed_without_reading_its_columns():
    head = ("id,x,when,name\n" + "".join(f"{i},{i / 3:.3f},2024-01-01 10:00:0{i % 10},n{i}\n"
                                           for i in range(3000))).encode()
    with mock.patch.object(_scanner, "sample_columns", side_effect=AssertionError):
        found = layout.sniff(head, {}, path="t.csv", complete=True)
    assert found.kinds == [layout.INT, layout.FLOAT, layout.TS, layout.STR]


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200) | ANY.map(str.encode) | PLAIN_CSV.map(str.encode),
       ncols=st.integers(min_value=1, max_value=5), skip=st.integers(min_value=0, max_value=2),
       limit=st.integers(min_value=1, max_value=9), trailing=st.booleans(),
       nulls=st.sampled_from([(b"",), (b"NA",), (b"", b"NA"), ()]))
def test_the_c_sample_types_any_bytes_as_shapes_types_its_columns(data, ncols, skip, limit,
                                                                  trailing, nulls):
    """NULs, invalid UTF-8, lone CRs and quotes: sample_shapes reads what sample_columns
    reads and types each column as shapes() types its joined values."""
    args = (ord(","), ncols, skip, limit, trailing, nulls)
    first, rows, body, columns, with_first = _scanner.sample_shapes(data, *args)
    assert (first, rows, body) == _scanner.sample_columns(data, *args)[:3]
    for (shapes, count, _, _), (joined, count2, _) in zip(
            columns, _scanner.sample_columns(data, *args)[3], strict=True):
        assert (shapes, count) == (_scanner.shapes(joined) if count2 else 0, count2)
    assert (with_first is None) == (first is None or len(first) != ncols)


def test_the_c_sample_refuses_more_than_65536_columns():
    with pytest.raises(ValueError, match="ncols"):
        _scanner.sample_shapes(b"a,b\n", ord(","), 70_000, 0, 10, False, (b"",))
    with pytest.raises(TypeError, match="nulls are bytes"):
        _scanner.sample_shapes(b"a,b\n", ord(","), 2, 0, 10, False, ("",))


def test_the_c_sample_reads_nothing_past_its_buffer():
    """Each text ends where a page no one may read begins: a read past it would crash the
    process."""
    script = textwrap.dedent("""
        import ctypes, mmap
        from gateway_csv import _scanner

        page = mmap.PAGESIZE
        area = mmap.mmap(-1, 2 * page)
        libc = ctypes.CDLL(None, use_errno=True)
        start = ctypes.addressof(ctypes.c_char.from_buffer(area))
        assert libc.mprotect(ctypes.c_void_p(start + page), page, 0) == 0
        texts = [b"", b"a", b"a,b\\n1,2", b"a,b\\n1,2\\r", b"a,b\\n" + b"x" * 40,
                 b"a,b\\n1," + b"7" * 33, b"a\\n" + b"," * 50, b"h\\n 12:30 \\n2024-01-31 1",
                 b"a,b\\n1\\x00,\\xff\\n\\"2,x"]
        for text in texts:
            area[page - len(text):page] = text
            view = memoryview(area)[page - len(text):page]
            for ncols in (1, 2, 3):
                _scanner.sample_shapes(view, ord(","), ncols, 0, 100, True, (b"", b"NA"))
                _scanner.sample_columns(view, ord(","), ncols, 0, 100, True, (b"",))
            view.release()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


@settings(max_examples=300, deadline=None)
@given(sample=st.lists(st.sampled_from([*",;|\t 1a\n\"'#\\", "\r\n", "x,y", "1,2\n", "1;2;3\n"]),
                       max_size=60).map("".join), complete=st.booleans())
def test_a_candidate_left_unrun_would_have_been_turned_down(sample, complete):
    """dialect._beaten only leaves out candidates that analyzing would turn down."""
    fast = dialect.detect(sample.encode(), {}, complete)
    with mock.patch.object(dialect, "_beaten", return_value=False):
        slow = dialect.detect(sample.encode(), {}, complete)
    assert fast == slow


def test_a_plain_file_runs_the_state_machine_once():
    """A comma-separated file without quotes runs one candidate, not also "|" (absent, so
    one column a row, which cannot beat the comma's columns)."""
    from gateway_csv import _dialect

    sample = b"a,b\n" + b"1,2\n" * 100
    with mock.patch.object(_dialect, "count_rows", wraps=_dialect.count_rows) as count_rows:
        found = dialect.detect(sample, {}, complete=True)
    assert [(c.delimiter, c.ncols) for c in found] == [(",", 2)]
    assert count_rows.call_count == 1


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


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from([*',;"\' a1\n', "\r\n", '" ', ' "', ", "]),
                     max_size=60).map("".join),
       delimiter=st.sampled_from([",", ";"]), quote=st.sampled_from(['"', "'", ""]))
def test_padded_quotes_is_its_pattern(text, delimiter, quote):
    """The blank-beside-a-quote check before the pattern never changes its answer."""
    pattern = bool(quote) and re.search(
        f"(?:^|{re.escape(delimiter)}) +{re.escape(quote)}|"
        f"{re.escape(quote)} +(?:{re.escape(delimiter)}|$)", text, re.M) is not None
    assert layout.padded_quotes(text, delimiter, quote) == pattern


#: a table of plain rows with a few quoted values: a delimiter, a doubled quote, a blank
#: or a number inside quotes, and now and then a quote left open
TABLE_WITH_QUOTES = st.tuples(
    st.integers(min_value=1, max_value=4).flatmap(lambda width: st.tuples(
        st.lists(st.sampled_from(["a", "b", "id", *SAMPLE_VALUES]), min_size=width,
                 max_size=width),
        st.lists(st.lists(st.sampled_from(SAMPLE_VALUES), min_size=width, max_size=width),
                 min_size=10, max_size=30))),
    st.lists(st.tuples(st.integers(min_value=0, max_value=29), st.integers(min_value=0),
                       st.sampled_from(['"x,y"', '"1"', '" 2"', '"a""b"', '""', '"open'])),
             max_size=3),
    st.sampled_from(["\n", "\r\n"])).map(
        lambda t: "".join(",".join(row) + t[2] for row in _quoted(t[0][0], t[0][1], t[1])))


def _quoted(first, rows, quoted):
    rows = [list(first), *(list(r) for r in rows)]  # the header may be quoted too
    for at, col, value in quoted:
        row = rows[at % len(rows)]
        row[col % len(row)] = value
    return rows


@settings(max_examples=400, deadline=None)
@given(text=TABLE_WITH_QUOTES, nulls=st.sampled_from([None, "NA", ["", "NA"]]),
       header=st.sampled_from([None, True, False]), complete=st.booleans())
def test_sniffing_a_sample_written_without_quotes_is_sniffing_its_rows(text, nulls, header,
                                                                      complete):
    """The whole layout, or the refusal, is the same when the few quoted lines are read
    alone and the sample typed in C as when the reader's rows are typed in Python."""
    options = {k: v for k, v in (("null", nulls), ("header", header)) if v is not None}
    fast = sniffed(text.encode(), options, complete)
    with mock.patch.object(layout, "unquoted", lambda *args: None):
        slow = sniffed(text.encode(), options, complete)
    assert fast == slow


def test_dialect_candidates_are_counted_as_many_at_once_as_there_are_processors(monkeypatch):
    """Each candidate's count over the whole sample holds its rows: a sample many dialects
    read alike left a thread per candidate, all holding rows at once for no more speed."""
    import threading
    import time

    from gateway_csv import _dialect
    from gateway_csv import dialect as dialect_module

    sample = b"a;b,c|d\n" + b"1;2,3|4\n" * 3000
    newline = dialect_module.newline_kind(sample)
    cands = [dialect_module.Dialect(d, q, "", "") for d in ",;|\t" for q in ('"', "'")]
    real = _dialect.count_rows
    running, most, lock = [0], [0], threading.Lock()

    def counting(*args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)  # long enough for every thread started to be counting
        try:
            return real(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(_dialect, "count_rows", counting)
    counts = dialect_module._counted(cands, sample, newline, True)
    assert most[0] == 2
    monkeypatch.setattr(_dialect, "count_rows", real)
    assert counts == {id(c): real(sample, dialect_module._byte(c.delimiter),
                                  dialect_module._byte(c.quote), 0, 0, newline,
                                  dialect_module.CHUNK_ROWS * dialect_module.SAMPLE_CHUNKS, True)
                      for c in cands}


@pytest.mark.parametrize("doubled", [False, True])
def test_a_candidate_without_an_escape_shares_its_twins_count(doubled):
    """The candidates quote '"' without an escape and with '"' as escape both survive
    the first 2,048 rows of a sample quoted on every line: where no quote follows a
    closing one, one count over the whole sample stands for both; where one does
    (a doubled quote past row 2,048), the one without an escape is counted too. The
    dialect found is the same as with each counted."""
    from gateway_csv import _dialect

    rows = [f'{i},"carefully, final"\n' for i in range(5000)]
    if doubled:
        rows[3000] = '3000,"a ""b"""\n'
    sample = ("a,b\n" + "".join(rows)).encode()
    calls = []
    count_rows = _dialect.count_rows

    def counting(*args):
        calls.append((*args[1:4], args[6]))
        return count_rows(*args)

    with mock.patch.object(_dialect, "count_rows", counting):
        found = dialect.detect(sample, {}, False)
    whole = [c for c in calls if c[3] == dialect.CHUNK_ROWS * dialect.SAMPLE_CHUNKS]
    assert whole == [(44, 34, 34, 20480)] + ([(44, 34, 0, 20480)] if doubled else [])
    with mock.patch.object(dialect, "_twins", lambda cands: {}):
        each = dialect.detect(sample, {}, False)
    assert [(c.delimiter, c.quote, c.escape, c.quoted, c.escaped, c.ncols) for c in found] == \
        [(c.delimiter, c.quote, c.escape, c.quoted, c.escaped, c.ncols) for c in each] == \
        [(",", '"', '"', True, doubled, 2)]


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.sampled_from(["1,2", "1,2,3", "#c", "1,#c", "", '"a,b",1', '"a', "x"]),
                      max_size=40),
       first=st.integers(min_value=0, max_value=12), end=st.integers(min_value=0, max_value=40),
       ncols=st.integers(min_value=1, max_value=3), complete=st.booleans())
def test_count_rows_checks_the_rows_it_would_list(lines, first, end, ncols, complete):
    """count_rows' check (the refinement's question, answered in C) is what its rows say."""
    from gateway_csv import _dialect

    sample = ("\n".join(lines) + "\n").encode()
    args = (sample, ord(","), ord('"'), 0, ord("#"), 0, 30, complete)
    error, quoted, escaped, finished, rows = _dialect.count_rows(*args)
    checked = _dialect.count_rows(*args, (first, end, ncols))
    assert checked == (error, quoted, escaped, finished,
                       all(r[0] == ncols or r[2] for r in rows[first:end]))


@settings(max_examples=1000, deadline=None)
@given(sample=st.lists(st.sampled_from([*",;| \t\"'\\#ab1\n\r", "\r\n", '""', "xyz", "\x00"]),
                       max_size=80).map("".join),
       delimiter=st.sampled_from([",", ";", " "]), quote=st.sampled_from(['"', "'", ""]),
       escape=st.sampled_from(['"', "'", "\\", ""]), comment=st.sampled_from(["", "#"]),
       newline=st.sampled_from([0, 1, 2]), max_rows=st.integers(min_value=1, max_value=6),
       complete=st.booleans())
def test_count_rows_passing_over_runs_is_the_state_machine(sample, delimiter, quote, escape,
                                                          comment, newline, max_rows, complete):
    """count_rows passes over runs of bytes that keep it in a field or in quotes (8 ms of
    lineitem's 20,480-row refinement, byte by byte): the same answer as the state
    machine's every step."""
    from gateway_csv import _dialect

    args = (sample.encode(), ord(delimiter), dialect._byte(quote), dialect._byte(escape),
            dialect._byte(comment), newline, max_rows, complete)
    fast = _dialect.count_rows(*args)
    was = _dialect.runs(False)
    try:
        slow = _dialect.count_rows(*args)
    finally:
        _dialect.runs(was)
    assert was and fast == slow
