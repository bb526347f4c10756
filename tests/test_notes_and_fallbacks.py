"""What the answer alone does not say reaches the user in every format, and a benchmark never
credits an engine with its fallback's time."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.benchmark.runner import GatewayEngine, run_benchmark
from gateway.output.writers import BINARY_FORMATS, FORMATS
from gateway.sql.corpus import Query
from tests.conftest import QUICKSTART

JOIN = "SELECT z.borough, count(*) AS n FROM trips t JOIN zones z ON t.pickup_zone = z.zone " \
       "GROUP BY 1 ORDER BY 1"


@pytest.fixture
def skipping(tmp_path: Path) -> Path:
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3\n4,5\n")
    config = tmp_path / "arrowgate.toml"
    config.write_text('default_engine = "scan"\n[engines.scan]\ntype = "csv"\n'
                      '[sources.t]\npath = "t.csv"\non_error = "skip"\ndelimiter = ","\n'
                      'header = true\ncolumns = { a = "BIGINT", b = "BIGINT" }\n')
    return config


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in BINARY_FORMATS])
def test_skipped_rows_are_noted_on_stderr_in_every_format(cli, skipping, fmt):
    done = cli("--config", str(skipping), "query", "--format", fmt, "SELECT a, b FROM t")
    assert done.code == 0, done.err
    assert "1 malformed row skipped" in done.err


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in BINARY_FORMATS])
def test_a_fallback_answer_is_noted_on_stderr_in_every_format(cli, fmt):
    done = cli("--config", str(QUICKSTART), "query", "--format", fmt, JOIN)
    assert done.code == 0, done.err
    assert "(fallback: the csv engine does not run JOIN)" in done.err
    assert "fallback" not in done.out


def test_bench_marks_fallback_answers_and_leaves_them_out_of_the_geometric_mean():
    queries = [Query("plain", "SELECT cab_type, count(*) AS n FROM trips GROUP BY 1 ORDER BY 1"),
               Query("joined", JOIN)]
    report = run_benchmark([GatewayEngine("duck", str(QUICKSTART)),
                            GatewayEngine("scan", str(QUICKSTART))], queries,
                           rounds=1, warmup=0)
    assert [q.status for q in report.queries] == ["timed", "timed"]
    assert report.queries[1].answered_by == {"scan": "duck"}
    assert report.queries[0].answered_by == {}
    plain = report.queries[0].ratio("scan", "duck")
    assert report.geomean_ratio("scan") == pytest.approx(plain)
    data = report.to_dict()
    assert data["queries"][1]["answered_by"] == {"scan": "duck"}
    assert data["summary"]["geomean_leaves_out"] == {"scan": ["joined"]}
    text = report.to_markdown()
    assert "(by duck, fallback)" in text
    assert "The geometric mean of scan leaves out `joined`: answered by a fallback engine" in text
