"""Source paths: a file whose name holds glob characters is that file, not a pattern."""

from __future__ import annotations

import pytest

import gateway


@pytest.mark.parametrize("engine", ["csv", "duck"])
def test_a_file_named_with_brackets_is_read_as_that_file(tmp_path, engine):
    """`[avalon]_daily-avg.csv` of DuckDB's corpus: the core took the name for a glob
    (`[avalon]` matching one letter), found no file, and the csv engine refused it."""
    path = tmp_path / "[avalon]_daily.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    config = {"engines": {"csv": {"type": "csv"}, "duck": {"type": "duckdb"}},
              "sources": {"t": {"path": str(path)}}}
    with gateway.connect(config) as gw:
        got = gw.execute("SELECT sum(a) AS s FROM t", engine=engine).to_arrow()
    assert got.column("s").to_pylist() == [4]


def test_a_pattern_with_brackets_still_globs(tmp_path):
    for name in ("x1.csv", "x2.csv", "y1.csv"):
        (tmp_path / name).write_text("a\n1\n")
    config = {"engines": {"csv": {"type": "csv"}},
              "sources": {"t": {"path": str(tmp_path / "[x]?.csv")}}}
    with gateway.connect(config) as gw:
        got = gw.execute("SELECT count(*) AS n FROM t", engine="csv").to_arrow()
    assert got.column("n").to_pylist() == [2]
