#!/usr/bin/env python3
"""DuckDB shadowed against Spark (Spark Connect) on the 22 TPC-H queries, same Parquet files.

    .venv/bin/pip install tpchgen-cli
    .venv/bin/tpchgen-cli parquet -s 1 --output-dir bench/data/tpch-sf1
    .venv/bin/python bench/tpch_spark.py --data bench/data/tpch-sf1 --rounds 5

Starts a local Spark Connect server (tests/spark.py's, with Spark's and the
JVM's default settings unless ``--test-settings``; or ``--remote sc://...``
uses a running one), declares each ``*.parquet`` file under ``--data`` as a
source (a DuckDB view, a Spark temporary view), and runs
bench/tpch/queries.sql (DuckDB's own texts of the 22 queries; sqlglot
transpiles them for Spark):

1. answers: each query through shadow mode, DuckDB the primary and Spark
   the reference, and (``--both``) the other way round; the verdict and, for
   a divergence, the comparator's message and first differences;
2. speed, for the queries whose answers match: one warm-up per engine, then
   ``--rounds`` rounds, the engines alternating with the order rotated each
   round; median and min-max of each, the ratio Spark / DuckDB of the medians.

Prints a Markdown table (and ``--json FILE`` writes every figure). Peak
memory: this process's peak RSS (DuckDB runs in it; the Spark client's
answers pass through it too) and the Spark JVM's (VmHWM), over the whole run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gateway  # noqa: E402
from gateway.sql.corpus import read_queries  # noqa: E402
from tests.spark import SparkServer, find_pyspark, start_server  # noqa: E402

QUERIES = ROOT / "bench" / "tpch" / "queries.sql"
ENGINES = ("duck", "spark")
#: half a unit of the 6th decimal (and a float's rounding of it): Spark's AVG of a DECIMAL
#: and its decimal quotients have scale 6 where DuckDB answers a DOUBLE
SCALE_6 = 5.000001e-7
DIRECTIONS = {"duck_vs_spark": ("duck", "spark"), "spark_vs_duck": ("spark", "duck")}


def config(data: Path, remote: str, threads: int) -> dict[str, Any]:
    sources = {p.stem: {"path": str(p.resolve())} for p in sorted(data.glob("*.parquet"))}
    if not sources:
        sys.exit(f"no *.parquet under {data}: tpchgen-cli parquet -s SF --output-dir {data}")
    return {"engines": {"duck": {"type": "duckdb", "settings": {"threads": threads},
                                 "timeout": 3600},
                        "spark": {"type": "spark", "remote": remote,
                                  "transpile_from": "duckdb", "timeout": 3600}},
            "sources": sources,
            "shadow": {"primary": "duck", "reference": "spark", "timeout": 3600,
                       "store": False}}


def verdict(gw: gateway.Gateway, sql: str, primary: str, reference: str) -> dict[str, Any]:
    """The shadow record of ``sql`` on ``primary`` against ``reference``, as a dict."""
    result = gw.execute(sql, engine=primary, shadow=reference)
    try:
        result.to_arrow()
    except gateway.GatewayError as exc:
        record = getattr(exc, "shadow", None)
        return {"category": "error", "message": str(exc).splitlines()[0],
                "evidence": record.evidence if record is not None else {}}
    record = result.shadow
    record.wait()
    return {"category": record.category, "message": record.message,
            "evidence": record.evidence, "primary_ms": record.primary_ms,
            "reference_ms": record.reference_ms, "rows": record.primary_rows}


def timed(gw: gateway.Gateway, sql: str, engine: str) -> float:
    started = time.perf_counter()
    gw.execute(sql, engine=engine, shadow=False).to_arrow()
    return (time.perf_counter() - started) * 1000


def vm_hwm_mb(pid: int) -> float | None:
    """A process's peak RSS in MB (its VmHWM), or None when it is not readable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def spread(times: list[float]) -> str:
    return f"{statistics.median(times):.0f} ({min(times):.0f}-{max(times):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "bench/data/tpch-sf1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", help="comma-separated names (q01,q06); default all 22")
    parser.add_argument("--both", action="store_true",
                        help="also shadow Spark (primary) against DuckDB (reference)")
    parser.add_argument("--remote", help="a running Spark Connect server (sc://host:port)")
    parser.add_argument("--test-settings", action="store_true",
                        help="start the server with the test suite's settings")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2,
                        help="DuckDB's threads (default: the cores; Spark runs local[2])")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    queries = read_queries([QUERIES])
    if args.queries:
        wanted = set(args.queries.split(","))
        queries = [q for q in queries if q.name in wanted]

    load = os.getloadavg()
    server: SparkServer | None = None
    folder = None
    if args.remote is None:
        home = find_pyspark()
        if home is None or shutil.which("java") is None:
            sys.exit("needs pyspark (the spark extra) and Java (default-jre-headless)")
        folder = Path(tempfile.mkdtemp(prefix="arrowgate-tpch-spark-"))
        server = start_server(home, folder, for_tests=args.test_settings,
                              driver_memory=args.driver_memory)
        print(f"Spark Connect server {server.remote}: listening after {server.seconds} s",
              file=sys.stderr)
    remote = args.remote or (server.remote if server else "")
    rows: list[dict[str, Any]] = []
    try:
        with gateway.connect(config(args.data, remote, args.threads)) as gw:
            for query in queries:
                row: dict[str, Any] = {"query": query.name}
                row["duck_vs_spark"] = verdict(gw, query.sql, "duck", "spark")
                if args.both:
                    row["spark_vs_duck"] = verdict(gw, query.sql, "spark", "duck")
                for key, (primary, reference) in DIRECTIONS.items():
                    if row.get(key, {}).get("category") == "values":
                        # Spark's decimal average and quotient keep 6 decimals where DuckDB's
                        # are doubles: within half a unit of the 6th decimal, is that all?
                        row[f"{key}_within_scale_6"] = verdict(
                            gw, f"-- arrowgate: abs_tol={SCALE_6}\n{query.sql}", primary,
                            reference)
                print(f"{query.name}: {row['duck_vs_spark']['category']}", file=sys.stderr)
                rows.append(row)
            for query, row in zip(queries, rows, strict=True):
                agreed = [row.get(f"{key}_within_scale_6", row[key])["category"]
                          for key in DIRECTIONS if key in row]
                if any(v not in ("match", "nondeterministic") for v in agreed):
                    continue  # answers first: a query that diverges gets no speed figure
                times: dict[str, list[float]] = {e: [] for e in ENGINES}
                for engine in ENGINES:
                    timed(gw, query.sql, engine)  # warm-up
                for r in range(args.rounds):
                    for engine in ENGINES[r % 2:] + ENGINES[:r % 2]:
                        times[engine].append(timed(gw, query.sql, engine))
                row["ms"] = times
                print(f"{query.name}: duck {spread(times['duck'])} ms, "
                      f"spark {spread(times['spark'])} ms", file=sys.stderr)
        peaks = {"gateway_process_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 "spark_jvm_mb": vm_hwm_mb(server.pid) if server else None}
    finally:
        if server is not None:
            server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    report(rows, args, load, peaks)


def report(rows: list[dict[str, Any]], args: argparse.Namespace, load: tuple[float, ...],
           peaks: dict[str, Any]) -> None:
    both = args.both
    head = "| query | DuckDB shadowed by Spark |" + (" Spark shadowed by DuckDB |" if both else "")
    head += " DuckDB ms median (min-max) | Spark ms median (min-max) | Spark / DuckDB |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ratios = []
    for row in rows:
        cells = [row["query"]]
        for key in DIRECTIONS if both else ["duck_vs_spark"]:
            cell = row[key]["category"]
            if f"{key}_within_scale_6" in row:
                cell += f"; {row[f'{key}_within_scale_6']['category']} within {SCALE_6:.1e}"
            cells.append(cell)
        if "ms" in row:
            duck, spark = row["ms"]["duck"], row["ms"]["spark"]
            ratio = statistics.median(spark) / statistics.median(duck)
            ratios.append(ratio)
            cells += [spread(duck), spread(spark), f"{ratio:.2f}x"]
        else:
            cells += ["-", "-", "-"]
        print("| " + " | ".join(cells) + " |")
    if ratios:
        print(f"\ngeometric mean of Spark / DuckDB over {len(ratios)} queries: "
              f"{statistics.geometric_mean(ratios):.2f}x")
    print(f"load average at start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; "
          f"peak RSS: gateway process (DuckDB) {peaks['gateway_process_mb']:.0f} MB, "
          f"Spark JVM {peaks['spark_jvm_mb'] or 0:.0f} MB; {args.rounds} rounds")
    for row in rows:
        for key in [*DIRECTIONS, *(f"{k}_within_scale_6" for k in DIRECTIONS)]:
            v = row.get(key)
            if v and v["category"] not in ("match",):
                print(f"\n{row['query']} ({key}): {v['category']}: {v['message']}")
                print(json.dumps(v.get("evidence", {}), default=str)[:1500])
    if args.json:
        args.json.write_text(json.dumps({"load": load, "peaks": peaks, "rows": rows},
                                        default=str, indent=1))


if __name__ == "__main__":
    main()
