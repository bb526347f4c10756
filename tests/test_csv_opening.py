"""Files the scanner cannot map as they are: compressed, another encoding, lone-CR line ends."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gateway.errors import ConfigError, QueryError
from gateway_csv.opening import open_csv
from tests.csv_support import assert_same, gateway_for, write

TABLE = "id,name,day\n1,é,2024-01-02\n2,b,2024-02-03\n3,,2024-03-04\n"


def compressed(tmp_path, name, compression, content=TABLE):
    path = tmp_path / name
    with pa.output_stream(str(path), compression=compression) as out:
        out.write(content.encode())
    return path


@pytest.mark.parametrize(("name", "compression"), [("t.csv.gz", "gzip"), ("t.csv.zst", "zstd")])
def test_compressed_files_are_read_like_duckdb(tmp_path, name, compression):
    path = compressed(tmp_path, name, compression)
    with gateway_for(path, format="csv") as gw:
        got = assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT count(*) AS n, max(day) AS d FROM t")
    assert got.num_rows == 3


def test_compression_is_found_by_its_magic_bytes_whatever_the_name(tmp_path):
    # DuckDB goes by the extension and refuses this file; the csv engine reads it
    path = compressed(tmp_path, "t.bin", "gzip")
    with gateway_for(path, format="csv") as gw:
        table = gw.execute("SELECT * FROM t", engine="csv").to_arrow()
    assert table.column("name").to_pylist() == ["é", "b", None]


def test_rows_ending_in_a_lone_cr_are_rows(tmp_path):
    path = write(tmp_path, "cr.csv", "a,b\r1,2\r3,4\r")
    with gateway_for(path) as gw:
        table = gw.execute("SELECT * FROM t", engine="csv").to_arrow()
        assert table.column("a").to_pylist() == [1, 3]
        assert_same(gw, "SELECT * FROM t")


def test_lone_crs_in_a_file_whose_rows_end_in_crlf_are_refused_as_by_duckdb(tmp_path):
    """DuckDB takes the line end from the first row (CRLF here) and refuses the file in
    its sniffer; the csv engine used to rewrite every lone CR into a row end."""
    path = write(tmp_path, "cr.csv", "a,b\r\n1,2\r3,4\n5,6\r\n7,8\r")
    with gateway_for(path) as gw:
        for engine in ("csv", "duck"):
            with pytest.raises(QueryError):
                gw.execute("SELECT * FROM t", engine=engine)


def test_another_encoding_is_transcoded(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(TABLE.encode("latin-1"))
    file = open_csv(str(path), {"encoding": "latin-1"})
    try:
        assert file.pread(0, file.size).decode("utf-8") == TABLE
    finally:
        file.close()


def test_an_unknown_encoding_or_compression_is_refused_by_name(tmp_path):
    path = write(tmp_path, "t.csv", TABLE)
    with pytest.raises(ConfigError, match="no text encoding is named 'klingon'"):
        open_csv(str(path), {"encoding": "klingon"})
    with pytest.raises(ConfigError, match="cannot read 'lzma' compression"):
        open_csv(str(path), {"compression": "lzma"})


def test_text_in_the_wrong_encoding_is_a_clear_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a\n\xff\xfe\n")
    with pytest.raises(QueryError, match="the file is not ascii text"):
        open_csv(str(path), {"encoding": "ascii"})


def test_a_broken_compressed_file_is_a_clear_error(tmp_path):
    path = compressed(tmp_path, "t.csv.gz", "gzip")
    path.write_bytes(path.read_bytes()[:20])
    with gateway_for(path) as gw, pytest.raises(QueryError, match="does not decompress"):
        gw.execute("SELECT * FROM t", engine="csv").to_arrow()


def test_more_than_64_columns(tmp_path):
    header = ",".join(f"c{i}" for i in range(300))
    rows = "\n".join(",".join(str(r * i) for i in range(300)) for r in range(5))
    path = write(tmp_path, "wide.csv", header + "\n" + rows + "\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")
