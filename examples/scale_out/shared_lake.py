#!/usr/bin/env python3
"""Several gateway processes writing and reading one DuckLake whose catalog is in PostgreSQL.

    .venv/bin/python examples/scale_out/shared_lake.py --processes 3 --commits 20

Starts a throwaway PostgreSQL cluster (tests/pg.py), makes a lake in it, then
runs N independent processes, each with its own gateway and ducklake engine on
the same catalog and data folder. Each commits ``--commits`` single-row inserts
and reads the table's count after each; a commit that loses a race with
another process is retried (DuckLake reports the conflict). At the end the
table must hold every row exactly once. Prints what each process saw.

The same under load, through the Flight service, with updates, deletes and
reads racing the inserts, is bench/shared_lake_bench.py (docs/scale-out.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import gateway  # noqa: E402
from tests.pg import find_bin_dir, start_cluster  # noqa: E402


def worker(section: dict, me: int, commits: int, out: multiprocessing.Queue) -> None:
    retries, counts, errors = 0, [], []
    with gateway.connect({"engines": {"lake": section}}) as gw:
        for i in range(commits):
            for _attempt in range(20):
                try:
                    gw.execute(f"INSERT INTO events VALUES ({me}, {i})").to_arrow()
                    break
                except gateway.GatewayError as exc:
                    retries += 1
                    errors.append(str(exc).splitlines()[0][:160])
                    time.sleep(0.05)
            counts.append(gw.execute("SELECT count(*) FROM events").to_arrow()
                          .column(0)[0].as_py())
    out.put({"process": me, "retries": retries, "first_error": errors[:1],
             "counts_seen": [counts[0], counts[-1]], "monotonic": counts == sorted(counts)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args()
    cluster = start_cluster(find_bin_dir())
    folder = Path(tempfile.mkdtemp(prefix="arrowgate-shared-lake-"))
    try:
        dsn = cluster.create_database("lake")
        section = {"type": "ducklake", "catalog": f"postgres:{dsn}", "duckdb": "1.5.5",
                   "data_path": str(folder / "data") + "/"}
        with gateway.connect({"engines": {"lake": section}}) as gw:
            gw.execute("CREATE TABLE events (process INTEGER, seq INTEGER)").to_arrow()
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        started = time.monotonic()
        procs = [ctx.Process(target=worker, args=(section, p, args.commits, out))
                 for p in range(args.processes)]
        for p in procs:
            p.start()
        reports = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        elapsed = time.monotonic() - started
        with gateway.connect({"engines": {"lake": section}}) as gw:
            rows = gw.execute("SELECT count(*) AS n, count(DISTINCT (process, seq)) AS d "
                              "FROM events").to_arrow().to_pylist()[0]
        print(json.dumps({"processes": args.processes, "commits_each": args.commits,
                          "seconds": round(elapsed, 1), "rows": rows,
                          "expected": args.processes * args.commits,
                          "workers": sorted(reports, key=lambda r: r["process"])}, indent=1))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
