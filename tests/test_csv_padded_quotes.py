"""Blanks around quoted fields and comments after values, read without a Python pass over the file.

A file with blanks beside its quoted fields (``1, "a" ,2``; TPC-H's lineitem as
``tpchgen-cli`` writes it) is read in place by the scanner, which skips them;
until issue #39 every query rewrote the whole file line by line in Python
(155 s for lineitem's ``count(*)``). A file with comments after values is still
read through a copy, but cut a block at a time in C (``_scanner.uncomment``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_csv import _scanner
from gateway_csv.dialect import cut_comment, unpad_quotes
from tests.csv_support import assert_same, gateway_for, write

_TEXT = st.text(alphabet=' ,;"#\\ab1\r\n', max_size=80)


def _by_lines(fix, data: bytes, in_quote: bool) -> tuple[bytes, bool]:
    out = []
    for line in data.splitlines(keepends=True):
        line, in_quote = fix(line, in_quote)
        out.append(line)
    return b"".join(out), in_quote


@settings(max_examples=400, deadline=None)
@given(text=_TEXT, delimiter=st.sampled_from([",", ";"]), escape=st.sampled_from(['"', "\\", ""]),
       in_quote=st.booleans())
def test_unpad_is_the_line_by_line_reference(text, delimiter, escape, in_quote):
    data = text.encode()
    d, q = delimiter.encode(), b'"'
    expected = _by_lines(lambda line, open_: unpad_quotes(line, d, q, escape.encode(), open_),
                         data, in_quote)
    got = _scanner.unpad(data, ord(delimiter), ord('"'), ord(escape) if escape else -1, in_quote)
    assert got == expected


@settings(max_examples=1500, deadline=None)
@given(text=_TEXT, delimiter=st.sampled_from([",", ";"]), escape=st.sampled_from(['"', "\\", ""]),
       in_quote=st.booleans())
def test_unpads_check_is_whether_its_copy_differs(text, delimiter, escape, in_quote):
    """Asked only whether a blank goes (opening.unpadded_layout): no copy, and a quote
    at a time where there is no escape apart from the quote; the same answer, and
    where none goes the same quote open at the end."""
    data = text.encode()
    args = (ord(delimiter), ord('"'), ord(escape) if escape else -1, in_quote)
    copy, open_after = _scanner.unpad(data, *args)
    changed, open_then = _scanner.unpad(data, *args, True)
    assert changed == (copy != data)
    if not changed:
        assert open_then == open_after


@settings(max_examples=400, deadline=None)
@given(text=_TEXT, quote=st.sampled_from(['"', ""]), in_quote=st.booleans())
def test_uncomment_is_the_line_by_line_reference(text, quote, in_quote):
    data = text.encode()
    expected = _by_lines(lambda line, open_: cut_comment(line, b"#", quote.encode(), open_),
                         data, in_quote)
    got = _scanner.uncomment(data, ord("#"), ord(quote) if quote else -1, in_quote)
    assert got == expected


PADDED = ('id, name ,note,   price\n'
          '1, "a, b" ,x,  1.5\n'
          '2,"c"  , "y"  ,2\n'
          ' 3 ,   "d ""e"""   ,  z ,3.25\n'
          '4,"multi\nline" ,"w",4\n'
          '5,  "",  "" ,5\n')


def test_blanks_around_quotes_are_skipped_by_the_scanner(tmp_path):
    """The scanner reads the file in place (its dialect carries the flag), in chunks of
    a few bytes so that boundaries fall inside padded quoted fields."""
    path = write(tmp_path, "padded.csv", PADDED * 40)
    for chunk in (7, 64, 1 << 20):
        with gateway_for(path, chunk_bytes=chunk, format="csv") as gw:
            assert_same(gw, "SELECT * FROM t")
            assert_same(gw, "SELECT count(*) AS n FROM t")
            assert_same(gw, "SELECT name, count(*) AS n, max(price) AS s FROM t GROUP BY name "
                            "ORDER BY name")
            assert_same(gw, "SELECT note FROM t WHERE note = 'y'")
            assert_same(gw, "SELECT price FROM t ORDER BY price DESC LIMIT 3")


def test_padded_header_and_preamble_place_the_first_row(tmp_path):
    path = write(tmp_path, "header.csv", ' "a" , "b"\n1, "x"\n2,"y" \n')
    with gateway_for(path, format="csv") as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT b, a FROM t")


