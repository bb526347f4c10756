"""The streaming comparison's memory cap is a property of the process: measured, not trusted.

Each case runs in a fresh interpreter (so no earlier test's memory, kept by an
allocator, hides the growth), warms the comparator up on a small pair, then
compares two answers of a few million rows that DuckDB generates batch by batch,
while a thread samples the process's anonymous resident memory (``RssAnon``:
what the comparison holds, not the spilled files' page cache). The peak growth
above the warm process must stay under the cap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_MEASURE = textwrap.dedent("""
    import json, sys, threading
    import duckdb
    from gateway.verify.compare_stream import compare_streams

    rows, cap, primary_sql, reference_sql, sql = json.loads(sys.argv[1])

    def anon():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) << 10
        raise AssertionError("no RssAnon")

    def readers(rows):
        return [duckdb.connect(config={"threads": 1}).sql(q.format(rows=rows))
                .to_arrow_reader(65536) for q in (primary_sql, reference_sql)]

    def compare(rows):
        p, r = readers(rows)
        return compare_streams(p, r, p.schema, r.schema, sql=sql, memory_bytes=cap)

    compare(200_000)  # imports, the comparator's DuckDB database, the allocators' arenas
    peak, done = [0], threading.Event()

    def sample():
        while not done.wait(0.002):
            peak[0] = max(peak[0], anon())

    base = anon()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    verdict = compare(rows)
    done.set()
    sampler.join()
    print(json.dumps({"category": verdict.category, "grown": max(peak[0], anon()) - base,
                      "changed": verdict.evidence.get("changed_count"),
                      "paired": verdict.evidence.get("paired_rows")}))
""")

_COLUMNS = ("i AS id, (i % 1000)::VARCHAR AS s, 'customer-' || (i % 99991)::VARCHAR AS name, "
            "(i * 7)::DECIMAL(38, 4) AS amount, {f} AS f")
ANSWER = f"SELECT {_COLUMNS.format(f='i * 1.5')} FROM range({{rows}}) t(i)"


def peak_growth(rows: int, cap: int, primary: str, reference: str = ANSWER,
                sql: str | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", _MEASURE,
                           json.dumps([rows, cap, primary, reference, sql])],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("every", [30_000, 300])
def test_differing_answers_stay_under_the_cap(every):
    """Cells changed all through two 3M-row answers (100 of them, then 10,000): the rows
    left to pair must not keep the batches they came from, and pairing 6M rows in groups
    stays within the cap too (its floor is DuckDB's: ~45 MiB for a group of 4 MiB)."""
    cap = 64 << 20
    f = f"CASE WHEN i % {every} = 7 THEN -1.0 ELSE i * 1.5 END"
    primary = f"SELECT {_COLUMNS.format(f=f)} FROM range({{rows}}) t(i)"
    seen = peak_growth(3_000_000, cap, primary)
    assert seen["category"] == "values" and seen["changed"] == 3_000_000 // every, seen
    assert seen["grown"] < cap, f"grew {seen['grown'] >> 20} MiB under a {cap >> 20} MiB cap"


def test_answers_in_another_order_over_weak_keys_stay_under_the_cap():
    """The only key column has three values: each of the three groups the rows are routed to
    holds a third of both answers, and is split again rather than paired whole."""
    cap = 64 << 20
    columns = "i % 3 AS g, (i / 100)::DECIMAL(18, 2) AS amount, i * 1.5 AS f"
    reference = f"SELECT {columns} FROM range({{rows}}) t(i)"
    primary = f"SELECT {columns} FROM range({{rows}} - 1, -1, -1) t(i)"
    seen = peak_growth(3_000_000, cap, primary, reference)
    assert seen["category"] == "match", seen
    assert seen["grown"] < cap, f"grew {seen['grown'] >> 20} MiB under a {cap >> 20} MiB cap"
