#!/usr/bin/env python3
"""What capture costs a client of `arrowgate serve`: ``SELECT 1`` p50 and a big answer.

    .venv/bin/python bench/capture_bench.py --rows 1000000 --rounds 5 | cat

Three services run side by side, each in a process of its own on loopback,
the same in-memory DuckDB engine behind each: capture off, capture with
``sample = 0.01``, and capture with ``sample = 1.0`` (into a temporary
folder). A pyarrow.flight client asks each in turn, rotating the order round
by round, after one warm-up round: ``--n`` sequential ``SELECT 1`` round trips
(GetFlightInfo + DoGet; p50 per round) and one ``--rows``-row answer read to
its end. Answers are checked first (1, and the row count and sum of the big
answer). The table shows the median of the rounds with the min-max spread,
each capture's ratio to capture off from the same rounds, and each server's
peak RSS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.flight as flight

from gateway.flight import protobuf as M

ROOT = Path(__file__).resolve().parents[1]

SERVER = r"""
import sys, gateway
from gateway.flight.server import FlightSqlServer
from gateway.flight.serve_config import ServeSettings
sample, folder = sys.argv[1], sys.argv[2]
serve = {"port": 0}
if sample != "off":
    serve["capture"] = {"folder": folder, "sample": float(sample)}
with gateway.connect({"engines": {"duck": {"type": "duckdb", "settings": {"threads": 1}}},
                      "serve": serve}) as gw:
    with FlightSqlServer(gw, ServeSettings.from_config(gw.config, port=0)) as server:
        print(server.location, flush=True)
        sys.stdin.read()
"""


def big(rows: int) -> str:
    return f"SELECT i, i * 0.5 AS x, 'trip-' || i AS label FROM range({rows}) t(i)"


class Server:
    def __init__(self, sample: str, folder: Path):
        self.name = "capture off" if sample == "off" else f"sample {sample}"
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, sample, str(folder)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.location = self.proc.stdout.readline().strip()
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # the query log
        self.client = flight.connect(self.location)

    def read(self, sql: str) -> tuple[int, int]:
        command = M.pack(M.CommandStatementQuery(query=sql))
        info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command))
        rows = total = 0
        for chunk in self.client.do_get(info.endpoints[0].ticket):
            rows += chunk.data.num_rows
            total += pc.sum(chunk.data.column(0)).as_py() or 0
        return rows, total

    def peak_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            return int(next(x for x in fh if x.startswith("VmHWM:")).split()[1]) / 1024

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--n", type=int, default=500, help="SELECT 1 round trips per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="arrowgate-capture-bench-"))
    servers = [Server(s, folder / s) for s in ("off", "0.01", "1.0")]
    try:
        want = (args.rows, args.rows * (args.rows - 1) // 2)
        for server in servers:
            assert server.read("SELECT 1 AS x") == (1, 1), server.name
            assert server.read(big(args.rows)) == want, server.name
        print(f"answers checked; load average {os.getloadavg()[0]:.2f}", flush=True)
        p50: dict[str, list[float]] = {s.name: [] for s in servers}
        answer: dict[str, list[float]] = {s.name: [] for s in servers}
        order = list(servers)
        for r in range(args.rounds + 1):
            for server in order:
                times = []
                for _ in range(args.n):
                    started = time.perf_counter()
                    server.read("SELECT 1 AS x")
                    times.append(time.perf_counter() - started)
                started = time.perf_counter()
                server.read(big(args.rows))
                whole = time.perf_counter() - started
                if r:
                    p50[server.name].append(statistics.median(times) * 1000)
                    answer[server.name].append(whole)
            order = order[1:] + order[:1]
        print(f"load average {os.getloadavg()[0]:.2f}\n")
        print(f"| service | SELECT 1 p50 ms (spread) | ratio | {args.rows:,}-row answer s "
              "(spread) | ratio | peak RSS MB |")
        print("|---|---|---|---|---|---|")
        base_p50 = statistics.median(p50["capture off"])
        base_big = statistics.median(answer["capture off"])
        for server in servers:
            a, b = p50[server.name], answer[server.name]
            print(f"| {server.name} | {statistics.median(a):.3f} ({min(a):.3f}-{max(a):.3f}) | "
                  f"{statistics.median(a) / base_p50:.3f}x | {statistics.median(b):.3f} "
                  f"({min(b):.3f}-{max(b):.3f}) | {statistics.median(b) / base_big:.3f}x | "
                  f"{server.peak_mb():.0f} |")
    finally:
        for server in servers:
            server.close()


if __name__ == "__main__":
    main()
