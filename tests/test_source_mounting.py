"""A source DuckDB cannot read fails only the statements that read it, naming it; and
``arrowgate sources --check`` reports each source's state on every engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gateway
from gateway.errors import GatewayError
from tests.conftest import QUICKSTART


@pytest.fixture
def config(tmp_path: Path) -> dict:
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all, and no magic bytes")
    (tmp_path / "good.csv").write_text("x\n1\n")
    return {"engines": {"duck": {"type": "duckdb"}},
            "sources": {"broken": {"path": str(tmp_path / "broken.parquet")},
                        "good": {"path": str(tmp_path / "good.csv")}}}


def test_a_source_that_cannot_be_mounted_fails_only_the_statements_that_read_it(config):
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT count(*) AS n FROM range(10)").to_arrow().to_pylist() \
            == [{"n": 10}]
        assert gw.execute("SELECT x FROM good").to_arrow().to_pylist() == [{"x": 1}]
        for sql in ("SELECT * FROM broken", "SELECT count(*) FROM broken"):
            with pytest.raises(GatewayError) as failed:
                gw.execute(sql).to_arrow()
            assert f"cannot mount the source broken ({config['sources']['broken']['path']}): " \
                in failed.value.message
        assert gw.execute("SELECT x + 1 AS y FROM good").to_arrow().to_pylist() == [{"y": 2}]


def test_sources_check_reports_each_source_on_each_engine(cli, config, tmp_path):
    path = tmp_path / "arrowgate.toml"
    path.write_text('[engines.duck]\ntype = "duckdb"\n'
                    f'[sources.broken]\npath = "{config["sources"]["broken"]["path"]}"\n'
                    f'[sources.good]\npath = "{config["sources"]["good"]["path"]}"\n')
    done = cli("--config", str(path), "sources", "--check")
    assert done.code == 1
    lines = done.out.splitlines()
    assert lines[0].split() == ["source", "format", "path", "files", "duck"]
    assert lines[1].startswith("broken") and "error: " in lines[1] \
        and "cannot mount the source broken" in lines[1]
    assert lines[2].startswith("good") and lines[2].endswith("ok")


def test_sources_check_passes_on_the_quickstart(cli):
    done = cli("--config", str(QUICKSTART), "sources", "--check")
    assert done.code == 0, done.err
    assert [line.split()[-2:] for line in done.out.splitlines()[1:]] == [["ok", "ok"]] * 2
