#!/usr/bin/env python3
"""What serving over Flight SQL costs: big answers, round trips, concurrent clients.

    .venv/bin/python bench/flight_bench.py --rows 10000000 --rounds 5

Three parts, each against ``arrowgate serve`` and a bare ``pyarrow.flight``
server, both in processes of their own on loopback:

1. **A big answer** (``--rows``; an integer, a double and a string per row),
   read to the end by a pyarrow.flight client, against the same query read
   in process (``gw.execute(...).reader()`` in a worker process of its own)
   and against the bare server, whose DoGet runs the same DuckDB query and
   returns its reader as a ``RecordBatchStream`` (the least a Flight server
   can do). Answers are checked first (row count and the sum of the integer
   column); then the contenders alternate round by round in rotated order,
   one warm-up, median of ``--rounds`` with the min-max spread. Peak memory
   is each server's (or the in-process worker's) high-water RSS.
2. **``SELECT 1`` round trips**, sequential, p50 and p99: GetFlightInfo then
   DoGet with pyarrow.flight (both servers), and a whole ADBC
   ``cursor.execute`` + fetch (which prepares, executes and closes: four
   calls) against arrowgate.
3. **Throughput** with 1, 8 and 32 client threads, each running
   ``--per-client`` queries of 1,000 rows: queries per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from gateway.flight import messages as M

ROOT = Path(__file__).resolve().parents[1]


def big(rows: int) -> str:
    return f"SELECT i, i * 0.5 AS x, 'trip-' || i AS label FROM range({rows}) t(i)"


# -- the contenders' processes ------------------------------------------------------
def bare_server() -> None:
    """A bare pyarrow.flight server: DoGet runs the ticket's SQL on DuckDB and streams it."""
    import duckdb

    con = duckdb.connect()

    class Bare(flight.FlightServerBase):
        def get_flight_info(self, context, descriptor):
            sql = descriptor.command
            return flight.FlightInfo(pa.schema([]), descriptor,
                                     [flight.FlightEndpoint(sql, [])], -1, -1)

        def do_get(self, context, ticket):
            reader = con.cursor().sql(ticket.ticket.decode()).to_arrow_reader()
            return flight.RecordBatchStream(reader)

    with Bare("grpc+tcp://127.0.0.1:0") as server:
        print(f"grpc+tcp://localhost:{server.port}", flush=True)
        sys.stdin.read()  # until the bench closes our stdin


def in_process_worker() -> None:
    """Reads SQL lines from stdin, runs each in process, answers a JSON line."""
    import gateway

    with gateway.connect() as gw:
        print("ready", flush=True)
        for line in sys.stdin:
            start = time.perf_counter()
            rows = total = 0
            for batch in gw.execute(line.strip()).reader():
                rows += batch.num_rows
                total += pc.sum(batch.column(0)).as_py() or 0
            print(json.dumps({"s": time.perf_counter() - start, "rows": rows, "sum": total,
                              "peak_mb": peak_mb(os.getpid())}), flush=True)


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(x for x in fh if x.startswith("VmHWM:")).split()[1]) / 1024


class Process:
    """A contender's process, reporting its address (or readiness) on its first line."""

    def __init__(self, args: list[str], cwd: Path | None = None, from_stderr: bool = False):
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE if from_stderr else None,
                                     text=True, cwd=cwd)
        stream = self.proc.stderr if from_stderr else self.proc.stdout
        assert stream is not None
        self.first = stream.readline().strip()
        if from_stderr:  # the query log: read it, or the server blocks on a full pipe
            threading.Thread(target=stream.read, daemon=True).start()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


# -- clients ------------------------------------------------------------------------
def read_flight_sql(client: flight.FlightClient, sql: str) -> tuple[int, int]:
    command = M.pack(M.CommandStatementQuery(query=sql))
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
    return drain(client.do_get(info.endpoints[0].ticket))


def read_bare(client: flight.FlightClient, sql: str) -> tuple[int, int]:
    info = client.get_flight_info(flight.FlightDescriptor.for_command(sql.encode()))
    return drain(client.do_get(info.endpoints[0].ticket))


def drain(reader: flight.FlightStreamReader) -> tuple[int, int]:
    rows = total = 0
    for chunk in reader:
        rows += chunk.data.num_rows
        total += pc.sum(chunk.data.column(0)).as_py() or 0
    return rows, total


