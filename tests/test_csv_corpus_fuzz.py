"""bench/csv_corpus_fuzz.py on a few files of DuckDB's CSV corpus, so the script cannot rot."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "duckdb_csv"
#: a file of each kind the table counts: fuzzed ones, and one DuckDB cannot read
FILES = ("bool.csv", "dates.csv", "comments/simple.csv", "encodings/latin1.csv.gz")


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("csv_corpus_fuzz")


def test_the_script_fuzzes_each_file_in_a_worker_and_counts_what_it_skips(tmp_path):
    folder = tmp_path / "files"
    for name in FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, folder / name)
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "csv_corpus_fuzz.py"), str(folder),
         "--queries-per-file", "15", "--out", str(tmp_path / "out"), "--timeout", "60"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    cells = [[c.strip() for c in line.strip("|").split("|")]
             for line in run.stdout.splitlines() if line.startswith("| ")]
    rows = {c[0]: c[1] for c in cells if len(c) == 2}
    assert rows["files fuzzed"] == "3"
    assert rows["queries"] == "45"
    assert rows["skipped: DuckDB cannot read it"] == "1"
    assert rows["hangs"] == rows["crashes"] == "0"


def test_a_hang_is_counted_and_written_with_its_file(bench, tmp_path):
    records = [
        {"file": str(tmp_path / "a.csv"), "queries": 10, "unsupported": 2, "repeats": 1,
         "findings": [{"category": "values", "message": "x differs", "sql": "SELECT 1, x FROM t",
                       "shrunk": "SELECT x FROM t", "flaky": "", "after_queries": 3}]},
        {"file": str(tmp_path / "b.csv"), "outcome": "hang: csv",
         "query": "SELECT * FROM t", "exit": None},
        {"file": str(tmp_path / "c.csv"), "skipped": bench.SKIPS[1], "why": "no columns"},
    ]
    counts, found = bench.summarise(records)
    assert (counts["files fuzzed"], counts["queries"], counts["divergences: values"],
            counts["hangs"], counts[f"skipped: {bench.SKIPS[1]}"]) == (1, 10, 1, 1, 1)
    assert "| hangs | 1 |" in bench.table(counts)
    texts = [bench.write_finding(tmp_path / "out", tmp_path, f, 0).read_text() for f in found]
    assert any("source t = a.csv" in t and t.endswith("SELECT x FROM t;\n") for t in texts)
    assert any("source t = b.csv" in t and "hang: csv" in t for t in texts)


def test_a_file_past_its_time_limit_is_a_hang_and_the_worker_is_replaced(bench):
    """The worker process is killed at the limit (here before it has even imported the
    gateway) and the file counted as a hang; the next file gets a new worker."""
    worker = bench.FuzzWorker(0.05, [0, 5.0, 3])
    try:
        hung = worker.check(str(FIXTURES / "bool.csv"))
        assert [r["outcome"] for r in hung] == ["hang: csv"]
        assert worker.proc is None
        worker.timeout = 60.0
        fuzzed = worker.check(str(FIXTURES / "bool.csv"))
        assert fuzzed[-1]["queries"] == 3
    finally:
        worker._stop()
