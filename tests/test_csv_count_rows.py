"""count(*) through the scanner's row counter (plugins/gateway_csv/_rows.h), 64 bytes a step.

The counter on its own, compiled alone (plain C, SSE2 and AVX2 masks alike; and for
Windows with MinGW): where it stops and how many rows it vouches for. Then the csv
engine's count(*) against DuckDB's over files that put each case the counter must
leave to the careful parser at every offset of a 64-byte block: a row ending on a
block's last byte, a quoted field (with delimiters, newlines and doubled quotes)
crossing into the next block, a ragged row among clean ones, \\r\\n split across two
blocks, blank and comment lines, escapes, padded quotes, a missing last newline,
files shorter than a block.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway.errors import Unsupported
from tests.csv_support import assert_same, gateway_for, write

HEADER_DIR = Path(__file__).resolve().parents[1] / "plugins" / "gateway_csv"

#: argv: file, delimiter, quote, escape, comment, pad, ncols (characters as numbers, -1
#: for none); prints, per mask builder, the rows counted and the offset it stopped at
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "_rows.h"

int main(int argc, char **argv) {
    if (argc != 8) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static char data[1 << 16];
    size_t n = fread(data, 1, sizeof data, f);
    fclose(f);
    RowsDialect dl = {(char)atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]),
                      atoi(argv[7])};
    printf("ok %d\n", rows_dialect_ok(&dl));
    for (int simd = 0; simd <= 2; simd++) {
        int64_t rows = -1;
        const char *stop = rows_count(&dl, data, data + n, data + n, simd, &rows);
        printf("%lld %lld\n", (long long)rows, (long long)(stop - data));
    }
    return 0;
}
"""


