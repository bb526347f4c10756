"""bench/sqllogic_csv.py on the repository's sample of sqllogictest files (tests/fixtures/sqllogic).

The classes issue #39 wants empty stay empty: no native wrong answer, no native
answer to SQL DuckDB refuses, no csv error where DuckDB answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import sqllogic_csv  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "sqllogic"


def test_records_are_read_as_duckdbs_runner_reads_them():
    recs, skipped = sqllogic_csv.records(
        "statement ok\nCREATE TABLE t(i INT);\n\n"
        "onlyif sqlite\nquery I\nSELECT 1;\n----\n1\n\n"
        "query I rowsort\nSELECT i\nFROM t;\n----\n\n"
        "statement error\nSELECT zzz.* FROM t;\n----\nBinder\n\n"
        "loop i 0 3\n\nquery I\nSELECT ${i};\n----\n\nendloop\n")
    assert recs == [("statement ok", "CREATE TABLE t(i INT);"), ("query", "SELECT i\nFROM t;"),
                    ("statement error", "SELECT zzz.* FROM t;")]
    assert skipped == 2  # the onlyif query, and the loop's query after it


def test_the_sample_has_no_query_in_the_bad_classes(tmp_path, capsys):
    totals = sqllogic_csv.main([str(SAMPLE), "--details", str(tmp_path / "bad.jsonl")])
    out = capsys.readouterr().out
    assert all(totals.get(c, 0) == 0 for c in sqllogic_csv.BAD), out
    assert totals.get("native agrees", 0) >= 5, out  # the share is printed, and not nil
    assert totals.get("fallback agrees", 0) >= 5, out
    assert totals.get("both refuse", 0) == 3, out
    assert totals.get("undetermined", 0) == 1, out  # first(): its own class
    assert totals.get("fallback differs", 0) == 0, out
    assert "native share:" in out
