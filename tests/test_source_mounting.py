"""A source DuckDB cannot read fails only the statements that read it, naming it; and
``arrowgate sources --check`` reports each source's state on every engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gateway
from gateway.errors import GatewayError
from tests.conftest import QUICKSTART
from tests.hang_guard import HANG_GUARD


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
        # a column named: the stand-in view has none of the file's columns, and the
        # binder's "column a not found" would hide why the source cannot be read
        for sql in ("SELECT * FROM broken", "SELECT count(*) FROM broken",
                    "SELECT a, sum(b) FROM broken GROUP BY a",
                    "SELECT g.x FROM good AS g JOIN broken AS b ON g.x = b.id"):
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


# -- mounted when a statement first names it ----------------------------------------------
def test_starting_an_engine_reads_no_source_so_one_written_later_is_read(tmp_path):
    late = tmp_path / "late_1.csv"
    config = {"engines": {"duck": {"type": "duckdb"}},
              "sources": {"late": {"path": str(tmp_path / "late_*.csv"), "format": "csv"}}}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT 1 AS x").to_arrow().to_pylist() == [{"x": 1}]  # started
        late.write_text("a\n7\n")
        assert gw.execute("SELECT a FROM late").to_arrow().to_pylist() == [{"a": 7}]


def test_a_source_repaired_after_a_failure_is_mounted_by_the_next_statement(config, tmp_path):
    with gateway.connect(config) as gw:
        with pytest.raises(GatewayError, match="cannot mount the source broken"):
            gw.execute("SELECT * FROM broken").to_arrow()
        gw.execute(f"COPY (SELECT 5 AS v) TO '{tmp_path / 'broken.parquet'}' (FORMAT parquet)",
                   engine="duck").to_arrow()
        assert gw.execute("SELECT v FROM broken").to_arrow().to_pylist() == [{"v": 5}]


def test_the_catalog_lists_every_source_before_any_statement_names_it(config):
    with gateway.connect(config) as gw:
        tables = {t.table for t in gw.engine("duck").tables()}
        assert {"broken", "good"} <= tables
        with pytest.raises(GatewayError, match="cannot mount the source broken"):
            gw.execute("SELECT * FROM broken").to_arrow()


def test_a_transaction_sees_the_sources_it_did_not_name_at_its_start(config):
    with gateway.connect(config) as gw, gw.session("duck") as session:
        session.execute("BEGIN").to_arrow()
        assert session.execute("SELECT x FROM good").to_arrow().to_pylist() == [{"x": 1}]
        session.execute("COMMIT").to_arrow()


def test_sources_are_mounted_on_every_engine_a_fallback_or_a_shadow_reaches(tmp_path):
    (tmp_path / "t.csv").write_text("a\n1\n2\n")
    config = {"engines": {"csv": {"type": "csv", "fallback": "duck"}, "duck": {"type": "duckdb"}},
              "sources": {"t": {"path": str(tmp_path / "t.csv")}}}
    with gateway.connect(config) as gw:
        # a window function: the csv engine hands it to duck, which has mounted nothing yet
        answer = gw.execute("SELECT a, row_number() OVER (ORDER BY a) AS r FROM t ORDER BY a",
                            engine="csv")
        assert answer.to_arrow().to_pylist() == [{"a": 1, "r": 1}, {"a": 2, "r": 2}]
        shadowed = gw.execute("SELECT sum(a) AS s FROM t", engine="csv", shadow="duck")
        assert shadowed.to_arrow().to_pylist() == [{"s": 3}]
        assert shadowed.shadow.wait(HANG_GUARD) and shadowed.shadow.category == "match"
