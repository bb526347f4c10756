#!/usr/bin/env python3
"""What serving over Flight SQL costs: big answers, round trips, concurrent clients.

    .venv/bin/python bench/flight_bench.py --rows 10000000 --rounds 5

Three parts, each against ``arrowgate serve`` and a bare ``pyarrow.flight``
server, both in processes of their own on loopback. The bare server speaks
the least of Flight SQL the ADBC driver needs (``CreatePreparedStatement``
answering a handle and no schemas, ``GetFlightInfo`` of a statement or a
prepared statement, which runs it, ``DoGet``, ``ClosePreparedStatement``),
so the same clients read from both:

1. **A big answer** (``--rows``): a DuckDB table of an id, a double, a
   10-character string and a timestamp, in a database file the bench writes.
   ``arrowgate serve`` answers ``SELECT * FROM trips`` from that file; the
   bare server holds the same table in memory and streams it; a third, as bare,
   streams DuckDB's reader of it instead (the least a server doing the same
   work can do). All are read to
   the end by the ADBC driver (``fetch_record_batch``), beside DuckDB's own
   ``to_arrow_table()`` and ``to_arrow_reader()`` (read to the end: what
   producing the answer costs DuckDB alone) in a worker process. Answers are
   checked first (rows and the sum of the id column); then the contenders
   alternate round by round in rotated order, one warm-up, median of
   ``--rounds`` with the min-max spread, and the ratio to the bare server.
   Beside the time, the CPU seconds each read cost the server's process and
   the client's (this one), which a loaded machine inflates less than wall
   time, and from them the least time the read could take on this machine's
   cores if every part overlapped perfectly (their sum over the cores, or the
   larger part), and the server's page faults (minor) per read. Peak memory
   is each process's high-water RSS. The streaming server and the in-process
   worker tune the memory allocator as ``arrowgate serve`` does
   (:mod:`gateway.flight.allocator`), so they stay the least such a server
   can do; the bare server holding the table is left as it is.
2. **``SELECT 1`` round trips**, sequential, p50 and p99 of ``--trips``: each
   call ADBC makes (``CreatePreparedStatement``, ``GetFlightInfo`` of the
   prepared statement, ``DoGet``, ``ClosePreparedStatement``), sent one by one
   with pyarrow.flight and timed apart, then the whole ADBC DB-API
   ``execute`` + ``fetchall`` on a new cursor (those four calls) and on one
   cursor reused (ADBC prepares the same text once: ``GetFlightInfo`` and
   ``DoGet``), each against both servers.
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
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from gateway.benchmark.runner import Spread, rotated
from gateway.flight import protobuf as M
from gateway.flight.allocator import keep_freed_memory

ROOT = Path(__file__).resolve().parents[1]


BIG = "SELECT * FROM trips"
ONE = "SELECT 1 AS one"


def write_table(path: Path, rows: int) -> None:
    """The big answer's table: an id, a double, a 10-character string and a timestamp."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"""CREATE TABLE trips AS SELECT i AS id, i * 0.5 AS fare,
                        printf('trip-%05d', i % 100000) AS label,
                        TIMESTAMP '2026-01-01' + to_seconds(i) AS pickup
                        FROM range({rows}) t(i)""")


# -- the contenders' processes ------------------------------------------------------
def bare_server(database: str, stream: bool = False, threads: int | None = None,
                batch: int = 122_880, ahead: bool = False, tuned: bool | None = None,
                large: bool = False) -> None:
    """A bare pyarrow.flight server: the big table in memory, any other statement on DuckDB;
    with ``stream``, the big table too is DuckDB's reader, streamed as DuckDB makes it.

    The streaming server's settings (``bench/flight_floor_bench.py`` tries them):
    DuckDB's ``threads`` (None: its default, the cores), the rows per batch asked of
    its reader, ``ahead`` (the batches read a batch or two ahead of the transport in a
    thread, :func:`gateway.flight.ahead.read_ahead`, as the service does), ``tuned``
    (the memory allocator tuned as ``arrowgate serve`` tunes it; None: when streaming)
    and ``large`` (DuckDB's ``arrow_large_buffer_size``: large strings, another schema).
    """
    import secrets

    import duckdb

    from gateway.flight.ahead import read_ahead

    if stream if tuned is None else tuned:
        keep_freed_memory()
    con = duckdb.connect(database, read_only=True)
    if threads is not None:
        con.execute(f"SET threads = {threads}")
    if large:
        con.execute("SET arrow_large_buffer_size = true")
    table = None if stream else con.sql(BIG).to_arrow_table()
    prepared: dict[bytes, str] = {}
    answers: dict[bytes, pa.Table | pa.RecordBatchReader] = {}

    class Bare(flight.FlightServerBase):
        def get_flight_info(self, context, descriptor):
            command = M.unpack_command(descriptor.command)
            sql = command.query if isinstance(command, M.CommandStatementQuery) else \
                prepared[command.prepared_statement_handle]
            answer = table if sql == BIG and table is not None else \
                con.cursor().sql(sql).to_arrow_reader(batch)
            handle = secrets.token_bytes(16)
            answers[handle] = answer
            ticket = M.pack(M.TicketStatementQuery(statement_handle=handle))
            return flight.FlightInfo(answer.schema, descriptor,
                                     [flight.FlightEndpoint(ticket, [])], -1, -1)

        def do_get(self, context, ticket):
            answer = answers.pop(M.unpack_command(ticket.ticket).statement_handle)
            if ahead and isinstance(answer, pa.RecordBatchReader):
                return flight.GeneratorStream(answer.schema, read_ahead(answer, stop=lambda: None))
            return flight.RecordBatchStream(answer)

        def do_action(self, context, action):
            body = action.body.to_pybytes()
            if action.type == "CreatePreparedStatement":
                handle = secrets.token_bytes(16)
                prepared[handle] = M.unpack(M.ActionCreatePreparedStatementRequest, body).query
                return [M.pack(M.ActionCreatePreparedStatementResult(
                    prepared_statement_handle=handle))]
            if action.type == "ClosePreparedStatement":
                request = M.unpack(M.ActionClosePreparedStatementRequest, body)
                prepared.pop(request.prepared_statement_handle, None)
                return []
            raise flight.FlightServerError(f"no action {action.type}")

    with Bare("grpc+tcp://127.0.0.1:0") as server:
        print(f"grpc+tcp://localhost:{server.port}", flush=True)
        sys.stdin.read()  # until the bench closes our stdin


def in_process_worker(database: str, tuned: bool = True, threads: int | None = None) -> None:
    """Reads lines ``table SQL`` or ``reader SQL`` from stdin, runs each with DuckDB's own
    ``to_arrow_table`` or reads its ``to_arrow_reader`` (batches of DuckDB's row-group
    size, as the service asks) to the end, and answers a JSON line."""
    import duckdb

    if tuned:
        keep_freed_memory()
    con = duckdb.connect(database, read_only=True)
    if threads is not None:
        con.execute(f"SET threads = {threads}")
    print("ready", flush=True)
    for line in sys.stdin:
        how, sql = line.strip().split(" ", 1)
        faults = minor_faults(os.getpid())
        start, cpu = time.perf_counter(), time.process_time()
        if how == "table":
            table = con.sql(sql).to_arrow_table()
            rows, total = table.num_rows, pc.sum(table.column(0)).as_py() or 0
            del table
        else:
            rows = total = 0
            reader = con.sql(sql).to_arrow_reader(122_880)
            for batch in reader:  # the sum outside the timing would keep every batch
                rows += batch.num_rows
                total += pc.sum(batch.column(0)).as_py() or 0
            reader.close()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(json.dumps({"s": seconds, "cpu": cpu, "rows": rows, "sum": total,
                          "faults": minor_faults(os.getpid()) - faults,
                          "peak_mb": peak_mb(os.getpid())}), flush=True)


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) the process ``pid`` has used so far, all its threads."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    """Page faults the process ``pid`` has taken so far that read no file (fresh pages)."""
    return int(_stat(pid)[7])


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(x for x in fh if x.startswith("VmHWM:")).split()[1]) / 1024


def served_table(folder: Path, rows: int) -> Path:
    """The bench's DuckDB table of ``rows`` rows in ``folder``, and an arrowgate.toml
    there serving it read-only; the database's path."""
    database = folder / "trips.duckdb"
    write_table(database, rows)
    (folder / "arrowgate.toml").write_text(
        f'[engines.duckdb]\ntype = "duckdb"\ndatabase = "{database}"\nread_only = true\n')
    return database


def arrowgate_serve(folder: Path, env: dict[str, str] | None = None) -> Process:
    """``arrowgate serve`` on a free loopback port with ``folder``'s arrowgate.toml;
    its ``first`` is the address."""
    serve = Process([sys.executable, "-m", "gateway.cli", "serve", "--port", "0"],
                    cwd=folder, from_stderr=True, env=env)
    serve.first = serve.first.split("listening on ")[1].split()[0]
    return serve


class Process:
    """A contender's process, reporting its address (or readiness) on its first line."""

    def __init__(self, args: list[str], cwd: Path | None = None, from_stderr: bool = False,
                 env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE if from_stderr else None,
                                     text=True, cwd=cwd,
                                     env={**os.environ, **env} if env else None)
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


def drain(reader: flight.FlightStreamReader) -> tuple[int, int]:
    rows = total = 0
    for chunk in reader:
        rows += chunk.data.num_rows
        total += pc.sum(chunk.data.column(0)).as_py() or 0
    return rows, total


def read_adbc(conn: Any, sql: str) -> tuple[int, int]:
    """``sql`` on a new ADBC cursor, read batch by batch: rows and the sum of column 0."""
    rows = total = 0
    with conn.cursor() as cur:
        cur.execute(sql)
        for batch in cur.fetch_record_batch():
            rows += batch.num_rows
            total += pc.sum(batch.column(0)).as_py() or 0
    return rows, total


#: a big-answer contender's round: seconds, (server CPU s, client CPU s, server page
#: faults), (rows, sum)
Round = tuple[float, tuple[float, float, int], tuple[int, int]]


def timed(fn: Callable[[], tuple[int, int]], server: int) -> Callable[[], Round]:
    """``fn`` timed: its wall seconds, the CPU seconds of the process ``server`` and of
    this one (the client) while it ran, and the server's page faults."""
    def run() -> Round:
        faults = minor_faults(server)
        server_cpu, client_cpu = cpu_seconds(server), time.process_time()
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        return (seconds, (cpu_seconds(server) - server_cpu, time.process_time() - client_cpu,
                          minor_faults(server) - faults), result)
    return run


TABLE, READER = "DuckDB to_arrow_table, in process", "DuckDB to_arrow_reader, in process"
STREAMING = "bare pyarrow.flight streaming DuckDB's reader"


def part_big(args: argparse.Namespace, servers: dict[str, Process], worker: Process) -> list[str]:
    import adbc_driver_flightsql.dbapi as dbapi

    conns = {name: dbapi.connect(proc.first, autocommit=True) for name, proc in servers.items()}

    def in_process(how: str) -> Callable[[], Round]:
        def run() -> Round:
            answer = ask_worker(worker, f"{how} {BIG}")
            return (answer["s"], (answer["cpu"], 0.0, int(answer["faults"])),
                    (int(answer["rows"]), int(answer["sum"])))
        return run

    contenders: dict[str, Callable[[], Round]] = {
        f"{name}, ADBC": timed(lambda conn=conn: read_adbc(conn, BIG), servers[name].proc.pid)
        for name, conn in conns.items()}
    contenders[TABLE] = in_process("table")
    contenders[READER] = in_process("reader")
    answers = {name: run()[2] for name, run in contenders.items()}  # check, and warm up
    expected = (args.rows, args.rows * (args.rows - 1) // 2)
    for name, got in answers.items():
        assert got == expected, f"{name} answered {got}, expected {expected}"
    times: dict[str, list[float]] = {name: [] for name in contenders}
    cpus: dict[str, list[tuple[float, float, int]]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(args.rounds):
        for name in rotated(names, r):
            seconds, cpu, _ = contenders[name]()
            times[name].append(seconds)
            cpus[name].append(cpu)
    peaks = {f"{name}, ADBC": peak_mb(proc.proc.pid) for name, proc in servers.items()}
    peaks[TABLE] = peaks[READER] = peak_mb(worker.proc.pid)
    spreads = {name: Spread(values) for name, values in times.items()}
    base = spreads["bare pyarrow.flight, ADBC"]
    cores = os.cpu_count() or 1
    lines = ["| contender | median s | min-max s | vs bare | rows/s | server CPU s | "
             "client CPU s | least s on "
             f"{cores} cores | server page faults | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        spread = spreads[name]
        server = statistics.median(c[0] for c in cpus[name])
        client = statistics.median(c[1] for c in cpus[name])
        faults = statistics.median(c[2] for c in cpus[name])
        least = f"{max((server + client) / cores, client):.3f}" if client else ""
        lines.append(f"| {name} | {spread.median:.3f} | {spread.low:.3f}-{spread.high:.3f} | "
                     f"{spread.ratio(base):.2f}x | {args.rows / spread.median / 1e6:.1f}M | "
                     f"{server:.3f} | {client:.3f} | {least} | {faults:,.0f} | "
                     f"{peaks[name]:.0f} |")
    ratio = spreads["arrowgate serve, ADBC"].ratio(base)
    lines.append(f"\narrowgate serve / bare pyarrow.flight: **{ratio:.2f}x** (target 1.15x)")
    lines.append("\n(CPU s and page faults are medians of the rounds; for the in-process rows, "
                 "the worker's own. "
                 "\"least s\": the read's CPU over the cores, or the client's, if larger: no "
                 "overlap of production and transport gets below it)")
    for conn in conns.values():
        conn.close()
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


CALLS = ["CreatePreparedStatement", "GetFlightInfo (prepared)", "DoGet",
         "ClosePreparedStatement"]


def prepared_round(client: flight.FlightClient, sql: str) -> list[float]:
    """The four calls ADBC makes for one statement, one by one: each one's milliseconds."""
    ms: list[float] = []
    start = time.perf_counter()
    body = M.pack(M.ActionCreatePreparedStatementRequest(query=sql))
    result = next(iter(client.do_action(flight.Action("CreatePreparedStatement", body))))
    handle = M.unpack(M.ActionCreatePreparedStatementResult,
                      result.body.to_pybytes()).prepared_statement_handle
    ms.append(time.perf_counter())
    command = M.pack(M.CommandPreparedStatementQuery(prepared_statement_handle=handle))
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
    ms.append(time.perf_counter())
    assert client.do_get(info.endpoints[0].ticket).read_all().num_rows == 1
    ms.append(time.perf_counter())
    close = M.pack(M.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
    list(client.do_action(flight.Action("ClosePreparedStatement", close)))
    ms.append(time.perf_counter())
    return [(b - a) * 1000 for a, b in zip([start, *ms[:-1]], ms, strict=True)]


def part_round_trip(args: argparse.Namespace, servers: dict[str, Process]) -> list[str]:
    import adbc_driver_flightsql.dbapi as dbapi

    clients = {name: flight.connect(proc.first) for name, proc in servers.items()}
    conns = {name: dbapi.connect(proc.first, autocommit=True) for name, proc in servers.items()}
    reused = {name: conn.cursor() for name, conn in conns.items()}

    def new_cursor(conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(ONE)
            assert cur.fetchall() == [(1,)]

    def same_cursor(cur: Any) -> None:
        cur.execute(ONE)
        assert cur.fetchall() == [(1,)]

    # rows: (measure, calls it makes); one sampler per server and measure
    samples: dict[tuple[str, str], list[float]] = {}
    runs: dict[str, Callable[[str], list[float]]] = {
        "calls": lambda name: prepared_round(clients[name], ONE),
        "ADBC execute + fetchall, new cursor": lambda name: [_ms(new_cursor, conns[name])],
        "ADBC execute + fetchall, one cursor": lambda name: [_ms(same_cursor, reused[name])],
    }
    for _ in range(20):  # warm-up
        for run in runs.values():
            for name in servers:
                run(name)
    order = [(run, name) for run in runs for name in servers]
    for i in range(args.trips):
        for run, name in order[i % len(order):] + order[:i % len(order)]:
            for label, ms in zip(CALLS if run == "calls" else [run], runs[run](name),
                                 strict=True):
                samples.setdefault((label, name), []).append(ms)
    lines = ["| call | arrowgate p50 ms | bare p50 ms | p50 ratio | arrowgate p99 ms | "
             "bare p99 ms |", "|---|---:|---:|---:|---:|---:|"]
    for label in [*CALLS, *list(runs)[1:]]:
        ours, bare = samples[(label, "arrowgate serve")], samples[(label, "bare pyarrow.flight")]
        lines.append(f"| {label} | {percentile(ours, 0.5):.2f} | {percentile(bare, 0.5):.2f} | "
                     f"{percentile(ours, 0.5) / percentile(bare, 0.5):.2f}x | "
                     f"{percentile(ours, 0.99):.2f} | {percentile(bare, 0.99):.2f} |")
    lines.append("\n(ADBC reuses a cursor's prepared statement for the same text: on one "
                 "cursor only GetFlightInfo and DoGet are sent; the target is the new cursor's "
                 "1.3x)")
    for cur in reused.values():
        cur.close()
    for conn in conns.values():
        conn.close()
    for client in clients.values():
        client.close()
    return lines


def _ms(fn: Callable[[Any], None], arg: Any) -> float:
    start = time.perf_counter()
    fn(arg)
    return (time.perf_counter() - start) * 1000


def part_throughput(args: argparse.Namespace, servers: dict[str, Process]) -> list[str]:
    sql = "SELECT range AS i FROM range(1000)"
    lines = ["| clients | arrowgate serve q/s | bare pyarrow.flight q/s | ratio |",
             "|---:|---:|---:|---:|"]
    for clients in (1, 8, 32):
        rates = {}
        for name, proc in servers.items():
            barrier = threading.Barrier(clients)

            def one(_: int, location: str = proc.first, barrier=barrier) -> None:
                with flight.connect(location) as client:
                    barrier.wait()
                    for _ in range(args.per_client):
                        assert read_flight_sql(client, sql)[0] == 1000

            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(one, range(clients)))
            rates[name] = clients * args.per_client / (time.perf_counter() - start)
        ours, bare = rates["arrowgate serve"], rates["bare pyarrow.flight"]
        lines.append(f"| {clients} | {ours:.0f} | {bare:.0f} | {ours / bare:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trips", type=int, default=500, help="round trips per contender")
    parser.add_argument("--per-client", type=int, default=50, help="queries per client thread")
    parser.add_argument("--parts", default="big,trips,throughput",
                        help="which parts to run, comma-separated: big, trips, throughput")
    parser.add_argument("--role", choices=["bare", "streaming", "worker"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role in ("bare", "streaming"):
        return bare_server(args.database, stream=args.role == "streaming")
    if args.role == "worker":
        return in_process_worker(args.database)
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as folder:
        database = served_table(Path(folder), args.rows)
        arrowgate = arrowgate_serve(Path(folder))
        bare = Process([*me, "--role", "bare", "--database", str(database)])
        streaming = Process([*me, "--role", "streaming", "--database", str(database)])
        worker = Process([*me, "--role", "worker", "--database", str(database)])
        servers = {"arrowgate serve": arrowgate, "bare pyarrow.flight": bare}
        try:
            print(f"load average at start: {os.getloadavg()}", flush=True)
            parts = args.parts.split(",")
            if "big" in parts:
                print(f"\n{args.rows:,}-row answer (`{BIG}`: id, double, 10-character string, "
                      "timestamp), read to the end\n")
                print("\n".join(part_big(args, {**servers, STREAMING: streaming}, worker)),
                      flush=True)
            if "trips" in parts:
                print(f"\n`{ONE}` round trips ({args.trips} each)\n")
                print("\n".join(part_round_trip(args, servers)), flush=True)
            if "throughput" in parts:
                print(f"\nthroughput, {args.per_client} queries of 1,000 rows per client\n")
                print("\n".join(part_throughput(args, servers)), flush=True)
            print(f"\nload average at end: {os.getloadavg()}")
        finally:
            for proc in (arrowgate, bare, streaming, worker):
                proc.close()


if __name__ == "__main__":
    main()
