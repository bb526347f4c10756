"""``arrowgate lakebench``: end to end at --tables 10, and the report's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.errors import QueryError
from gateway_ducklake.bench import BenchReport, RoundResult, fresh_lake, run_round
from gateway_ducklake.phases import PHASE_NAMES, Shape, _evolution_plan
from tests.lakes import pg_lake, sqlite_lake


def write_config(path, sections: dict[str, dict]) -> str:
    lines = []
    for name, section in sections.items():
        lines.append(f"[engines.{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.postgres
def test_lakebench_runs_end_to_end(postgres, tmp_path, cli):
    config = write_config(tmp_path / "arrowgate.toml", {
        "pg": pg_lake(postgres, tmp_path), "lite": sqlite_lake(tmp_path)})
    out_json, out_md = tmp_path / "run.json", tmp_path / "run.md"
    run = cli("--config", config, "lakebench", "--tables", "10", "--schemas", "2", "--columns", "8",
              "--schema-changes", "6", "--commits", "6", "--rows", "50",
              "--rounds", "1", "--warmup", "0", "--workdir", str(tmp_path / "work"),
              "--json", str(out_json), "--markdown", str(out_md))
    assert run.code == 0, run.err
    assert "create schemas and tables" in run.out and "lite/pg" in run.out
    report = json.loads(out_json.read_text())
    assert report["engines"] == ["pg", "lite"]
    assert report["catalogs"] == {"pg": "postgres", "lite": "sqlite"}
    assert report["diverged"] == {}
    for phase in [*PHASE_NAMES, "total"]:
        for engine in ("pg", "lite"):
            figures = report["phases"][phase][engine]
            assert figures["median"] > 0, (phase, engine)
        assert report["phases"][phase]["pg"]["ratio"] == 1.0
    checks = report["runs"][0]["checks"]
    assert checks["create_tables"] == 10
    assert checks["second_insert"] == 51  # the probe table: 1 inlined row + 50 in Parquet
    assert checks["many_commits"] == 3 * 51 + 6 * 20  # the 3 deep tables, then 6 commits of 20
    assert checks["schema_changes"][0] == 6
    assert all(r["peak_rss_mb"] > 0 for r in report["runs"])
    assert all(r["load_average"] >= 0 for r in report["runs"])
    low, high = report["load_average"]
    assert 0 <= low <= high
    assert "load average" in run.err and "peak RSS" in run.err
    assert out_md.read_text().startswith("| phase |")
    # every run used a fresh metadata schema, dropped afterwards
    assert postgres.psql("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'lakebench_%'",
                         dbname=report_db(config)) == "0"


def report_db(config: str) -> str:
    text = Path(config).read_text()
    return text.split("dbname=")[1].split()[0]


def test_lakebench_refuses_engines_that_are_not_lakes(tmp_path, cli):
    config = write_config(tmp_path / "arrowgate.toml", {"plain": {"type": "duckdb"}})
    run = cli("--config", config, "lakebench", "--tables", "2")
    assert run.code == 2 and "no ducklake engine" in run.err
    run = cli("--config", config, "lakebench", "plain")
    assert run.code == 2 and "not ducklake" in run.err
    run = cli("--config", config, "lakebench", "--tables", "0")
    assert run.code == 2 and "--tables must be at least 1" in run.err


def test_fresh_lakes_never_reuse_a_catalog(tmp_path):
    pg = {"type": "ducklake", "catalog": "postgres:dbname=l host=h"}
    lite = {"type": "ducklake", "catalog": "sqlite:/x/c.sqlite", "data_path": "/x/d/"}
    a, _ = fresh_lake("pg", pg, tmp_path, "1_a")
    b, _ = fresh_lake("pg", pg, tmp_path, "1_b")
    assert a["metadata_schema"] != b["metadata_schema"] and a["catalog"] == pg["catalog"]
    c, _ = fresh_lake("lite", lite, tmp_path, "2_a")
    assert c["catalog"] == f"sqlite:{tmp_path}/lite-2_a.sqlite"
    assert c["data_path"].startswith(str(tmp_path)) and "metadata_schema" not in c


def test_evolution_plan_makes_exactly_the_changes_asked_for():
    plan = _evolution_plan(100)
    alters = [s for s in plan if s.startswith("ALTER")]
    assert len(alters) == 100
    assert {s.split()[3] for s in alters} == {"ADD", "DROP", "RENAME"}


def fake_round(engine: str, r: int, seconds: float, check: int = 10) -> RoundResult:
    return RoundResult(engine, r, {name: seconds for name in PHASE_NAMES},
                       {name: check for name in PHASE_NAMES}, 100.0)


def test_report_medians_ranges_ratios_and_warmup():
    report = BenchReport(["a", "b"], {"a": "postgres", "b": "sqlite"}, Shape(tables=10), 3, 1)
    report.results += [fake_round("a", 0, 99.0), fake_round("b", 0, 99.0)]  # warm-up
    for r, (ta, tb) in enumerate([(1.0, 3.0), (2.0, 4.0), (3.0, 8.0)], start=1):
        report.results += [fake_round("a", r, ta), fake_round("b", r, tb)]
    s = report.summary("b", "create_tables")
    assert s is not None and (s.median, s.low, s.high) == (4.0, 3.0, 8.0)
    data = report.to_dict()
    assert data["phases"]["create_tables"]["b"]["ratio"] == 2.0
    assert data["phases"]["total"]["a"]["median"] == 2.0 * len(PHASE_NAMES)


def test_a_phase_whose_answers_differ_gets_no_figure():
    report = BenchReport(["a", "b"], {"a": "postgres", "b": "sqlite"}, Shape(tables=10), 1, 0)
    report.results += [fake_round("a", 0, 1.0), fake_round("b", 0, 1.0, check=11)]
    assert set(report.diverged()) == set(PHASE_NAMES)
    assert report.summary("b", "flush_inlined") is None and report.total("b") is None
    _, body = report.table()
    assert body[0][2] == "diverged"


def test_a_failed_round_reports_the_workers_error(tmp_path):
    # a catalog server that refuses connections: the engine cannot start in the worker
    section = {"type": "ducklake", "catalog": "postgres:host=127.0.0.1 port=1 dbname=none",
               "data_path": f"{tmp_path}/data/"}
    with pytest.raises(QueryError, match=r"lakebench on pg failed: .+"):
        run_round("pg", section, Shape(tables=1, schemas=1, columns=1, rows=1,
                                       commits=0, schema_changes=0))