def test_padded_file_is_scanned_in_place():
    """The scanner's own flag: without it the blanks and quotes are read as text."""
    data = b'1, "a, b" ,2\n'
    f = _write_file(data)
    try:
        dialect = (ord(","), ord('"'), ord('"'), 3, False, (b"",), -1, False, True)
        _end, _seen, out, _skipped, error, payload = _scanner.scan(
            f, 0, len(data), dialect, ((1, 0),), None, None, None, -1)
        assert error is None and out == 1
        _validity, _offsets, chars, _nulls = payload[0]
        assert bytes(chars) == b"a, b"
    finally:
        f.close()


def _write_file(data: bytes):
    import os
    import tempfile

    fd, name = tempfile.mkstemp(suffix=".csv")
    os.write(fd, data)
    os.close(fd)
    try:
        return _scanner.File(name)
    finally:
        os.unlink(name)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(-5, 5), st.text(alphabet='ab, ', max_size=6),
                               st.sampled_from(["", " "]), st.sampled_from(["", " ", "  "])),
                     min_size=1, max_size=30))
def test_padded_tables_read_like_duckdb(tmp_path, rows):
    lines = ["k,s"]
    for k, s, before, after in rows:
        lines.append(f'{k},{before}"{s}"{after}')
    path = write(tmp_path, "p.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=16, format="csv", delimiter=",", quote='"') as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT s, sum(k) AS n FROM t GROUP BY s ORDER BY s")


def test_comments_after_values_in_a_padded_file(tmp_path):
    path = write(tmp_path, "c.csv", 'a;b\n1; "x" # note\n2;"y" ;\n# whole\n3; "z;w"\n')
    with gateway_for(path, chunk_bytes=8, format="csv") as gw:
        assert_same(gw, "SELECT * FROM t")


def test_a_cr_inside_quotes_of_a_lone_cr_file_is_refused_and_one_outside_is_read(tmp_path):
    """opening.py's lone-CR copy checks quoted CRs in C (``_scanner.quoted_cr``); the
    check looked at every quote and CR in Python (6x a plain file's time)."""
    import pytest

    import gateway

    assert _scanner.quoted_cr(b'1,"a\rb"\r', False) == (True, True)
    assert _scanner.quoted_cr(b'1,"a\r', True) == (False, False)
    path = write(tmp_path, "cr.csv", 'a,b\r1,"x"\r2,"y\rz"\r')
    with gateway_for(path, format="csv") as gw, \
            pytest.raises(gateway.Unsupported, match="lone carriage return"):
        gw.execute("SELECT * FROM t", engine="csv").to_arrow()
    path = write(tmp_path, "ok.csv", 'a,b\r1,"x, y"\r2,"z"\r')
    with gateway_for(path, format="csv") as gw:
        assert_same(gw, "SELECT * FROM t")


def test_a_padded_files_layout_is_kept_by_the_sniff_cache(tmp_path, monkeypatch):
    """The layout kept on disk is the one typed on the unpadded head, so the next
    process sniffs neither head."""
    from gateway_csv import sniff_cache

    monkeypatch.setenv("ARROWGATE_SNIFF_CACHE", str(tmp_path / "cache"))
    path = write(tmp_path, "padded.csv", PADDED * 2000)
    assert path.stat().st_size >= sniff_cache.MIN_BYTES
    with gateway_for(path, format="csv") as gw:
        first = assert_same(gw, "SELECT * FROM t")
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1
    kept = sniff_cache._read(entries[0])
    assert kept is not None and kept.padded_quotes and kept.data_start == len(PADDED.split("\n")[0]) + 1
    with gateway_for(path, format="csv") as gw:
        assert gw.execute("SELECT * FROM t", engine="csv").to_arrow().equals(first)


def test_a_blank_beside_a_quote_inside_a_quoted_field_is_sniffed_once(tmp_path):
    """TPC-H's lineitem has `, "` inside its quoted comments (`"...bold, "`), which the text
    test for padded quotes takes for a blank before an opening quote; the scanner's unpad
    removes nothing there, and the layout found is kept, not sniffed again on the same
    bytes (0.1 s of CPU for lineitem's head). The answers are DuckDB's either way."""
    from gateway_csv.layout import sniff
    from gateway_csv.opening import unpadded_layout

    head = b"k,c\n" + b'1,"sleep carefully bold, "\n2,"plain"\n' * 50
    layout = sniff(head, {}, path="lineitem.csv", complete=True)
    assert layout.padded_quotes
    assert unpadded_layout(head, True, layout, {}, "lineitem.csv") is layout
    padded = b"k,c\n" + b'1, "x"\n' * 50
    found = sniff(padded, {}, path="padded.csv", complete=True)
    assert unpadded_layout(padded, True, found, {}, "padded.csv") is not found
    path = write(tmp_path, "lineitem.csv", head)
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT count(*) AS n FROM t")
        assert_same(gw, "SELECT * FROM t")