def _build(tmp_path: Path, compiler: str, out: str, *flags: str) -> Path:
    source = tmp_path / "rows_check.c"
    source.write_text(PROGRAM)
    exe = tmp_path / out
    subprocess.run([compiler, "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-O2",
                    *flags, f"-I{HEADER_DIR}", str(source), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    return exe


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    return _build(tmp_path_factory.mktemp("rows"), compiler, "rows_check")


def _count(exe: Path, tmp_path: Path, data: bytes, *, delim: str = ",", quote: str = '"',
           escape: str = '"', comment: str = "", pad: bool = False, ncols: int = 3) \
        -> tuple[int, int]:
    """(rows counted, offset stopped at), the same from every mask builder."""
    path = tmp_path / "data.csv"
    path.write_bytes(data)
    args = [str(ord(c)) if c else "-1" for c in (delim, quote, escape, comment)]
    out = subprocess.run([str(exe), str(path), *args, str(int(pad)), str(ncols)],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "ok 1"
    answers = {tuple(int(x) for x in line.split()) for line in out[1:4]}
    assert len(answers) == 1, out  # plain C, SSE2 and AVX2 agree
    return answers.pop()


def test_clean_rows_are_counted_up_to_the_last_whole_block(counter, tmp_path):
    row = b"1,22,333\n"
    data = row * 100
    rows, stop = _count(counter, tmp_path, data)
    # the rows that end in the whole blocks; the rest (less than a block) is the careful parser's
    blocks = len(data) // 64 * 64
    assert stop == rows * len(row) and blocks - len(row) < stop <= blocks


@pytest.mark.parametrize("width", [61, 62, 63, 64, 65, 127, 128, 129])
def test_rows_ending_at_and_around_a_block_edge(counter, tmp_path, width):
    row = b"1,2," + b"x" * (width - 5) + b"\n"
    assert len(row) == width
    rows, stop = _count(counter, tmp_path, row * 40)
    assert rows >= 40 - 1 - 64 // width - 1 and stop == rows * width


def test_a_quoted_field_crossing_blocks_is_one_field(counter, tmp_path):
    quoted = b'"a,b\nc""d,\n' + b"y" * 70 + b'"'
    data = b"".join(b"%d,%s,z\n" % (i, quoted) for i in range(30))
    rows, stop = _count(counter, tmp_path, data)
    assert rows >= 28 and stop == data.index(b"\n%d," % rows) + 1


@pytest.mark.parametrize(("bad", "why"), [
    (b"1,2\n", "too few fields"),
    (b"1,2,3,4\n", "too many fields"),
    (b"\n", "a blank line"),
    (b"\r\n", "a blank CRLF line"),
    (b'1,a"b,3\n', "a quote inside an unquoted field"),
    (b'1,"a"b,3\n', "text after a closing quote"),
    (b'1,"a" ,3\n', "a blank after a closing quote, unpadded"),
    (b'1, "a",3\n', "a blank before an opening quote, unpadded"),
    (b'1,"a"\r3,3\n', "a lone CR after a closing quote"),
])
@pytest.mark.parametrize("at", [0, 1, 5, 6, 7, 13])
def test_it_stops_at_the_row_it_cannot_vouch_for(counter, tmp_path, bad, why, at):
    row = b"1,22,333\n"  # 9 bytes: the odd row falls at every offset of a block
    data = row * at + bad + row * 30
    assert _count(counter, tmp_path, data) == (at, at * len(row)), why


def test_padded_quotes_and_crlf(counter, tmp_path):
    rows = b'1, "a,b"  ,3\r\n "x",2, "y"\r\n' * 20
    assert _count(counter, tmp_path, rows, pad=True)[1] >= len(rows) - 64 - 30
    # the same bytes unpadded: a blank beside a quote is text, left to the careful parser
    assert _count(counter, tmp_path, rows) == (0, 0)


def test_escapes_comments_and_no_quote(counter, tmp_path):
    plain = b'1,"a\\"b",3\n'
    data = plain * 3 + b'1,"a\\"b",3\n' + plain * 20
    # a backslash escape inside quotes: the careful parser's
    assert _count(counter, tmp_path, data, escape="\\") == (0, 0)
    assert _count(counter, tmp_path, b"1,2,3\n" * 3 + b"#,2,3\n" + b"1,2,3\n" * 20,
                  comment="#") == (3, 18)
    # no quote character: a quote is text like any other
    rows = b'1,"a,3"\n' * 30
    assert _count(counter, tmp_path, rows, quote="", escape="", ncols=3)[0] > 20
    assert _count(counter, tmp_path, rows, ncols=3) == (0, 0)  # quoted: two fields


def test_a_file_shorter_than_a_block_is_left_whole(counter, tmp_path):
    for data in (b"", b"1,2,3", b"1,2,3\n" * 10):
        assert _count(counter, tmp_path, data) == (0, 0)


@pytest.mark.mingw  # skipped, saying why, where dev.py cannot install the cross-compiler
def test_the_counter_compiles_for_windows(tmp_path):
    compiler = shutil.which("x86_64-w64-mingw32-gcc")
    assert compiler is not None
    exe = _build(tmp_path, compiler, "rows_check.exe")
    assert exe.read_bytes()[:2] == b"MZ"


# ------------------------------------------------------- the engine against DuckDB

ROW = "1,22,333"  # 8 bytes and a newline


def _edge_files() -> dict[str, str]:
    """Name -> content: each case at several offsets of the 64-byte blocks."""
    files: dict[str, str] = {}
    for width in (62, 63, 64, 65, 66):
        files[f"rows_of_{width}"] = "a,b,c\n" + ("1,2," + "x" * (width - 5) + "\n") * 50
    for lead in range(0, 70, 7):
        pad = "a,b,c\n" + (ROW + "\n") * (lead // 9) + "9," + "y" * (lead % 9) + ",0\n"
        files[f"quote_across_{lead}"] = pad + ('7,"a,b\nc""d,' + "q" * 60 + '",8\n') * 9 \
            + (ROW + "\n") * 20
        files[f"crlf_across_{lead}"] = pad.replace("\n", "\r\n") + (ROW + "\r\n") * 30
        files[f"missing_newline_{lead}"] = pad + (ROW + "\n") * 20 + "5,6,7"
        files[f"blank_lines_{lead}"] = pad + (ROW + "\n") * 10 + "\n\n" + (ROW + "\n") * 10
        files[f"comment_lines_{lead}"] = "# made by hand\n" + pad + (ROW + "\n") * 10 \
            + "# a note\n" + (ROW + "\n") * 10
    files["short"] = "a,b,c\n1,2,3\n"
    files["short_no_newline"] = "a,b,c\n1,2,3"
    files["header_only"] = "a,b,c\n"
    files["padded"] = "a,b,c\n" + '1, "x,y"  ,3\n' * 40 + '2,"z", 4\n' * 40
    files["escaped"] = "a,b,c\n" + '1,"x\\"y",3\n' * 40
    return files


@pytest.mark.parametrize("name", sorted(_edge_files()))
def test_count_star_is_duckdbs_at_block_edges(tmp_path, name):
    path = write(tmp_path, f"{name}.csv", _edge_files()[name])
    for chunk_bytes in (1 << 20, 200):
        with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
            assert_same(gw, "SELECT count(*) AS n FROM t")


@pytest.mark.parametrize("lead", [0, 3, 9, 60, 63, 64, 65])
@pytest.mark.parametrize("bad", ["1,2", "1,2,3,4", "1,2,3,", '1,a"b,3', '1,"a"b,3', "",
                                 '1, "a",3'])
def test_an_odd_row_inside_a_clean_block_is_refused_skipped_or_read_as_before(tmp_path, lead,
                                                                               bad):
    """A row the counter leaves to the careful parser, between rows it takes in one step,
    past the sniffer's sample (which would otherwise have seen it): a ragged row is
    refused (the statement is DuckDB's, through the fallback) and with on_error = "skip"
    skipped as DuckDB's ignore_errors skips it; a row ending in one delimiter more is
    refused either way; the rest are read as DuckDB reads them."""
    text = "a,b,c\n" + (ROW + "\n") * 21_000 + "1," + "x" * lead + ",3\n" + (ROW + "\n") * 5 \
        + bad + "\n" + (ROW + "\n") * 30
    path = write(tmp_path, "odd.csv", text)
    for on_error in ("error", "skip"):
        with gateway_for(path, on_error=on_error) as gw:
            if bad == "1,2,3," or (on_error == "error" and bad in ("1,2", "1,2,3,4")):
                with pytest.raises(Unsupported):
                    gw.execute("SELECT count(*) AS n FROM t", engine="csv").to_arrow()
            else:
                assert_same(gw, "SELECT count(*) AS n FROM t")


def _random_csv(rnd: random.Random) -> str:
    fields = ["", "x", "y" * 30, "z" * 70, '"a,b"', '"c\nd"', '"e""f"', '""', '"' + "g" * 63 + '"']
    lines = ["a,b,c"]
    for _ in range(rnd.randrange(1, 120)):
        lines.append(",".join([str(rnd.randrange(100))] +
                              [rnd.choice(fields) for _ in range(2)]))
        if rnd.random() < 0.03:
            lines.append("")
    end = rnd.choice(["\n", "\r\n"])
    return end.join(lines) + rnd.choice(["", end])


@pytest.mark.parametrize("seed", range(12))
def test_count_star_is_duckdbs_on_random_quoted_files(tmp_path, seed):
    path = write(tmp_path, f"r{seed}.csv", _random_csv(random.Random(seed)))
    with gateway_for(path, chunk_bytes=300) as gw:
        assert_same(gw, "SELECT count(*) AS n FROM t")
