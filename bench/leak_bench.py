#!/usr/bin/env python3
"""Do dropped answers leak? 5,000 mixed statements per engine type, half never read.

    .venv/bin/python bench/leak_bench.py --n 5000

Not a timing benchmark: a check of issue 21's "nothing leaks". Each engine type
runs in a process of its own (so one's memory never shows in another's figures):
a warm-up of ``--warmup`` statements, then ``--n`` statements drawn in turn from a
mix (``SELECT 1``, a 100,000-row answer, an aggregate, a statement that fails,
a parameterised one where the engine takes parameters), every second answer
dropped without being read or closed. RSS, anonymous RSS and open file
descriptors are sampled after the warm-up and at every fifth of the run; at
the end ``gw.running()`` must be empty. The table shows the samples and the
growth from the warm-up to the end. Output goes to stdout (pipe it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: engine type -> (config section, the statements of the mix)
KINDS = ("duckdb", "duckdb_adbc", "csv", "ducklake", "adbc_sqlite", "odbc_sqlite")

CHILD = r"""
import gc, json, os, sys
import gateway
from gateway.errors import GatewayError

kind, n, warmup, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
csv = os.path.join(folder, "t.csv")
with open(csv, "w") as f:
    f.write("i,s\n" + "".join(f"{i},row{i % 97}\n" for i in range(100_000)))
big = "SELECT * FROM range(100000) r(i)"
rec = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 2000) "
       "SELECT i FROM r")
sections = {
    "duckdb": ({"type": "duckdb"}, [big, "SELECT count(*), sum(i) FROM range(100000) r(i)"]),
    "duckdb_adbc": ({"type": "duckdb", "version": "1.5.5"}, [big, "SELECT sum(i) FROM range(100000) r(i)"]),
    "csv": ({"type": "csv"}, ["SELECT * FROM t", "SELECT s, count(*) FROM t GROUP BY s"]),
    "ducklake": ({"type": "ducklake", "catalog": f"duckdb:{folder}/lake.ducklake", "duckdb": "1.5.5",
                  "data_path": f"{folder}/lake-data/"}, [big, "SELECT sum(i) FROM range(100000) r(i)"]),
    "adbc_sqlite": ({"type": "adbc", "driver": "sqlite", "uri": f"{folder}/a.sqlite"},
                    [rec, "SELECT count(*) FROM (" + rec + ")"]),
    "odbc_sqlite": ({"type": "odbc", "connection": f"DRIVER={{SQLite3}};Database={folder}/o.sqlite"},
                    [rec, "SELECT count(*) FROM (" + rec + ")"]),
}
section, heavy = sections[kind]
mix = ["SELECT 1 AS x", *heavy, "SELECT no_such_column FROM no_such_table"]
config = {"engines": {kind: section}}
if kind == "csv":
    config["sources"] = {"t": {"path": csv}}


def status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return {"rss": fields["VmRSS"], "anon": fields["RssAnon"], "peak": fields["VmHWM"],
            "fds": len(os.listdir("/proc/self/fd"))}


def one(gw, i):
    sql = mix[i % len(mix)]
    try:
        result = gw.execute(sql, engine=kind)
        if i % 2:
            result.to_arrow()
        del result
        return 0
    except GatewayError:
        return 1


samples, failed = [], 0
with gateway.connect(config) as gw:
    for i in range(warmup):
        one(gw, i)
    gc.collect()
    samples.append({"done": 0, **status()})
    for i in range(n):
        failed += one(gw, i)
        if (i + 1) % (n // 5) == 0:
            gc.collect()
            samples.append({"done": i + 1, **status()})
    left = len(gw.running())
print(json.dumps({"samples": samples, "failed": failed, "running_at_end": left}))
"""


def run(kind: str, n: int, warmup: int) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'plugins'}"}
    with tempfile.TemporaryDirectory(prefix="arrowgate-leak-") as folder:
        done = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(warmup), folder],
                              capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["(no output)"])[-1]}
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="statements per engine type")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"engine types, comma-separated (default: {','.join(KINDS)})")
    args = parser.parse_args()
    print(f"{args.n} statements per engine type after a warm-up of {args.warmup}, "
          "every second answer dropped unread; RSS and RssAnon in MB\n")
    print("| engine type | RSS after warm-up → end | RssAnon after warm-up → end | "
          "fds after warm-up → end | peak RSS | failed as planned | running at end |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.kinds.split(","):
        out = run(kind, args.n, args.warmup)
        if "error" in out:
            print(f"| {kind} | could not run: {out['error']} |||||")
            continue
        first, last = out["samples"][0], out["samples"][-1]
        trail = " ".join(f"{s['rss']:.0f}" for s in out["samples"])
        print(f"| {kind} | {first['rss']:.0f} → {last['rss']:.0f} "
              f"({trail}) | "
              f"{first['anon']:.0f} → {last['anon']:.0f} | {first['fds']} → {last['fds']} | "
              f"{last['peak']:.0f} | {out['failed']} | {out['running_at_end']} |", flush=True)


if __name__ == "__main__":
    main()
