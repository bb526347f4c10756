"""The benchmark protocol: answers before timing, rotation, isolation, memory, reports, CLI."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

from gateway.benchmark.runner import Command, Function, GatewayEngine, run_benchmark
from gateway.errors import ConfigError
from gateway.sql.corpus import Query, read_queries, split_statements
from tests.conformance.corpus import DATA

Q1, Q2 = Query("one", "SELECT 1"), Query("two", "SELECT 2")


def logged(name: str, log: str, sql: str) -> pa.Table:
    """A contender's answer: the query's number; each call appends ``name sql`` to ``log``."""
    with open(log, "a") as fh:
        fh.write(f"{name}|{sql}\n")
    return pa.table({"v": [int(sql.split()[-1])]})


def wrong(sql: str) -> pa.Table:
    return pa.table({"v": [int(sql.split()[-1]) + (sql == "SELECT 2")]})


def sleepy(sql: str) -> pa.Table:
    if sql == "SELECT 2":
        time.sleep(30)
    return pa.table({"v": [int(sql.split()[-1])]})


def hungry(sql: str) -> pa.Table:
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page
    return pa.table({"v": [int(sql.split()[-1])]})


def contender(name: str, log: Path) -> Function:
    return Function(name, functools.partial(logged, name, str(log)))


def test_answers_checked_before_timing_then_rotated_rounds(tmp_path):
    log = tmp_path / "calls.log"
    engines = [contender(n, log) for n in ("a", "b", "c")]
    report = run_benchmark(engines, [Q1, Q2], rounds=3, warmup=1)
    calls = log.read_text().splitlines()
    # answers first: every engine answers every query once before any timed run
    assert calls[:6] == ["a|SELECT 1", "b|SELECT 1", "c|SELECT 1",
                         "a|SELECT 2", "b|SELECT 2", "c|SELECT 2"]
    timed = [c.split("|")[0] for c in calls[6:]]
    assert len(timed) == 2 * 4 * 3  # 2 queries x (1 warm-up + 3 rounds) x 3 engines
    rounds = [timed[i:i + 3] for i in range(0, len(timed), 3)]
    assert rounds[:4] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(len(t.seconds) == 3 for q in report.queries for t in q.timings.values())
    assert [q.status for q in report.queries] == ["timed", "timed"]


def test_a_query_whose_answers_differ_gets_no_speed_figure(tmp_path):
    report = run_benchmark([contender("a", tmp_path / "log"), Function("bad", wrong)],
                           [Q1, Q2], rounds=1)
    statuses = {q.query.name: q.status for q in report.queries}
    assert statuses == {"one": "timed", "two": "diverged"}
    two = report.queries[1]
    assert two.timings == {} and two.verdicts["bad"].category == "values"
    md = report.to_markdown()
    assert "Answers differ, so no speed figure" in md and "`two` on bad: **values**" in md
    assert "| `two` |" not in md


def test_a_run_over_the_timeout_is_killed_and_the_rest_goes_on(tmp_path):
    report = run_benchmark([Function("slow", sleepy), contender("a", tmp_path / "log")],
                           [Q2, Q1], rounds=1, timeout=8)  # a worker's start can take
    # seconds on a loaded machine: 2 s timed out the quick query too (under load 25)
    two, one = report.queries
    assert "QueryTimeout" in two.errors["slow"]
    assert two.status == "diverged" and two.verdicts["a"].category == "error"
    assert two.timings == {}
    assert one.status == "timed" and set(one.timings) == {"slow", "a"}


def test_peak_memory_is_per_engine_process(tmp_path):
    report = run_benchmark([contender("lean", tmp_path / "log"), Function("hungry", hungry)],
                           [Q1], rounds=2)
    timings = report.queries[0].timings
    assert timings["hungry"].peak_rss - timings["lean"].peak_rss > 250 * 2**20


def test_reports_json_markdown_and_chart(tmp_path):
    report = run_benchmark([contender("a", tmp_path / "log"), contender("b", tmp_path / "log")],
                           [Q1, Q2], rounds=2, baseline="b")
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    q = data["queries"][0]
    assert q["status"] == "timed" and q["ratios"]["b"] == 1.0
    assert set(q["timings"]["a"]) >= {"median_ms", "min_ms", "max_ms", "rounds_ms", "peak_rss_mb"}
    assert data["method"]["rounds"] == 2 and data["baseline"] == "b"
    md = report.to_markdown()
    assert "| query | a ms (min-max) | b ms (min-max) | a / b |" in md
    assert "**geometric mean**" in md
    paths = report.write_chart(tmp_path / "chart")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths[1].read_text()[:500]


def test_gateway_engines_and_a_command_agree_and_are_timed(tmp_path):
    import shutil

    config = {"engines": {"duck": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    contenders = [GatewayEngine("duck", config)]
    duckdb_cli = shutil.which("duckdb")
    if duckdb_cli:  # the DuckDB CLI (duckdb-cli, in the dev extra) as a stdin/CSV command
        contenders.append(Command("cli", [duckdb_cli, "-csv"],
                                  setup=f"CREATE VIEW trips AS FROM '{DATA / 'trips.csv'}';"))
    queries = [Query("groups", "SELECT cab_type, count(*) AS n FROM trips GROUP BY cab_type")]
    report = run_benchmark(contenders, queries, rounds=1)
    assert report.queries[0].status == "timed", report.to_markdown()
    assert "duckdb" in report.descriptions["duck"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="differ"):
        run_benchmark([Function("a", wrong), Function("a", wrong)], [Q1])
    with pytest.raises(ValueError, match="baseline"):
        run_benchmark([Function("a", wrong)], [Q1], baseline="z")


def test_corpus_reading(tmp_path):
    assert split_statements("SELECT ';' AS s; -- a; comment\nSELECT 2;") == [
        "SELECT ';' AS s", "-- a; comment\nSELECT 2"]
    (tmp_path / "one.sql").write_text("SELECT 1;")
    (tmp_path / "many.sql").write_text("-- header; words\nSELECT 1;\n-- name: second\nSELECT 2;")
    names = [q.name for q in read_queries([tmp_path])]
    assert names == ["many:1", "second", "one"]
    (tmp_path / "empty.sql").write_text("-- only a comment;\n")
    with pytest.raises(ConfigError, match="no SQL statement"):
        read_queries([tmp_path / "empty.sql"])
    (tmp_path / "twice.sql").write_text("-- name: second\nSELECT 3;")
    with pytest.raises(ConfigError, match="used twice"):
        read_queries([tmp_path])


def test_bench_cli(cli, tmp_path):
    (tmp_path / "arrowgate.toml").write_text(
        f'[engines.a]\ntype = "duckdb"\n[engines.b]\ntype = "duckdb"\n'
        f'settings = {{ threads = 1 }}\n[sources.trips]\npath = "{DATA / "trips.csv"}"\n')
    (tmp_path / "q.sql").write_text(
        "-- name: n\nSELECT count(*) AS n FROM trips;\n"
        "-- name: threads\nSELECT current_setting('threads') AS t;\n")
    r = cli("bench", "--engines", "a,b", "--rounds", "1", "--json", "b.json", "--chart", "c",
            "q.sql")
    assert r.code == 1  # the threads query differs
    assert "| `n` |" in r.out and "`threads` on b: **values**" in r.out
    data = json.loads((tmp_path / "b.json").read_text())
    assert [q["status"] for q in data["queries"]] == ["timed", "diverged"]
    assert (tmp_path / "c.png").exists() and (tmp_path / "c.svg").exists()
    assert cli("bench", "--engines", "a,zz", "q.sql").code == 2
    assert cli("bench", "--engines", "a,b", "--baseline", "c", "q.sql").code == 2


def test_progress_bar_draws_on_a_terminal_only(monkeypatch):
    import io

    from gateway.cli.commands.bench import ProgressBar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    bar = ProgressBar(True, width=10)
    bar(5, 10, "q1: round 1 a")
    assert "[#####.....] 5/10" in term.getvalue() and "q1: round 1 a" in term.getvalue()
    bar.close()
    assert term.getvalue().endswith("\r")
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    ProgressBar(True)(1, 2, "x")
    assert pipe.getvalue() == ""


def test_a_shadow_section_does_not_shadow_benchmark_runs(tmp_path):
    slow = {"type": "planted", "delay": 2.0}
    config = {"engines": {"fast": {"type": "duckdb"}, "slow": slow},
              "shadow": {"reference": "slow", "primary": "fast", "store": False}}
    report = run_benchmark([GatewayEngine("fast", config, plugins=["tests.planted_bugs"])],
                           [Q1], rounds=1, warmup=0)
    assert report.queries[0].timings["fast"].median < 1.0


def test_every_benchmark_rotates_and_summarises_alike():
    from gateway.benchmark.runner import Spread, rotated

    assert [rotated(["a", "b", "c"], r) for r in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    s = Spread([3.0, 1.0, 2.0])
    assert (s.median, s.low, s.high) == (2.0, 1.0, 3.0)
    assert s.ratio(Spread([1.0])) == 2.0 and s.ratio(None) is None and s.ratio(Spread([0.0])) is None


def test_a_bench_contenders_repr_leaves_out_its_uri():
    from gateway.benchmark.contenders import AdbcDriver

    assert "hunter2" not in repr(AdbcDriver("pg", "postgresql", "postgresql://u:hunter2@h/db"))


def test_bench_with_no_arguments_runs_the_quickstart(cli):
    # from an empty folder: the quickstart's queries on its configuration's engines
    r = cli("bench", "--rounds", "1", "--warmup", "0", "--no-progress")
    assert r.code == 0, r.err
    assert "the quickstart's queries" in r.err and "its own configuration" in r.err
    assert "trips_per_cab" in r.out
    assert "scan" in r.out and "duck" in r.out


def test_bench_without_engines_takes_the_configurations(cli, tmp_path):
    (tmp_path / "arrowgate.toml").write_text(
        '[engines.one]\ntype = "duckdb"\n[engines.two]\ntype = "duckdb"\n')
    (tmp_path / "q.sql").write_text("SELECT 42 AS answer;")
    r = cli("bench", "--rounds", "1", "--warmup", "0", "--no-progress", "q.sql")
    assert r.code == 0, r.err
    assert "one" in r.out and "two" in r.out
