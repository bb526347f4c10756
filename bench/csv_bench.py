#!/usr/bin/env python3
"""The csv engine against DuckDB on the taxi queries Q01-Q04, by the method in docs/benchmarks.md.

    .venv/bin/python bench/csv_bench.py --rows 1000000 5000000 --mode inprocess
    .venv/bin/python bench/csv_bench.py --rows 1000000 5000000 --mode process
    .venv/bin/python bench/csv_bench.py --mode startup
    .venv/bin/python bench/csv_bench.py --mode phases --install dev  # CPU per step of a one-row query
    .venv/bin/python bench/csv_bench.py --mode process --install dev   # the dev venv's arrowgate
    .venv/bin/python bench/csv_bench.py --rows 1000000 --mode csvql
    .venv/bin/python bench/csv_bench.py --rows 1000000 --mode csvql --forms-only --rounds 15

``inprocess``: the Python API, each engine warm in its own worker process,
against DuckDB's engine reading the same raw file (``read_csv``, sniffed, not
loaded). ``process``: the whole ``arrowgate query`` command against the DuckDB
CLI (``duckdb -csv``), both started once per query with their output read
through a pipe. ``startup``: ``arrowgate query`` on a one-row file; ``phases``: the CPU
of each of its steps.
``csvql``: csvql's own four taxi queries as its benchmark writes them
(``STRFTIME('%Y', pickup_datetime)`` in Q03 and Q04), in process, on DuckDB,
the csv engine, the csv engine with ``year(pickup_datetime)`` written
instead, and csvql itself (the ``csvql-query`` package, when it is installed
and loads; it is no dependency of this project).

The two whole-process modes run the ``arrowgate`` that a user's
``pip install`` gives (``--install runtime``, the default): a regular,
non-editable install of this tree with its runtime dependencies only, in
bench/.runtime-venv (made or refreshed when the tree changed). The dev venv's
``arrowgate`` (``--install dev``) is slower to start: its dev extra brings
numpy, which pyarrow imports whenever it is installed.

Timing comes from :mod:`gateway.benchmark.runner` (answers checked first, engines
alternating in rotated order, one warm-up, median of the rounds with the
min-max spread, peak RSS per engine per query). The data is
``arrowgate data taxi`` output in bench/data/ (made when missing; a real
NYC-taxi extract with the same header can be put there instead), evicted from
the page cache and read back before the inprocess and process modes time it
(``--page-cache``, bench/page_cache.py). Raw results go to bench/results/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from page_cache import STATES, describe, settle
from taxi import CSVQL_QUERIES, DATA, taxi_file
from taxi import QUERIES as TAXI_QUERIES

from gateway.benchmark.runner import Command, Contender, GatewayEngine, run_benchmark
from gateway.sql.corpus import Query

if TYPE_CHECKING:
    import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent
RUNTIME_VENV = ROOT / "bench" / ".runtime-venv"
#: the bin folder whose ``arrowgate`` the whole-process modes run (set by --install)
ARROWGATE_BIN = BIN


def runtime_install() -> Path:
    """bench/.runtime-venv with this tree installed as a user installs it; its bin folder."""
    digest = hashlib.sha256()
    for top in ("gateway", "plugins", "pyproject.toml", "setup.py"):
        for path in sorted((ROOT / top).rglob("*") if (ROOT / top).is_dir() else [ROOT / top]):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so":
                digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    stamp = RUNTIME_VENV / ".tree-digest"
    bindir = RUNTIME_VENV / ("Scripts" if os.name == "nt" else "bin")
    if not stamp.exists() or stamp.read_text() != digest.hexdigest():
        print(f"installing this tree into {RUNTIME_VENV} (runtime dependencies only)",
              file=sys.stderr, flush=True)
        if not (bindir / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(RUNTIME_VENV)], check=True)
        subprocess.run([str(bindir / "python"), "-m", "pip", "install", "--quiet",
                        "--force-reinstall", "--no-deps", str(ROOT)], check=True)
        subprocess.run([str(bindir / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
                       check=True)
        stamp.write_text(digest.hexdigest())
    return bindir

QUERIES = [Query("Q00_baseline", "SELECT 1 AS one"), *TAXI_QUERIES]


def config(path: Path) -> dict[str, object]:
    return {"engines": {"duckdb": {"type": "duckdb"}, "csv": {"type": "csv"}},
            "sources": {"trips": {"path": str(path)}}}


def toml(path: Path) -> Path:
    cfg = RESULTS / f"csv_bench_{path.stem}.toml"
    cfg.write_text(f'default_engine = "csv"\n[engines.csv]\ntype = "csv"\n'
                   f'[sources.trips]\npath = "{path}"\n')
    return cfg


def inprocess(rows: int, rounds: int) -> str:
    path = taxi_file(rows)
    cfg = config(path)
    report = run_benchmark([GatewayEngine("duckdb", cfg), GatewayEngine("csv", cfg)], QUERIES,
                           rounds=rounds)
    report.write_json(RESULTS / f"csv_inprocess_{rows}.json")
    return summary(report, rows, "duckdb", "csv")


def whole_process(rows: int, rounds: int) -> str:
    path = taxi_file(rows)
    duckdb_cli = shutil.which("duckdb", path=str(BIN)) or "duckdb"
    contenders = [
        Command("duckdb-cli", [duckdb_cli, "-csv"],
                setup=f"CREATE VIEW trips AS SELECT * FROM read_csv_auto('{path}');"),
        Command("arrowgate", [str(ARROWGATE_BIN / "arrowgate"), "--config", str(toml(path)), "query",
                              "--format", "csv"]),
    ]
    report = run_benchmark(contenders, QUERIES[1:], rounds=rounds)
    report.write_json(RESULTS / f"csv_process_{rows}.json")
    return summary(report, rows, "duckdb-cli", "arrowgate")


@dataclass
class YearForm(GatewayEngine):
    """The csv engine answering csvql's queries with ``year(pickup_datetime)`` where csvql
    writes ``STRFTIME('%Y',pickup_datetime)``. The year comes back as text (a cast of the
    answer's 50-2,600 rows, timed with the query) so its answers are checked against the
    other engines' like any contender's."""

    def run(self, sql: str) -> pa.Table:
        import pyarrow as pa

        table = super().run(sql.replace("STRFTIME('%Y',pickup_datetime)",
                                        "year(pickup_datetime)"))
        if "y" in table.column_names:
            at = table.column_names.index("y")
            table = table.set_column(at, "y", table.column("y").cast(pa.string()))
        return table


@dataclass
class Csvql(Contender):
    """csvql (the ``csvql-query`` package, a Zig engine) on the same file, through its
    Python API. Its answer is CSV text, read into Arrow inside the timed run; the year
    column ``y`` stays text, as ``STRFTIME`` gives it."""

    path: str
    name: str = "csvql"

    def start(self) -> str:
        from csvql._loader import load

        load()
        from importlib.metadata import version

        return f"csvql {version('csvql-query')}"

    def run(self, sql: str) -> pa.Table:
        import io

        import csvql
        import pyarrow as pa
        import pyarrow.csv as pacsv

        text = csvql.query_csv(sql.replace("FROM trips", f"FROM '{self.path}'"))
        return pacsv.read_csv(io.BytesIO(text.encode()),
                              convert_options=pacsv.ConvertOptions(column_types={"y": pa.string()}))


def csvql_available() -> str | None:
    """None when csvql loads here; otherwise why not."""
    try:
        from csvql._loader import load

        load()
    except (ImportError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def csvql_forms(rows: int, rounds: int, forms_only: bool) -> str:
    """The csvql mode's table; ``forms_only``: only the csv engine's two forms of Q03 and
    Q04, for many rounds without the slower engines between them."""
    path = taxi_file(rows)
    cfg = config(path)
    contenders: list[Contender] = [GatewayEngine("csv", cfg),
                                   YearForm("csv", cfg, label="csv year()")]
    missing = "--forms-only" if forms_only else csvql_available()
    if not forms_only:
        contenders.insert(0, GatewayEngine("duckdb", cfg))
        if missing is None:
            contenders.append(Csvql(str(path)))
    queries = CSVQL_QUERIES[2:] if forms_only else CSVQL_QUERIES
    report = run_benchmark(contenders, queries, rounds=rounds)
    report.write_json(RESULTS / f"csv_csvql_{rows}{'_forms' if forms_only else ''}.json")
    names = [c.name for c in contenders]
    lines = []
    for q in report.queries:
        if q.status != "timed":
            lines.append(f"| {q.query.name} {rows / 10**6:g}M | {q.status}: "
                         + "; ".join(f"{e}: {v.message}" for e, v in q.verdicts.items()
                                     if not v.ok) + "; ".join(q.errors.values()) + " |")
            continue
        t = q.timings
        cells = [f"{q.query.name} {rows / 10**6:g}M"]
        cells += [f"{t[n].median * 1000:.0f} ({t[n].low * 1000:.0f}-{t[n].high * 1000:.0f})"
                  for n in names]
        cells += [_ratio(t[other], t["csv"]) for other in names if other != "csv"]
        cells += [_mb(t[n].peak_rss, None) for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    others = [n for n in names if n != "csv"]
    head = ("| query | " + " | ".join(f"{n} ms (min-max)" for n in names) + " | "
            + " | ".join(f"csv vs {n}" for n in others) + " | "
            + " | ".join(f"{n} peak MB" for n in names) + " |")
    rule = "|" + "---|" * (1 + 2 * len(names) + len(others))
    note = "" if missing is None or forms_only else f"\ncsvql skipped: {missing}"
    return "\n".join([head, rule, *lines]) + note


def _ratio(base: object, ours: object) -> str:
    """base's median over ours (above 1: ours is faster), with the spread of the rounds."""
    from gateway.benchmark.runner import EngineTiming

    assert isinstance(base, EngineTiming) and isinstance(ours, EngineTiming)
    return (f"**{base.median / ours.median:.2f}x** ({base.low / ours.high:.2f}-"
            f"{base.high / ours.low:.2f})")


def summary(report: object, rows: int, base: str, ours: str) -> str:
    """Our table: speed-up over the baseline with its spread, and peak RSS above the baseline's."""
    from gateway.benchmark.runner import BenchReport

    assert isinstance(report, BenchReport)
    lines = []
    floor = {e: None for e in (base, ours)}
    for q in report.queries:
        if q.query.name == "Q00_baseline" and q.status == "timed":
            floor = {e: q.timings[e].peak_rss for e in (base, ours)}
    for q in report.queries:
        if q.query.name == "Q00_baseline":
            continue
        if q.status != "timed":
            lines.append(f"| {q.query.name} {rows // 10**6}M | {q.status}: "
                         + "; ".join(f"{e}: {v.message}" for e, v in q.verdicts.items()
                                     if not v.ok) + "; ".join(q.errors.values()) + " |")
            continue
        b, o = q.timings[base], q.timings[ours]
        speedup = b.median / o.median
        # spread of the ratio: slowest ours against fastest base, and the other way round
        low, high = b.low / o.high, b.high / o.low
        cells = [f"{q.query.name} {rows / 10**6:g}M",
                 f"{b.median * 1000:.0f} ({b.low * 1000:.0f}-{b.high * 1000:.0f})",
                 f"{o.median * 1000:.0f} ({o.low * 1000:.0f}-{o.high * 1000:.0f})",
                 f"**{speedup:.1f}x** ({low:.1f}-{high:.1f})",
                 _mb(b.peak_rss, floor[base]), _mb(o.peak_rss, floor[ours])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mb(peak: int | None, floor: int | None) -> str:
    if peak is None:
        return "-"
    text = f"{peak / 2**20:.0f}"
    if floor is not None:
        text += f" (+{max(0, peak - floor) / 2**20:.0f})"
    return text


#: The environment of the timed processes: an installed package has its bytecode cached,
#: but sessions and CI often set PYTHONDONTWRITEBYTECODE, and then an editable install
#: (``--install dev``) compiled every gateway module on every run (60 ms of CPU of a
#: one-row query at load 11, docs/benchmarks.md). Without it, the warm-up round writes them.
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


#: What an ``arrowgate query`` the csv engine's planner reads (anything but a projection
#: of columns, gateway_csv.shape) imports before running a line of its own: the plugin
#: manager, sqlglot with the DuckDB dialect (which imports importlib.metadata), and pyarrow.
DEPENDENCY_FLOOR = ("import pluggy, pyarrow, sqlglot; "
                    "sqlglot.parse_one('SELECT a, b FROM trips', read='duckdb')")
#: pyarrow and the standard library modules any command line of this shape imports (its
#: arguments, a TOML configuration, paths, threads, plugins): what is left of issue #23's
#: 1.5x for the command's own work (not dataclasses since gateway.records)
STDLIB_FLOOR = "import pyarrow, argparse, tomllib, pathlib, typing, enum, threading, pluggy"


def startup(runs: int) -> str:
    """Wall and CPU time of ``arrowgate query`` on a one-row file, output through a pipe,
    beside the bare interpreter, ``import pyarrow`` (issue #23's yardstick: at most 1.5x)
    and the planner's dependency floor, alternating.

    CPU time (user + system of the child) is given beside wall time because on
    a shared machine the wall time of a short command is mostly waiting for a
    core; with a core to itself, the two are about equal.
    """
    path = DATA / "one_row.csv"
    DATA.mkdir(parents=True, exist_ok=True)
    path.write_text("a,b\n1,x\n")
    cfg = toml(path)
    python = str(ARROWGATE_BIN / "python")
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import pyarrow'": [python, "-c", "import pyarrow"],
        "import pluggy+sqlglot(duckdb)+pyarrow": [python, "-c", DEPENDENCY_FLOOR],
        "import pyarrow+argparse+tomllib+pathlib+pluggy": [python, "-c", STDLIB_FLOOR],
        "arrowgate query": [str(ARROWGATE_BIN / "arrowgate"), "--config", str(cfg), "query",
                            "--format", "csv", "SELECT a, b FROM trips"],
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    load = os.getloadavg()[0]
    for run in range(runs + 1):
        names = list(commands)
        for name in names[run % len(names):] + names[:run % len(names)]:
            before = os.times()
            started = time.perf_counter()
            done = subprocess.run(commands[name], capture_output=True, check=True, env=USER_ENV)
            wall = time.perf_counter() - started
            after = os.times()
            if name == "arrowgate query":
                assert done.stdout.strip().splitlines()[-1] in (b"1,x", b'1,"x"'), done.stdout
            if run:  # the first round warms the page cache
                walls[name].append(wall)
                cpus[name].append(after.children_user - before.children_user
                                  + after.children_system - before.children_system)
    lines = [f"{runs} rounds, commands alternating; load average {load:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end",
             "| command | wall median ms (min-max) | CPU median ms (min-max) |", "|---|---|---|"]
    for name in commands:
        w, c = walls[name], cpus[name]
        lines.append(f"| {name} | {statistics.median(w) * 1000:.0f} ({min(w) * 1000:.0f}-"
                     f"{max(w) * 1000:.0f}) | {statistics.median(c) * 1000:.0f} "
                     f"({min(c) * 1000:.0f}-{max(c) * 1000:.0f}) |")
    floor = "python -c 'import pyarrow'"
    stdlib = "import pyarrow+argparse+tomllib+pathlib+pluggy"
    lines.append(f"\nimport pyarrow and the standard modules / import pyarrow: wall "
                 f"{statistics.median(walls[stdlib]) / statistics.median(walls[floor]):.2f}x")
    lines.append(f"arrowgate query / import pyarrow: wall "
                 f"{statistics.median(walls['arrowgate query']) / statistics.median(walls[floor]):.2f}x, "
                 f"CPU {statistics.median(cpus['arrowgate query']) / statistics.median(cpus[floor]):.2f}x "
                 "(target 1.5x)")
    return "\n".join(lines)


#: One ``arrowgate query`` of a one-row file, its steps run one by one as the CLI runs them,
#: each step's CPU time reported (argv: the config file).
PHASES = r"""
import json, sys, time
marks = [("start", time.process_time())]
def mark(name): marks.append((name, time.process_time()))
import pyarrow
mark("import pyarrow")
import gateway.cli.main as cli
mark("import gateway.cli.main")
parser = cli.build_parser()
mark("build the parser (commands, plugins)")
args = parser.parse_args(["--config", sys.argv[1], "query", "--format", "csv",
                          "SELECT a, b FROM trips"])
from gateway.cli.commands import open_gateway
from gateway.cli.startup import one_statement
gw = open_gateway(args)
mark("parse arguments, open the gateway (config, core)")
with one_statement():  # as the query command runs a statement nothing shadows
    result = gw.execute(args.sql)
mark("execute (engine start, planning, sniff, scan)")
from gateway.output.writers import write
write(result.reader(), "csv", sys.stdout.buffer)
sys.stdout.buffer.flush()
mark("write the csv")
print(json.dumps([(m[0], (m[1] - a[1]) * 1000) for m, a in zip(marks[1:], marks)]),
      file=sys.stderr)
"""


def phases(runs: int) -> str:
    """CPU milliseconds of each step of a one-row ``arrowgate query``, medians of ``runs``
    fresh processes (pyarrow imported first, so the steps after it are arrowgate's own)."""
    path = DATA / "one_row.csv"
    DATA.mkdir(parents=True, exist_ok=True)
    path.write_text("a,b\n1,x\n")
    cfg = toml(path)
    steps: dict[str, list[float]] = {}
    for run in range(runs + 1):
        done = subprocess.run([str(ARROWGATE_BIN / "python"), "-c", PHASES, str(cfg)],
                              capture_output=True, check=True, env=USER_ENV, text=True)
        if run:  # the first run writes the bytecode caches
            for name, ms in json.loads(done.stderr.strip().splitlines()[-1]):
                steps.setdefault(name, []).append(ms)
    lines = [f"{runs} runs; load average {os.getloadavg()[0]:.1f} at the end",
             "| step | CPU median ms (min-max) |", "|---|---|"]
    lines += [f"| {name} | {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f}) |"
              for name, v in steps.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", choices=["inprocess", "process", "startup", "phases", "csvql"],
                        default="inprocess")
    parser.add_argument("--forms-only", action="store_true",
                        help="csvql mode: only the csv engine's two forms of Q03 and Q04")
    parser.add_argument("--install", choices=["runtime", "dev"], default="runtime",
                        help="whose arrowgate the process and startup modes run: a regular "
                             "install with runtime dependencies only, or this dev venv's")
    parser.add_argument("--page-cache", choices=STATES, default="read-back",
                        help="inprocess and process modes: each data file evicted from the page "
                             "cache and read back first, as a file read from disk (the "
                             "default), written again, or left as it is (bench/page_cache.py)")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    global ARROWGATE_BIN
    if args.mode in ("process", "startup", "phases") and args.install == "runtime":
        ARROWGATE_BIN = runtime_install()
    if args.mode == "startup":
        print(startup(max(args.rounds, 5)))
        return
    if args.mode == "phases":
        print(phases(max(args.rounds, 5)))
        return
    if args.mode == "csvql":
        for rows in args.rows:
            print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
            print(csvql_forms(rows, args.rounds, args.forms_only), flush=True)
            print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
        return
    run = inprocess if args.mode == "inprocess" else whole_process
    base, ours = ("DuckDB", "csv") if args.mode == "inprocess" else ("duckdb -csv", "arrowgate")
    print(f"| query | {base} ms (min-max) | {ours} ms (min-max) | speed-up (spread) | "
          f"{base} peak MB (+above baseline) | {ours} peak MB (+above baseline) |")
    print("|---|---|---|---|---|---|")
    for rows in args.rows:
        settle(taxi_file(rows), args.page_cache)
        print(f"page cache ({args.page_cache}): {describe(taxi_file(rows))}", file=sys.stderr,
              flush=True)
        print(run(rows, args.rounds), flush=True)


if __name__ == "__main__":
    main()
