#!/usr/bin/env python3
"""The least CPU a Flight server spends producing a 10M-row DuckDB answer: the floor under
``flight_bench.py``'s target.

    .venv/bin/python bench/flight_floor_bench.py --rows 10000000 --rounds 7

The target compares ``arrowgate serve`` with a bare ``pyarrow.flight`` server
that holds the answer in memory and only sends it. A server that must produce
the answer with DuckDB spends DuckDB's work on top, on the same cores as the
client. This bench finds the cheapest such server it can: bare servers
(``flight_bench.bare_server``) streaming DuckDB's ``to_arrow_reader`` with one
setting changed at a time (DuckDB's threads, the memory allocator tuned as
``arrowgate serve`` tunes it, the batches read ahead of the transport in a
thread as the service does, large string buffers), beside the bare server
holding the table and ``arrowgate serve`` itself (and a second one whose
allocator is left as glibc sets it: the service before it tuned it), each in a
process of its own on loopback and read to the end by the ADBC driver; and DuckDB's reader read to
the end in a process of its own (production alone), with and without the
allocator tuned and with one or the default threads.

Answers are checked first (rows and the sum of the id column), then the
contenders alternate round by round in rotated order, one warm-up, the median of
``--rounds``. Reported per contender: wall seconds and the ratio to the bare
server, the CPU seconds of the server's process and of the client (this one),
their sum over the cores (no overlap of production and transport gets below
it: the ADBC client works on more than one thread, so its CPU alone is no
bound), the server's page faults, peak RSS. The floor is the least of that sum
among the streaming servers that answer with the same schema, over the bare
server's median; and, added up, DuckDB's cheapest production in process plus
the bare server's and its client's CPU, over the cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flight_bench import (
    BIG,
    Process,
    Round,
    arrowgate_serve,
    ask_worker,
    bare_server,
    in_process_worker,
    peak_mb,
    read_adbc,
    served_table,
    timed,
)

from gateway.benchmark.runner import Spread, rotated

BARE = "bare pyarrow.flight holding the table"
SERVE = "arrowgate serve"
UNTUNED = "arrowgate serve, allocator as glibc leaves it"
#: an allocator setting glibc has anyway (its default tcache count): set in the
#: environment, it makes ``arrowgate serve`` leave the allocator alone
GLIBC_DEFAULTS = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}
#: streaming servers: name -> bare_server's settings
STREAMING: dict[str, dict[str, Any]] = {
    "streaming, DuckDB's defaults": {"tuned": False},
    "streaming, allocator tuned": {"tuned": True},
    "streaming, allocator tuned, read ahead": {"tuned": True, "ahead": True},
    "streaming, allocator tuned, threads = 1": {"tuned": True, "threads": 1},
    "streaming, allocator tuned, threads = 1, read ahead": {"tuned": True, "threads": 1,
                                                            "ahead": True},
    "streaming, allocator tuned, large buffers (large_string: another schema)":
        {"tuned": True, "large": True},
}
#: in-process readers: name -> in_process_worker's settings
IN_PROCESS: dict[str, dict[str, Any]] = {
    "DuckDB reader in process, DuckDB's defaults": {"tuned": False},
    "DuckDB reader in process, allocator tuned": {"tuned": True},
    "DuckDB reader in process, allocator tuned, threads = 1": {"tuned": True, "threads": 1},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:
        kind, name = args.role.split(":", 1)
        if kind == "stream":
            return bare_server(args.database, stream=True, **STREAMING[name])
        if kind == "worker":
            return in_process_worker(args.database, **IN_PROCESS[name])
        return bare_server(args.database)
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as folder:
        database = served_table(Path(folder), args.rows)
        servers = {BARE: Process([*me, "--role", "bare:", "--database", str(database)])}
        for name, env in ((SERVE, None), (UNTUNED, GLIBC_DEFAULTS)):
            servers[name] = arrowgate_serve(Path(folder), env)
        servers.update({name: Process([*me, "--role", f"stream:{name}", "--database",
                                       str(database)]) for name in STREAMING})
        workers = {name: Process([*me, "--role", f"worker:{name}", "--database", str(database)])
                   for name in IN_PROCESS}
        try:
            print(f"load average at start: {os.getloadavg()}", flush=True)
            print("\n".join(measure(args, servers, workers)), flush=True)
            print(f"\nload average at end: {os.getloadavg()}")
        finally:
            for proc in [*servers.values(), *workers.values()]:
                proc.close()


def measure(args: argparse.Namespace, servers: dict[str, Process],
            workers: dict[str, Process]) -> list[str]:
    import adbc_driver_flightsql.dbapi as dbapi

    conns = {name: dbapi.connect(proc.first, autocommit=True) for name, proc in servers.items()}
    contenders: dict[str, Callable[[], Round]] = {
        name: timed(lambda conn=conn: read_adbc(conn, BIG), servers[name].proc.pid)
        for name, conn in conns.items()}

    def in_process(worker: Process) -> Callable[[], Round]:
        def run() -> Round:
            answer = ask_worker(worker, f"reader {BIG}")
            return (answer["s"], (answer["cpu"], 0.0, int(answer["faults"])),
                    (int(answer["rows"]), int(answer["sum"])))
        return run

    contenders.update({name: in_process(worker) for name, worker in workers.items()})
    expected = (args.rows, args.rows * (args.rows - 1) // 2)
    for name, run in contenders.items():  # check, and warm up
        got = run()[2]
        assert got == expected, f"{name} answered {got}, expected {expected}"
    rounds: dict[str, list[Round]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(args.rounds):
        for name in rotated(names, r):
            rounds[name].append(contenders[name]())
    for conn in conns.values():
        conn.close()
    cores = os.cpu_count() or 1
    base = Spread([r[0] for r in rounds[BARE]])
    lines = [f"\n{args.rows:,}-row answer (`{BIG}`), read to the end; {cores} cores\n",
             "| contender | median s | min-max s | vs bare | server CPU s | client CPU s | "
             f"CPU over {cores} cores s | server page faults | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    cpu: dict[str, tuple[float, float]] = {}
    for name in names:
        spread = Spread([r[0] for r in rounds[name]])
        cpu[name] = (statistics.median(r[1][0] for r in rounds[name]),
                     statistics.median(r[1][1] for r in rounds[name]))
        server, client = cpu[name]
        faults = statistics.median(r[1][2] for r in rounds[name])
        proc = servers.get(name) or workers[name]
        over = f"{(server + client) / cores:.3f}" if name in servers else ""
        lines.append(f"| {name} | {spread.median:.3f} | {spread.low:.3f}-{spread.high:.3f} | "
                     f"{spread.ratio(base):.2f}x | {server:.3f} | {client:.3f} | {over} | "
                     f"{faults:,.0f} | {peak_mb(proc.proc.pid):.0f} |")

    def bound(name: str) -> float:
        return sum(cpu[name]) / cores

    same = [name for name in STREAMING if "another schema" not in name]
    floor = min(same, key=bound)
    production = min(IN_PROCESS, key=lambda name: cpu[name][0])
    added = (cpu[production][0] + sum(cpu[BARE])) / cores
    lines.append(
        f"\nThe floor, measured: the cheapest server streaming DuckDB's reader ({floor}) and "
        f"its client used {sum(cpu[floor]):.3f} CPU s, {bound(floor):.3f} s on {cores} cores "
        f"at best: {bound(floor) / base.median:.2f}x the bare server's {base.median:.3f} s. "
        f"Added up: DuckDB producing the answer ({production}, {cpu[production][0]:.3f} s) "
        f"with the bare server sending it and its client receiving it "
        f"({sum(cpu[BARE]):.3f} s) is {added:.3f} s on {cores} cores: "
        f"{added / base.median:.2f}x. arrowgate serve and its client used "
        f"{sum(cpu[SERVE]):.3f} CPU s: {bound(SERVE):.3f} s, {bound(SERVE) / base.median:.2f}x.")
    lines.append("\n(CPU s and page faults are medians of the rounds; for the in-process rows, "
                 "the reading process's own. \"CPU over cores\": the read's CPU, server and "
                 "client, over the cores: no overlap of production and transport gets below it)")
    return lines


if __name__ == "__main__":
    main()