def part_big(args: argparse.Namespace, arrowgate: Process, bare: Process,
             worker: Process) -> list[str]:
    sql = big(args.rows)
    ag = flight.connect(arrowgate.first)
    br = flight.connect(bare.first)

    def in_process() -> tuple[float, tuple[int, int]]:
        answer = ask_worker(worker, sql)
        return answer["s"], (int(answer["rows"]), int(answer["sum"]))

    def timed(fn: Callable[[], tuple[int, int]]) -> Callable[[], tuple[float, tuple[int, int]]]:
        def run() -> tuple[float, tuple[int, int]]:
            start = time.perf_counter()
            result = fn()
            return time.perf_counter() - start, result
        return run

    contenders = {"in process": in_process,
                  "arrowgate serve": timed(lambda: read_flight_sql(ag, sql)),
                  "bare pyarrow.flight": timed(lambda: read_bare(br, sql))}
    answers = {name: run()[1] for name, run in contenders.items()}  # check, and warm up
    expected = (args.rows, args.rows * (args.rows - 1) // 2)
    for name, got in answers.items():
        assert got == expected, f"{name} answered {got}, expected {expected}"
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(contenders[name]()[0])
    peaks = {"in process": peak_mb(worker.proc.pid), "arrowgate serve": peak_mb(arrowgate.proc.pid),
             "bare pyarrow.flight": peak_mb(bare.proc.pid)}
    base = statistics.median(times["bare pyarrow.flight"])
    lines = ["| contender | median s | min-max s | vs bare | rows/s | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in names:
        med = statistics.median(times[name])
        lines.append(f"| {name} | {med:.3f} | {min(times[name]):.3f}-{max(times[name]):.3f} | "
                     f"{med / base:.2f}x | {args.rows / med / 1e6:.1f}M | {peaks[name]:.0f} |")
    ag.close()
    br.close()
    return lines


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ask_worker(worker: Process, sql: str) -> dict[str, float]:
    """The in-process worker's answer to one statement: seconds, rows, sum, peak."""
    assert worker.proc.stdin is not None and worker.proc.stdout is not None
    worker.proc.stdin.write(sql + "\n")
    worker.proc.stdin.flush()
    return json.loads(worker.proc.stdout.readline())


def part_round_trip(args: argparse.Namespace, arrowgate: Process, bare: Process,
                    worker: Process) -> list[str]:
    import adbc_driver_flightsql.dbapi as dbapi

    ag = flight.connect(arrowgate.first)
    br = flight.connect(bare.first)
    conn = dbapi.connect(arrowgate.first, autocommit=True)
    cur = conn.cursor()

    def adbc() -> tuple[int, int]:
        cur.execute("SELECT 1 AS one")
        return len(cur.fetchall()), 1

    contenders = {"arrowgate serve, pyarrow.flight": lambda: read_flight_sql(ag, "SELECT 1"),
                  "bare pyarrow.flight": lambda: read_bare(br, "SELECT 1"),
                  "arrowgate serve, ADBC cursor": adbc,
                  "in process (gw.execute, no network)": lambda: (1, 1)}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(20):  # warm-up
        for fn in contenders.values():
            fn()
        ask_worker(worker, "SELECT 1")
    names = list(contenders)
    for i in range(args.trips):
        for name in names[i % len(names):] + names[:i % len(names)]:
            if name.startswith("in process"):  # timed inside the worker, without the pipe
                samples[name].append(ask_worker(worker, "SELECT 1")["s"] * 1000)
                continue
            start = time.perf_counter()
            contenders[name]()
            samples[name].append((time.perf_counter() - start) * 1000)
    lines = ["| client and server | p50 ms | p99 ms | calls |", "|---|---:|---:|---|"]
    calls = {"arrowgate serve, pyarrow.flight": "GetFlightInfo, DoGet",
             "bare pyarrow.flight": "GetFlightInfo, DoGet",
             "arrowgate serve, ADBC cursor": "Create/ClosePreparedStatement, GetFlightInfo, DoGet",
             "in process (gw.execute, no network)": "none"}
    for name in names:
        lines.append(f"| {name} | {percentile(samples[name], 0.5):.2f} | "
                     f"{percentile(samples[name], 0.99):.2f} | {calls[name]} |")
    cur.close()
    conn.close()
    ag.close()
    br.close()
    return lines


def part_throughput(args: argparse.Namespace, arrowgate: Process, bare: Process) -> list[str]:
    sql = "SELECT range AS i FROM range(1000)"
    lines = ["| clients | arrowgate serve q/s | bare pyarrow.flight q/s | ratio |",
             "|---:|---:|---:|---:|"]
    for clients in (1, 8, 32):
        rates = {}
        for name, location, read in (("arrowgate", arrowgate.first, read_flight_sql),
                                     ("bare", bare.first, read_bare)):
            barrier = threading.Barrier(clients)

            def one(_: int, location: str = location, read=read, barrier=barrier) -> None:
                with flight.connect(location) as client:
                    barrier.wait()
                    for _ in range(args.per_client):
                        assert read(client, sql)[0] == 1000

            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(one, range(clients)))
            rates[name] = clients * args.per_client / (time.perf_counter() - start)
        lines.append(f"| {clients} | {rates['arrowgate']:.0f} | {rates['bare']:.0f} | "
                     f"{rates['arrowgate'] / rates['bare']:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trips", type=int, default=500, help="round trips per contender")
    parser.add_argument("--per-client", type=int, default=50, help="queries per client thread")
    parser.add_argument("--parts", default="big,trips,throughput",
                        help="which parts to run, comma-separated: big, trips, throughput")
    parser.add_argument("--role", choices=["bare", "worker"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bare":
        return bare_server()
    if args.role == "worker":
        return in_process_worker()
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "arrowgate.toml").write_text('[engines.duckdb]\ntype = "duckdb"\n')
        arrowgate = Process([sys.executable, "-m", "gateway.cli", "serve", "--port", "0"],
                            cwd=Path(folder), from_stderr=True)
        arrowgate.first = arrowgate.first.split("listening on ")[1].split()[0]
        bare = Process([*me, "--role", "bare"])
        worker = Process([*me, "--role", "worker"])
        try:
            print(f"load average at start: {os.getloadavg()}", flush=True)
            parts = args.parts.split(",")
            if "big" in parts:
                print(f"\n{args.rows:,}-row answer, read to the end\n")
                print("\n".join(part_big(args, arrowgate, bare, worker)), flush=True)
            if "trips" in parts:
                print(f"\nSELECT 1 round trips ({args.trips} each)\n")
                print("\n".join(part_round_trip(args, arrowgate, bare, worker)), flush=True)
            if "throughput" in parts:
                print(f"\nthroughput, {args.per_client} queries of 1,000 rows per client\n")
                print("\n".join(part_throughput(args, arrowgate, bare)), flush=True)
            print(f"\nload average at end: {os.getloadavg()}")
        finally:
            for proc in (arrowgate, bare, worker):
                proc.close()


if __name__ == "__main__":
    main()
