#!/usr/bin/env python3
"""The replay of examples/upgrade against its floor, and its ratios against `arrowgate bench`'s.

    .venv/bin/python bench/replay_bench.py --statements 300 | cat

1. Capture: DuckDB 1.5.5 served with capture on (examples/upgrade/arrowgate.toml,
   the capture in a temporary folder) takes ``--statements`` statements from
   examples/upgrade/app.py; the service is stopped, so the capture is whole.
2. Replay: ``arrowgate shadow --primary duck201 --reference duck155 CAPTURE``,
   a process of its own; its wall time, start-up included.
3. The floor: two plain DuckDB interpreters (2.0.1, then 1.5.5 from arrowgate's
   managed install), one after the other, each a Python process of its own that
   mounts the same CSV file as a view and runs every captured statement with its
   parameters, reading each answer whole (``to_arrow_table``); the sum of
   their wall times, start-up included. The replay should stay within 1.2x of it.
4. The ratios on the same statements: per shape, one statement whose answers
   agreed, its parameters written in as literals (``arrowgate bench`` takes
   none), ``--rounds`` times: ``arrowgate shadow``'s duck201/duck155 ratio
   (median over median) beside ``arrowgate bench``'s
   (:func:`gateway.benchmark.runner.run_benchmark`, each engine in a process of its own).
   They should agree within 15%. The replay's own per-shape p50 ratios (with
   the captured parameters bound) are printed after them.

Each step runs ``--repeat`` times, alternating replay and floor; the median and
min-max are printed, of wall seconds and of the CPU seconds of the step's
processes (less sensitive to other work on the machine), with the load average
(this is a 2-core machine others share).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "upgrade"
CONFIG = EXAMPLE / "arrowgate.toml"
CSV = (EXAMPLE / ".." / "data" / "trips.csv").resolve()

INTERPRETER = r"""
import json, sys, time
import duckdb
statements = json.load(open(sys.argv[1]))
con = duckdb.connect(config={"threads": 2})
con.execute(f"CREATE VIEW trips AS FROM read_csv('{sys.argv[2]}')")
failed = 0
for sql, parameters in statements:
    try:
        con.sql(sql, params=parameters).to_arrow_table()
    except duckdb.Error:
        failed += 1
print(duckdb.__version__, len(statements), failed)
"""


def capture(folder: Path, statements: int) -> None:
    import gateway
    from gateway.flight.serve_config import ServeSettings
    from gateway.flight.server import FlightSqlServer

    with gateway.connect(CONFIG) as gw:
        settings = ServeSettings.from_config(gw.config, port=0)
        assert settings.capture is not None
        settings = dataclasses.replace(
            settings, capture=dataclasses.replace(settings.capture, folder=folder))
        with FlightSqlServer(gw, settings) as server:
            played = subprocess.run([sys.executable, str(EXAMPLE / "app.py"), server.location,
                                     "--statements", str(statements)],
                                    capture_output=True, text=True, timeout=600, check=True)
            print(played.stdout.strip())
            server.capture.flush()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def replay(folder: Path, out: Path) -> float:
    """``arrowgate shadow`` on a capture folder (or a corpus) in a process of its own: its
    wall time."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "--config", str(CONFIG),
                           "shadow", "--primary", "duck201", "--reference", "duck155",
                           str(folder), "--no-store", "--json", str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    seconds = time.perf_counter() - began
    if done.returncode not in (0, 1) or "Traceback" in done.stderr:
        raise RuntimeError(done.stderr[-2000:])
    return seconds


def floor(statements: Path, duck155: Path) -> tuple[float, list[str]]:
    began = time.perf_counter()
    lines = []
    for path in (None, duck155):
        env = dict(os.environ)
        if path is not None:
            env["PYTHONPATH"] = str(path)
        done = subprocess.run([sys.executable, "-c", INTERPRETER, str(statements), str(CSV)],
                              capture_output=True, text=True, timeout=1800, check=True, env=env)
        lines.append(done.stdout.strip())
    return time.perf_counter() - began, lines


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def inlined(sql: str, parameters: tuple[Any, ...] | None) -> str:
    """``sql`` with its ``?`` placeholders replaced by the values, as literals."""
    parts = sql.split("?")
    if parameters is None or len(parts) - 1 != len(parameters):
        return sql
    return "".join(a + b for a, b in zip(parts, [*map(literal, parameters), ""], strict=True))


