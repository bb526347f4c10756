#!/usr/bin/env python3
"""What each way of running DuckDB costs over the installed duckdb module in process.

    ARROWGATE_HOME=... .venv/bin/python bench/duckdb_paths_bench.py --rounds 7

Contenders, all on the release the venv has installed (2.0.1 here) unless named:

- ``installed``: the duckdb Python module in process (the baseline);
- ``adbc``: the same release as an ADBC driver in process (``path`` = its library);
- ``worker``: the same release in a worker process (its own Python module there),
  answers handed over as Arrow segments in shared memory (``isolation =
  "process"``), warm after the warm-up round;
- ``adbc_cli``: the release of the duckdb-cli binary (1.5.6) as an ADBC
  driver, the baseline for
- ``cli``: that binary run once per query (``cli = ...``), Parquet through a pipe.

Every answer is a synthetic table of N rows (an integer, a double, a string,
a timestamp) made by ``range(N)``, so what is measured is the path, not a scan.
Timing is :mod:`gateway.benchmark.runner` (answers checked first, engines alternating in
rotated order, one warm-up, median of the rounds with the min-max spread,
each contender in a process of its own). Peak memory is the contender's own
process: the worker's and the CLI's memory is not in it.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

from gateway.benchmark.runner import BenchReport, GatewayEngine, run_benchmark
from gateway.sql.corpus import Query
from gateway_duckdb.install import ensure_installed

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def answer(rows: int) -> str:
    return ("SELECT i, i * 0.5 AS x, 'trip-' || i AS label, "
            "TIMESTAMP '2020-01-01' + to_seconds(i) AS ts "
            f"FROM range({rows}) t(i) ORDER BY i")


def queries(sizes: list[int]) -> list[Query]:
    return [Query(f"rows_{n}", answer(n) if n > 1 else "SELECT count(*) AS n FROM range(1000)")
            for n in sizes]


def config(threads: int) -> dict[str, object]:
    installed = version("duckdb")
    spec = find_spec("duckdb_cli")
    if spec is None or spec.origin is None:
        sys.exit("duckdb-cli is missing: pip install -e '.[dev]'")
    cli = str(Path(spec.origin).parent / "duckdb")
    settings = {"threads": threads}
    # the same release as an ADBC driver: named by path, since version = <installed release>
    # runs on the installed module
    library = ensure_installed(installed).library
    return {"engines": {
        "installed": {"type": "duckdb", "settings": settings},
        "adbc": {"type": "duckdb", "path": str(library), "settings": settings},
        "worker": {"type": "duckdb", "version": installed, "isolation": "process",
                   "settings": settings},
        "adbc_cli": {"type": "duckdb", "version": cli_release(cli), "settings": settings},
        "cli": {"type": "duckdb", "cli": cli, "settings": settings},
    }}


def cli_release(binary: str) -> str:
    from gateway_duckdb.cli_session import cli_version

    return cli_version(binary, "cli")


def table(report: BenchReport) -> str:
    """Per answer size: each path's median (spread), its ratio to its baseline, extra ms."""
    pairs = [("adbc", "installed"), ("worker", "installed"), ("cli", "adbc_cli")]
    head = ["answer rows", "installed ms", "adbc ms", "worker ms", "adbc_cli ms", "cli ms"]
    head += [f"{a} / {b}" for a, b in pairs] + [f"{a} extra ms" for a, _ in pairs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for q in report.queries:
        if q.status != "timed":
            lines.append(f"| {q.query.name} | {q.status} |")
            continue
        t = q.timings
        cells = [q.query.name.removeprefix("rows_")]
        for e in ("installed", "adbc", "worker", "adbc_cli", "cli"):
            cells.append(f"{t[e].median * 1e3:.1f} ({t[e].low * 1e3:.1f}-{t[e].high * 1e3:.1f})")
        for a, b in pairs:
            ratio = t[a].median / t[b].median
            cells.append(f"{ratio:.2f}x ({t[a].low / t[b].high:.2f}-{t[a].high / t[b].low:.2f})")
        for a, b in pairs:
            cells.append(f"{(t[a].median - t[b].median) * 1e3:+.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    cfg = config(args.threads)
    contenders = [GatewayEngine(name, cfg) for name in cfg["engines"]]  # type: ignore[attr-defined]
    report = run_benchmark(contenders, queries(args.sizes), rounds=args.rounds,
                           baseline="installed")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report.write_json(RESULTS / "duckdb_paths.json")
    print(report.to_markdown())
    print()
    print(table(report))


if __name__ == "__main__":
    main()
