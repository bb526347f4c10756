"""``arrowgate shadow``, ``shadow report`` and ``query --shadow``: exit codes and validated reports."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from tests.conformance.corpus import DATA

FIXTURES = Path(__file__).parent / "fixtures" / "shadow"
CONFIG = f"""
default_engine = "duck"
[engines.duck]
type = "duckdb"
settings = {{ threads = 2 }}
[engines.duck1]
type = "duckdb"
settings = {{ threads = 1, preserve_insertion_order = false }}
[sources.trips]
path = "{DATA / 'trips.csv'}"
"""
AGREE = """-- Queries both engines answer alike.
-- name: count
SELECT count(*) AS n FROM trips;
-- name: top_zones
SELECT pickup_zone, count(*) AS n FROM trips GROUP BY 1 ORDER BY n DESC, pickup_zone LIMIT 3;
"""
#: threads differ between the two engines: a real divergence, no mock
DIVERGE = "-- name: threads\nSELECT current_setting('threads') AS t;\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "arrowgate.toml").write_text(CONFIG)
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "agree.sql").write_text(AGREE)
    return tmp_path


def validate(tmp_path, json_name="r.json", junit_name="r.xml"):
    report = json.loads((tmp_path / json_name).read_text())
    jsonschema.validate(report, json.loads((FIXTURES / "report.schema.json").read_text()))
    xmlschema.XMLSchema(str(FIXTURES / "junit.xsd")).validate(str(tmp_path / junit_name))
    return report


def test_agreeing_corpus_exits_0_with_valid_reports(cli, project):
    r = cli("shadow", "--primary", "duck", "--reference", "duck1", "--json", "r.json",
            "--junit", "r.xml", "--markdown", "r.md", "q")
    assert r.code == 0, r.err
    assert "2 queries, duck vs duck1: 2 match. OK" in r.out
    report = validate(project)
    assert [q["name"] for q in report["queries"]] == ["count", "top_zones"]
    assert all(q["category"] == "match" and q["ratio"] > 0 for q in report["queries"])
    assert report["queries"][0]["ratio"] == pytest.approx(
        report["queries"][0]["primary_ms"] / report["queries"][0]["reference_ms"], rel=0.01)
    assert (project / "r.md").read_text().startswith("### ✅ Shadow: `duck` vs `duck1`")
    assert len(list((project / ".arrowgate" / "shadow").glob("*.parquet"))) == 1


def test_divergence_exits_1_and_is_reported_everywhere(cli, project):
    (project / "q" / "diverge.sql").write_text(DIVERGE)
    r = cli("shadow", "--reference", "duck1", "--json", "r.json", "--junit", "r.xml",
            "--markdown", "r.md", "q")
    assert r.code == 1
    assert "FAIL  threads  values" in r.out
    report = validate(project)
    bad = [q for q in report["queries"] if q["failed"]]
    assert [(q["name"], q["category"]) for q in bad] == [("threads", "values")]
    assert bad[0]["evidence"]["differences"][0]["primary"] == 2
    xml = (project / "r.xml").read_text()
    assert 'failures="1"' in xml and 'type="values"' in xml
    assert "**values**" in (project / "r.md").read_text()


def test_max_ratio(cli, project):
    assert cli("shadow", "--reference", "duck1", "--max-ratio", "1000", "q").code == 0
    r = cli("shadow", "--reference", "duck1", "--max-ratio", "0.0001", "--json", "r.json",
            "--junit", "r.xml", "q")
    assert r.code == 1 and "over --max-ratio" in r.out
    report = validate(project)
    assert report["summary"]["over_max_ratio"] == 2
    assert 'type="latency"' in (project / "r.xml").read_text()
    # queries faster than --min-ms on both engines are not gated on their ratio
    assert cli("shadow", "--reference", "duck1", "--max-ratio", "0.0001", "--min-ms", "60000",
               "q").code == 0


def test_reference_from_the_config_section_and_writes_skipped(cli, project):
    with (project / "arrowgate.toml").open("a") as fh:
        fh.write('[shadow]\nreference = "duck1"\nstore = "records"\n')
    (project / "q" / "write.sql").write_text("CREATE TABLE t AS SELECT 1 AS x;\n")
    r = cli("shadow", "--json", "r.json", "--junit", "r.xml", "q")
    assert r.code == 0, r.out + r.err
    report = validate(project)
    write = next(q for q in report["queries"] if q["name"] == "write")
    assert write["status"] == "skipped" and "shadow_writes" in write["message"]
    assert "<skipped" in (project / "r.xml").read_text()
    assert list((project / "records").glob("*.parquet"))


@pytest.mark.parametrize("args, message", [
    (["q"], "no reference engine"),
    (["--reference", "nope", "q"], "no engine named 'nope'"),
    (["--reference", "duck", "q"], "the same engine"),
    (["--reference", "duck1", "missing.sql"], "no such file or folder"),
    (["--reference", "duck1", "--max-ratio", "0", "q"], "--max-ratio"),
])
def test_usage_and_configuration_errors_exit_2(cli, project, args, message):
    r = cli("shadow", *args)
    assert r.code == 2
    assert message in r.err


def test_shadow_report_summarizes_the_store(cli, project):
    (project / "q" / "diverge.sql").write_text(DIVERGE)
    for _ in range(2):
        cli("shadow", "--reference", "duck1", "q")
    r = cli("shadow", "report", "--json", "summary.json")
    assert r.code == 0, r.err
    assert "6 records" in r.out and "values 2" in r.out and "match 4" in r.out
    assert "recent divergences" in r.out and "threads" in r.out
    summary = json.loads((project / "summary.json").read_text())
    assert {q["query"] for q in summary["queries"]} == {"count", "top_zones", "threads"}
    assert all(q["ratio_p50"] > 0 for q in summary["queries"])


def test_shadow_report_without_records_fails_clearly(cli, project):
    r = cli("shadow", "report", "--store", "nowhere")
    assert r.code == 1 and "no shadow records in nowhere" in r.err


def test_shadow_report_is_a_subcommand_even_beside_a_folder_named_report(cli, project):
    (project / "report").mkdir()
    (project / "report" / "agree.sql").write_text(AGREE)
    # the old special case ran a folder named report instead of summarizing the store
    assert "no shadow records" in cli("shadow", "report").err
    assert cli("shadow", "--reference", "duck1", "run", "report").code == 0
    r = cli("shadow", "--store", "elsewhere", "report")  # an option before the action
    assert r.code == 1 and "no shadow records in elsewhere" in r.err
    with pytest.raises(SystemExit) as refused:  # argparse's own usage error
        cli("shadow", "report", "q")
    assert refused.value.code == 2


def test_query_shadow_prints_verdict_and_ratio_under_the_answer(cli, project):
    r = cli("query", "--shadow", "duck1", "SELECT count(*) AS n FROM trips")
    assert r.code == 0, r.err
    table, _, last = r.out.rstrip("\n").rpartition("\n")
    assert "400" in table
    assert last.startswith("shadow duck1: match: 1 row agrees; duck took ")
    assert "x duck1's time" in last
    machine = cli("query", "--format", "csv", "--shadow", "duck1", "SELECT 1 AS x")
    assert machine.out == "x\n1\n"
    assert "shadow duck1: match" in machine.err
    diverged = cli("query", "--shadow", "duck1", "SELECT current_setting('threads') AS t")
    assert "shadow duck1: values" in diverged.out


def test_noise_flag_turns_a_random_query_into_nondeterministic_not_failure(cli, project):
    (project / "q" / "random.sql").write_text("-- name: dice\nSELECT random() AS r;\n")
    # random() is found in the SQL: nondeterministic, not a failure, even without --noise
    assert cli("shadow", "--reference", "duck1", "--no-store", "q").code == 0
    r = cli("shadow", "--reference", "duck1", "--noise", "--no-store", "--json", "r.json",
            "--junit", "r.xml", "q")
    assert r.code == 0, r.out
    report = validate(project)
    dice = next(q for q in report["queries"] if q["name"] == "dice")
    assert dice["category"] == "nondeterministic" and dice["noise_checked"]
    assert not (project / ".arrowgate").exists()  # --no-store