def same_statements(queries: list[Any], report: dict[str, Any], rounds: int, where: Path
                    ) -> list[tuple[str, int, float | None, float | None]]:
    """Per shape, one statement whose answers agreed in the replay, its parameters written
    in as literals (``arrowgate bench`` takes none): ``arrowgate shadow``'s ratio on it
    (median primary ms over median reference ms of ``rounds`` runs, one after the other
    in one corpus) beside ``arrowgate bench``'s (``rounds`` rounds, each engine in a
    process of its own)."""
    from gateway.benchmark.runner import GatewayEngine, run_benchmark
    from gateway.sql.corpus import Query
    from gateway.sql.kinds import fingerprint

    chosen: dict[str, str] = {}
    seen: dict[str, int] = {}
    for q, entry in zip(queries, report["queries"], strict=True):
        shape = fingerprint(q.sql)
        seen[shape] = seen.get(shape, 0) + 1
        if entry["category"] == "match":
            chosen.setdefault(shape, inlined(q.sql, q.parameters))
    corpus = where / "same.sql"
    corpus.write_text("".join(f"-- name: s{i}_{n}\n{sql};\n" for i, sql in
                              enumerate(chosen.values()) for n in range(rounds)))
    out = where / "same.json"
    replay(corpus, out)
    timed: dict[str, tuple[list[float], list[float]]] = {}
    for entry in json.loads(out.read_text())["queries"]:
        if entry["primary_ms"] is not None and entry["reference_ms"] is not None:
            p, r = timed.setdefault(entry["name"].split("_")[0], ([], []))
            p.append(entry["primary_ms"])
            r.append(entry["reference_ms"])
    result = run_benchmark([GatewayEngine("duck201", str(CONFIG)),
                            GatewayEngine("duck155", str(CONFIG))],
                           [Query(name=f"s{i}", sql=sql, file="capture")
                            for i, sql in enumerate(chosen.values())],
                           rounds=rounds, baseline="duck155")
    rows = []
    for i, (shape, sql) in enumerate(chosen.items()):
        p, r = timed.get(f"s{i}", ([], []))
        mine = statistics.median(p) / statistics.median(r) if p and r else None
        rows.append((sql, seen[shape], mine, result.queries[i].ratio("duck201", "duck155")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="arrowgate bench's rounds")
    args = parser.parse_args()
    from gateway.capture.captured import replay_queries
    from gateway_duckdb.install import installed

    duck155 = installed("1.5.5")
    if duck155 is None:
        raise SystemExit("DuckDB 1.5.5 is not installed: arrowgate engines install 1.5.5")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="arrowgate-replay-") as where:
        folder, out, listed = Path(where) / "capture", Path(where) / "report.json", \
            Path(where) / "statements.json"
        capture(folder, args.statements)
        queries = replay_queries(folder)
        listed.write_text(json.dumps([[q.sql, None if q.parameters is None else
                                       list(q.parameters)] for q in queries]))
        replays, floors, cpu = [], [], {"replay": [], "floor": []}
        for i in range(args.repeat):
            for step in (("replay", "floor") if i % 2 == 0 else ("floor", "replay")):
                before = _children_cpu()
                if step == "replay":
                    replays.append(replay(folder, out))
                else:
                    seconds, lines = floor(listed, duck155.root)
                    floors.append(seconds)
                cpu[step].append(_children_cpu() - before)
        report = json.loads(out.read_text())

        def spread(xs: list[float]) -> str:
            return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

        print(f"\n{len(queries)} captured statements; the interpreters (version, statements, "
              f"failed): {'; '.join(lines)}")
        print(f"replay s: {spread(replays)}; two interpreters one after the other s: "
              f"{spread(floors)}; replay / interpreters: "
              f"{spread([r / f for r, f in zip(replays, floors, strict=True)])}x")
        print(f"CPU s (the processes' own, less sensitive to the load): replay "
              f"{spread(cpu['replay'])}; interpreters {spread(cpu['floor'])}; replay / "
              f"interpreters: {spread([r / f for r, f in zip(cpu['replay'], cpu['floor'], strict=True)])}x")
        print(report["summary"]["line"])
        rows = same_statements(queries, report, args.rounds, Path(where))
        print("\nThe same statements (one per shape, parameters as literals), "
              f"{args.rounds} runs each:\n\n"
              "| statement | seen | shadow ratio | bench ratio | shadow / bench |\n"
              "|---|---:|---:|---:|---:|")
        for sql, seen, mine, theirs in rows:
            agree = f"{mine / theirs:.2f}" if mine and theirs else "-"
            print(f"| `{sql[:70]}` | {seen} | {'-' if mine is None else f'{mine:.3f}'} | "
                  f"{'-' if theirs is None else f'{theirs:.3f}'} | {agree} |")
        print("\nThe replay's own ratios by shape (p50 over the captured runs, parameters "
              "bound):\n\n| shape | seen | replay ratio (p50) |\n|---|---:|---:|")
        for row in report["shapes"]:
            print(f"| `{row['sql'][:70]}` | {row['seen']} | {row['ratio'] or '-'} |")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
