#!/usr/bin/env python3
"""DuckDB releases against each other on the taxi queries Q01-Q04 over the raw CSV.

    ARROWGATE_HOME=... .venv/bin/python bench/duckdb_versions_bench.py --rows 100000 1000000

Contenders: 1.4.4, 1.5.5 and 2.0.0 as ADBC drivers in process (the same path
for each, so the path's cost cancels out; the answers are a few rows), and
2.0.1, the installed module. Each reads the same ``arrowgate data taxi`` file
in place (``read_csv``, sniffed, not loaded). Timing is :mod:`gateway.benchmark.runner`:
answers checked against 1.5.5 first, engines alternating in rotated order,
one warm-up, median of the rounds with the min-max spread, each engine in a
process of its own, peak RSS per engine. Ratios are against 1.5.5.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from taxi import QUERIES, taxi_file

from gateway.benchmark.runner import BenchReport, GatewayEngine, run_benchmark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

ENGINES = {"duck155": "1.5.5", "duck144": "1.4.4", "duck200": "2.0.0", "duck201": "2.0.1"}


def config(path: Path, threads: int) -> dict[str, object]:
    return {"engines": {name: {"type": "duckdb", "version": v, "settings": {"threads": threads}}
                        for name, v in ENGINES.items()},
            "sources": {"trips": {"path": str(path)}}}


def table(report: BenchReport, rows: int) -> str:
    """One line per query: each release's median (spread) and its ratio to 1.5.5 with spread."""
    lines = []
    for q in report.queries:
        if q.status != "timed":
            lines.append(f"| {q.query.name} {rows:,} | {q.status} |")
            continue
        t = q.timings
        base = t["duck155"]
        cells = [f"{q.query.name} {rows:,}"]
        for e in ENGINES:
            cells.append(f"{t[e].median * 1e3:.0f} ({t[e].low * 1e3:.0f}-{t[e].high * 1e3:.0f})")
        for e in list(ENGINES)[1:]:
            cells.append(f"{t[e].median / base.median:.2f}x "
                         f"({t[e].low / base.high:.2f}-{t[e].high / base.low:.2f})")
        cells += [f"{t[e].peak_rss / 2**20:.0f}" if t[e].peak_rss else "-" for e in ENGINES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    names = list(ENGINES)
    head = (["query rows"] + [f"{ENGINES[e]} ms" for e in names]
            + [f"{ENGINES[e]} / 1.5.5" for e in names[1:]]
            + [f"{ENGINES[e]} peak MB" for e in names])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    for rows in args.rows:
        cfg = config(taxi_file(rows), args.threads)
        report = run_benchmark([GatewayEngine(e, cfg) for e in names], QUERIES,
                               rounds=args.rounds)
        report.write_json(RESULTS / f"duckdb_versions_{rows}.json")
        out.append(table(report, rows))
    print("\n".join(out))


if __name__ == "__main__":
    main()
