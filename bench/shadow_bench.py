#!/usr/bin/env python3
"""Shadowing's cost to the primary on a large answer (docs/benchmarks.md, "Shadow streaming").

    .venv/bin/python bench/shadow_bench.py --rows 10000000 --rounds 5

The primary is DuckDB in process answering ``ROWS`` rows of three 8-byte
columns; the caller reads the batches as they come and sums one column (the
checksum that checks the answers). Each run is a fresh process, so its peak
RSS is its own:

- ``plain``: no shadow;
- ``shadowed``: shadowed on a second DuckDB engine (``background = true``:
  the caller never waits for the verdict) with the default
  ``max_compare_bytes`` (256 MiB, so the two answers are compared by row
  count and row hash);
- ``shadowed-full`` (``--full``): the same with a cap the answers fit in, so
  the comparator sees both tables whole.

Besides times: the bytes the comparison held at its peak, the process's peak
RSS, and the CPU seconds the process spent from the query's start to its
verdict (both engines, the comparison, and the caller's reading).

Each engine is pinned to ``threads = 1``, so with two free cores the
reference runs on the other one. Answers first: the warm-up round checks
that every mode delivers the same rows and checksum and that the verdict is
``match``. Then modes alternate, rotated each round; medians of ``--rounds``
with the min-max spread; ratios against ``plain`` from the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHILD = "--child"


def child(mode: str, rows: int, cap: int) -> None:
    import pyarrow.compute as pc

    import gateway

    config = {"engines": {"duck": {"type": "duckdb", "settings": {"threads": 1}},
                          "ref": {"type": "duckdb", "settings": {"threads": 1}}},
              "default_engine": "duck"}
    if mode != "plain":
        config["shadow"] = {"reference": "ref", "primary": "duck", "background": True,
                            "store": False, "max_compare_bytes": cap}
    sql = f"SELECT i AS id, i % 1000 AS g, i * 1.5 AS f FROM range({rows}) t(i)"
    with gateway.connect(config) as gw:
        gw.engine("duck")
        gw.engine("ref")
        warm = gw.execute("SELECT 1 AS x")  # imports (sqlglot, for the shadow) are not timed
        warm.to_arrow()
        if warm.shadow is not None:
            warm.shadow.wait()
        cpu = time.process_time()
        started = time.perf_counter()
        result = gw.execute(sql)
        first = None
        count = checksum = 0
        for batch in result.reader():
            if first is None:
                first = time.perf_counter() - started
            count += batch.num_rows
            checksum += pc.sum(batch.column(0)).as_py() or 0
        total = time.perf_counter() - started
        out = {"mode": mode, "first_s": first, "total_s": total, "rows": count,
               "checksum": checksum}
        record = result.shadow
        if record is not None:
            record.wait()
            out.update(verdict_s=time.perf_counter() - started, category=record.category,
                       downgraded=record.downgraded,
                       held_peak=record.evidence.get("held_peak_bytes"))
        out["query_cpu_s"] = time.process_time() - cpu
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["rss_mib"] = usage.ru_maxrss / 1024
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    print(json.dumps(out))


def run(mode: str, rows: int, cap: int) -> dict:
    proc = subprocess.run([sys.executable, __file__, CHILD, mode, str(rows), str(cap)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stat(values: list[float], digits: int = 3) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--full", action="store_true",
                        help="also shadow with a cap the answers fit in (full comparison)")
    args = parser.parse_args()
    default_cap, full_cap = 256 * 2**20, 4 * 2**30
    modes = {"plain": default_cap, "shadowed": default_cap}
    if args.full:
        modes["shadowed-full"] = full_cap
    warm = {m: run(m, args.rows, cap) for m, cap in modes.items()}
    expected = (warm["plain"]["rows"], warm["plain"]["checksum"])
    for m, out in warm.items():
        assert (out["rows"], out["checksum"]) == expected, f"{m} delivered another answer"
        assert out.get("category", "match") == "match", f"{m}: {out}"
    results: dict[str, list[dict]] = {m: [] for m in modes}
    names = list(modes)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for m in order:
            results[m].append(run(m, args.rows, modes[m]))
    load = os.getloadavg()
    print(f"{args.rows} rows x 3 BIGINT/DOUBLE columns, median (min-max) of {args.rounds} "
          f"rounds after a warm-up; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
    print("| mode | first batch s | total s | first / plain | total / plain | verdict s "
          "| compared | held peak MiB | peak RSS MiB | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in names:
        runs = results[m]
        firsts = [x["first_s"] for x in runs]
        totals = [x["total_s"] for x in runs]
        r_first = [x["first_s"] / p["first_s"] for x, p in zip(runs, results["plain"], strict=True)]
        r_total = [x["total_s"] / p["total_s"] for x, p in zip(runs, results["plain"], strict=True)]
        verdict = stat([x["verdict_s"] for x in runs]) if m != "plain" else "-"
        compared = "-" if m == "plain" else \
            ("row count + hash" if runs[0]["downgraded"] else "whole tables")
        held = "-" if m == "plain" or runs[0]["held_peak"] is None else \
            f"{max(x['held_peak'] for x in runs) / 2**20:.0f}"
        print(f"| {m} | {stat(firsts)} | {stat(totals)} | {stat(r_first)} | {stat(r_total)} "
              f"| {verdict} | {compared} | {held} | {stat([x['rss_mib'] for x in runs], 0)} "
              f"| {stat([x['query_cpu_s'] for x in runs], 2)} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
