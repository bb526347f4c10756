"""The scanner's AVX2 loops (skipping fields, counting a row's fields) answer as its
baseline SSE2 loops do, and as Python's csv module reads the rows.

Rows of every width around the 16, 32 and 64 byte steps, ragged rows, quoted fields
with delimiters and newlines after the last column a scan reads, and files that end
with or without a newline at every offset of a step.
"""

from __future__ import annotations

import csv
import io
import random

import pytest

from gateway_csv import _scanner, fused
from tests.csv_support import write

NCOLS = 5
#: (delimiter, quote, escape, columns, skip bad rows, null texts, comment, trailing delimiter)
DIALECT = (ord(","), ord('"'), ord('"'), NCOLS, True, (b"",), -1, False)


def _rows(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        fields = NCOLS + rnd.choice([0] * 8 + [-1, 1, -2, 3])
        row = [str(i % 7)] + ["x" * rnd.choice([0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130])
                              for _ in range(fields - 1)]
        if fields > 2 and rnd.random() < 0.1:
            row[rnd.randrange(1, fields)] = rnd.choice(['"a,b"', '"a\nb,c"', '"q""q"', '""'])
        if fields == NCOLS + 1 and not row[-1]:
            row[-1] = "z"  # a row ending in the delimiter is DuckDB's to read: not skipped
        lines.append(",".join(row))
    return "\n".join(lines)


def _expected(text: str, col: int, pad: bool = False) -> tuple[int, int, dict[str | None, int]]:
    good, bad, counts = 0, 0, {}
    # pad: the only blanks outside quotes are single ones before opening quotes
    for row in csv.reader(io.StringIO(text, newline=""), skipinitialspace=pad):
        if len(row) != NCOLS:
            bad += 1
            continue
        good += 1
        key = row[col] or None  # the empty text is the dialect's NULL
        counts[key] = counts.get(key, 0) + 1
    return good, bad, counts


def _scan(path, col: int, pad: bool = False) -> tuple[int, int, dict[str | None, int]]:
    file = _scanner.File(str(path))
    try:
        _end, _seen, rows_out, skipped, error, state = _scanner.scan(
            file, 0, file.size, (*DIALECT, pad), ((col, 0),), (), ((0, 0),), ((0, -1),), -1)
    finally:
        file.close()
    assert error is None
    keys, aggs = state.export()
    return rows_out, skipped, dict(zip(keys[0], aggs[0], strict=True))


@pytest.fixture
def both_loops():
    """Runs the test body's scans with the AVX2 loops (when the processor has them) and
    with the baseline ones; the processor's choice is restored afterwards."""
    best = _scanner.simd(True)
    yield [best, "sse2"] if best == "avx2" else [best]
    _scanner.simd(True)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("col", [0, 3])
def test_the_vector_loops_count_fields_as_the_csv_module_does(tmp_path, both_loops, seed, col):
    text = _rows(seed, 400)
    for cut in range(0, 130, 7):
        body = text[: len(text) - cut]
        for ending in ("", "\n"):
            path = write(tmp_path, f"r{cut}{len(ending)}.csv", body + ending)
            expected = _expected(body, col)
            for loops in both_loops:
                assert _scanner.simd(loops == "avx2") == loops
                assert _scan(path, col) == expected, (loops, cut, ending)


@pytest.mark.parametrize("width", [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130])
@pytest.mark.parametrize("col", [0, 3])
def test_a_row_ending_in_one_delimiter_more_is_reported_not_skipped(tmp_path, both_loops,
                                                                      width, col):
    """DuckDB reads `1,x,x,x,x,` as the row 1, x, x, x, x: the scan stops there ("wide"),
    though it skips bad rows, so that the statement is left to DuckDB."""
    good = ",".join(["1"] + ["x" * width] * (NCOLS - 1))
    for ending in ("", "\n", "\r\n"):
        text = good + "\n" + "1,2,3\n" + good + "," + ending + good + "\n"
        path = write(tmp_path, "w.csv", text)
        offset = len(good) + len("\n1,2,3\n")
        for loops in both_loops:
            assert _scanner.simd(loops == "avx2") == loops
            file = _scanner.File(str(path))
            try:
                error = _scanner.scan(file, 0, file.size, DIALECT, ((col, 0),), (), ((0, 0),),
                                      ((0, -1),), -1)[4]
            finally:
                file.close()
            if ending:
                assert error is not None and error[:2] == ("wide", offset), (loops, ending)
            else:  # the row runs on into the next: 2 * NCOLS fields, a ragged row, skipped
                assert error is None


def test_simd_reports_and_forces_the_loops():
    best = _scanner.simd()
    assert best in ("avx2", "sse2", "scalar")
    try:
        assert _scanner.simd(False) in ("sse2", "scalar")
    finally:
        _scanner.simd(True)
    assert _scanner.simd() == best


TRUNCATE_MAPPED = r"""
import os, sys
from gateway_csv import _scanner
path, loops = sys.argv[1], sys.argv[2] == "avx2"
row = "1," + "x" * 90 + "," + "y" * 40 + "\n"
open(path, "w").write(row * 50_000)
f = _scanner.File(path)
os.truncate(path, len(row) * 20_000 + 61)
assert _scanner.simd(loops) == sys.argv[2]
dialect = (44, 34, 34, 3, False, (b"",))
for slots in (((0, 1),), ((2, 0),)):
    print(_scanner.scan(f, 0, f.size, dialect, slots, (), ((0, 0),), ((0, -1),), -1)[4])
"""


def test_a_file_cut_short_while_mapped_is_reported_by_both_loops(tmp_path, both_loops):
    """The loops read whole 32 and 64 byte steps only inside the mapping; the pages the
    file lost raise SIGBUS, which the scan turns into an error (in a child process, so
    that a fault cannot take the test run with it)."""
    import subprocess
    import sys

    for loops in both_loops:
        run = subprocess.run([sys.executable, "-c", TRUNCATE_MAPPED, str(tmp_path / "t.csv"), loops],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split("\n")[:2] == ["('changed', 0, -1)"] * 2, loops


def _quoted_rows(seed: int, n: int, pad: bool = False) -> str:
    """Rows whose fields before the last are quoted more often than not: short and long
    (across the 64-byte steps), with delimiters, newlines and doubled quotes inside,
    empty, and unquoted ones holding a quote mid-field; a few ragged rows. With pad, a
    blank before some opening quotes."""
    rnd = random.Random(seed)
    blank = (lambda: " " if rnd.random() < 0.3 else "") if pad else (lambda: "")
    lines = []
    for i in range(n):
        fields = NCOLS + rnd.choice([0] * 12 + [-1, 1])
        row = []
        for _ in range(fields - 1):
            text = "y" * rnd.choice([0, 1, 3, 5, 12, 30, 31, 32, 33, 61, 62, 63, 64, 65, 70])
            kind = rnd.random()
            if kind < 0.55:
                row.append(f'{blank()}"{text}"')
            elif kind < 0.65:
                cut = rnd.randrange(len(text) + 1)
                row.append(blank() + '"' + text[:cut] + rnd.choice([",", "\n", '""', ",,", '"",']) + text[cut:] + '"')
            elif kind < 0.8 and text:
                row.append(text[:1] + '"' + text[1:])  # a quote inside an unquoted field is text
            elif kind < 0.85 and pad and text:
                row.append(text[:1] + ' "' + text[1:] + ',y"')  # and one after a blank too
            else:
                row.append(text)
        row.append(str(i % 5) if rnd.random() < 0.5 else f'{blank()}"{i % 5}"')
        lines.append(",".join(row))
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("col", [0, NCOLS - 1])
@pytest.mark.parametrize("pad", [False, True])
def test_quoted_fields_around_the_read_column_are_passed_as_the_csv_module_reads_them(
        tmp_path, both_loops, seed, col, pad):
    """The AVX2 loops pass a quoted field in register when it opens at a field's start
    and closes before a delimiter (or the row's newline, after the last read column) in
    the same 64 bytes, and leave every other quote to the careful path: the column read
    before or after such fields is read as the csv module reads it with either loop, and
    the file cut anywhere (inside a quote, too, where the csv module reads on and the
    scanner does not) reads alike with both loops."""
    text = _quoted_rows(seed, 300, pad)
    for cut in range(0, 140, 13):
        body = text[: len(text) - cut]
        for ending in ("", "\n"):
            path = write(tmp_path, f"q{cut}{len(ending)}.csv", body + ending)
            read = []
            for loops in both_loops:
                assert _scanner.simd(loops == "avx2") == loops
                read.append(_scan(path, col, pad))
            assert read == [read[0]] * len(read), (cut, ending)
            if cut == 0:
                assert read[0] == _expected(body, col, pad), ending


def _plain_rows(seed: int, n: int, crlf: bool) -> str:
    """Rows a whole-row read takes and rows it leaves to the careful parser: CRLF or LF
    endings, quoted fields (padded, empty, with a delimiter), NULLs, an integer column
    with now and then a value that is not one, ragged and wide rows, rows past 256 bytes."""
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        ints = rnd.choice([str(i), str(-i), "", " 7", "x1", "1.5", str(i) * 3])
        text = rnd.choice(["", "a", '"b,c"', ' "d"', '""', "y" * rnd.choice([1, 40, 90, 200])])
        row = [str(i % 3), rnd.choice(['"k"', "k", ""]), ints, rnd.choice(["1", '"2"', ""]), text]
        if rnd.random() < 0.05:
            row.append("extra")
        elif rnd.random() < 0.05:
            row.pop()
        lines.append(",".join(row))
    return ("\r\n" if crlf else "\n").join(lines) + ("\r\n" if crlf else "\n")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("skip", [False, True])
def test_rows_read_whole_answer_and_fail_as_the_careful_parser(tmp_path, both_loops, seed, crlf,
                                                               skip):
    """The AVX2 scan reads a plain row whole from its 64-byte steps' masks (fast_row) and
    leaves every other row to the careful parser: the integer and text columns read, the
    rows skipped, and the first error (its kind, offset and column) are those of the
    baseline loops, which never take that path."""
    path = write(tmp_path, f"p{seed}.csv", _plain_rows(seed, 400, crlf))
    dialect = (ord(","), ord('"'), ord('"'), NCOLS, skip, (b"",), -1, False, True)
    seen = []
    for loops in both_loops:
        assert _scanner.simd(loops == "avx2") == loops
        file = _scanner.File(str(path))
        try:
            _end, _seen, rows_out, skipped, error, state = _scanner.scan(
                file, 0, file.size, dialect, ((2, 1), (4, 0)), (), ((1, 0),),
                ((fused.A_COUNT_STAR, -1), (fused.A_SUM, 0), (fused.A_COUNT, 1)), -1)
        finally:
            file.close()
        seen.append((rows_out, skipped, error, state.export()))
    assert seen == [seen[0]] * len(seen)
