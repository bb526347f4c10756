#!/usr/bin/env python3
"""TPC-H lineitem as CSV (``tpchgen-cli csv -s 1 --tables lineitem``): the csv engine against DuckDB.

    .venv/bin/pip install tpchgen-cli   # not a dependency of the project
    .venv/bin/tpchgen-cli csv -s 1 --tables lineitem -o /tmp/tpch
    .venv/bin/python bench/lineitem_bench.py /tmp/tpch/lineitem.csv [--rounds 5] [--queries count,q6]

lineitem's comments are quoted, and some start after a blank (``..., "egular courts``):
the file the csv engine rewrote line by line in Python at every query until issue #39.
Each query runs in a fresh process per engine (import, read the CSV in place, an Arrow
table back): arrowgate's csv engine (no fallback; the sniff cache off) and DuckDB's
``read_csv`` of the same file. Answers are checked equal first (doubles to 1e-9 relative: sums added
in another order); then the engines
alternate, the order rotated each round, after one warm-up. Printed: median seconds with
the min-max spread, DuckDB's median over arrowgate's, and each engine's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

QUERIES = {
    "count": "SELECT count(*) AS n FROM {t}",
    "q6": "SELECT sum(l_extendedprice * l_discount) AS revenue FROM {t} "
          "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
          "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "q1": "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, "
          "sum(l_extendedprice) AS sum_base_price, avg(l_quantity) AS avg_qty, "
          "avg(l_discount) AS avg_disc, count(*) AS count_order FROM {t} "
          "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus "
          "ORDER BY l_returnflag, l_linestatus",
}

CHILD = {
    "arrowgate": r"""
import json, sys, gateway
with gateway.connect({"engines": {"csv": {"type": "csv"}},
                      "sources": {"lineitem": {"path": sys.argv[1]}}}) as gw:
    rows = gw.execute(sys.argv[2].format(t="lineitem"), engine="csv").to_arrow().to_pylist()
print(json.dumps(rows, default=float))
""",
    "duckdb": r"""
import json, sys, duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # it prints to stdout past 2 s
t = "read_csv('" + sys.argv[1] + "')"
print(json.dumps(con.sql(sys.argv[2].format(t=t)).to_arrow_table().to_pylist(), default=float))
""",
}


def run(engine: str, path: str, sql: str) -> tuple[float, str, int]:
    env = {**os.environ, "ARROWGATE_SNIFF_CACHE": "off"}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD[engine], path, sql], env=env,
                             stdout=subprocess.PIPE, text=True)
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{engine}: {sql} failed")
    return took, out, usage.ru_maxrss


def same(a: str, b: str) -> bool:
    """The same rows, doubles equal to 1e-9 relative (sums added in another order)."""
    x, y = json.loads(a), json.loads(b)
    return len(x) == len(y) and all(
        r.keys() == q.keys() and all(
            math.isclose(v, w, rel_tol=1e-9) if isinstance(v, float) or isinstance(w, float)
            else v == w for v, w in zip(r.values(), q.values(), strict=True))
        for r, q in zip(x, y, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", default="count,q6,q1")
    args = ap.parse_args()
    engines = list(CHILD)
    print(f"{args.path}: {os.path.getsize(args.path) / 1e6:.0f} MB")
    for name in args.queries.split(","):
        sql = QUERIES[name]
        answers = {e: run(e, args.path, sql)[1] for e in engines}  # also the warm-up
        if not same(*answers.values()):
            print(f"{name}: answers differ, no timing: {answers}")
            continue
        times: dict[str, list[float]] = {e: [] for e in engines}
        peaks = dict.fromkeys(engines, 0)
        for r in range(args.rounds):
            for e in engines[r % 2:] + engines[:r % 2]:
                took, _, peak = run(e, args.path, sql)
                times[e].append(took)
                peaks[e] = max(peaks[e], peak)
        med = {e: statistics.median(times[e]) for e in engines}
        for e in engines:
            print(f"{name:6} {e:9} median {med[e]:7.3f} s (min {min(times[e]):.3f} max "
                  f"{max(times[e]):.3f})  peak {peaks[e] >> 10} MB")
        print(f"{name:6} DuckDB / arrowgate: {med['duckdb'] / med['arrowgate']:.2f}x")


if __name__ == "__main__":
    main()
