#!/usr/bin/env python3
"""Whole processes, as users run them: ``arrowgate query`` against csvql and the DuckDB CLI.

    .venv/bin/python bench/csvql_bench.py                        # a smoke run, 20 000 rows
    .venv/bin/python bench/csvql_bench.py --rows 1000000 5000000 --rounds 5
    .venv/bin/python bench/csvql_bench.py --rows 1000000 --install runtime

Each contender is a program started once per query, its answer read as CSV
through a pipe: ``arrowgate --config F query --format csv SQL``, the DuckDB CLI
(``duckdb -csv -c``, over a view of ``read_csv_auto``), and csvql. The
queries are csvql's four taxi queries as its bench/bench_taxi.sh writes them
(bench/taxi.py, ``STRFTIME('%Y',pickup_datetime)`` included) on
``arrowgate data taxi`` output in bench/data/.

csvql is run as its own command-line program when one is on the PATH (or
``--csvql-bin``); it is a Zig build, on no package index. Otherwise as what
``pip install csvql-query`` gives (2.9.0, a Python API over ``libcsvql.so``,
with no console script): ``python -c "...csvql.query_csv(SQL)"`` in a venv of
its own (``--csvql-venv``, default /tmp/csvql-venv, made when missing).
(``pip install csvql`` gets an unrelated 2019 tool.) Its library needs glibc
2.38; where it does not load (Debian 12 has 2.36: "version `GLIBC_2.38' not
found"), csvql is skipped and the reason printed, unless ``--csvql-shim``: its only
2.38 symbol, ``fmod``, is then bound to the older glibc's (bench/elf_versions.py; the
same function, whose 2.38 version only dropped an error-handling wrapper).

Method (docs/benchmarks.md): every answer is checked against the DuckDB CLI's
first (rows compared as sets of text, numbers to 9 significant digits), and
a contender whose answer differs gets no figure for that query; that first
run is also the warm-up. Then rounds: in each, every query on every
contender, the order rotated round by round. Reported per contender: the
median wall time with the min-max spread, the median time to the first byte
of output, peak RSS (the kernel's VmHWM) and the largest RssAnon seen (both
from ``/proc/PID/status``, read every millisecond until the output ends;
RssAnon is anonymous memory, which mmap'd file pages are not), and ratios from the same run
(another's time over arrowgate's: above 1, arrowgate is faster). A start-up
table times the same programs on a one-row file beside
``python -c "import pyarrow"`` (arrowgate's interpreter), the floor the
issue measures a one-row query against.

arrowgate keeps each file's sniffed layout between processes (gateway_csv.
sniff_cache), as it does for users, so its timed runs read the layout the
answers' check kept; ``--sniff-cache off`` times every run with its sniff.

Each data file is first evicted from the page cache and read back, as a file
read from disk is (``--page-cache read-back``, bench/page_cache.py): how the
file came into the page cache changed a mapped scan of it threefold here.
``--page-cache written`` writes it again first, as a file a program has just
written is; ``as-is`` leaves it as it is. The share of each file in 2 MiB
folios is printed above its table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from page_cache import STATES, describe, settle
from taxi import CSVQL_QUERIES, DATA, quoted_taxi_file, taxi_file

ROOT = Path(__file__).resolve().parents[1]
#: the timed processes' environment: bytecode caches written and read, as an installed
#: package has them (sessions and CI often set PYTHONDONTWRITEBYTECODE; csv_bench.py too)
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
RESULTS = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent
CSVQL_PACKAGE = "csvql-query"
CSVQL_RUNNER = "import sys, csvql; sys.stdout.write(csvql.query_csv(sys.argv[1]))"


@dataclass
class Contender:
    """A program answering SQL on stdout as CSV with a header line."""

    name: str
    argv: list[str]  # the SQL is appended
    #: how this program names the file: FROM trips is replaced by this
    table: str = "trips"

    def command(self, sql: str) -> list[str]:
        return [*self.argv, sql.replace("FROM trips", f"FROM {self.table}")]


@dataclass
class Run:
    wall: float
    first_byte: float | None
    peak_rss: int  # bytes: VmHWM, last read before the output ended
    rss_anon: int  # bytes, the largest sampled
    output: bytes
    code: int
    stderr: str


@dataclass
class Figures:
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) or 0.0 for r in self.runs)

    def spread(self, attr: str) -> tuple[float, float]:
        values = [getattr(r, attr) or 0.0 for r in self.runs]
        return min(values), max(values)


def run_once(argv: list[str]) -> Run:
    """Start ``argv``, read its stdout through a pipe to the end, and measure it."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=USER_ENV)
        memory: dict[str, int] = {}
        done = threading.Event()
        sampler = threading.Thread(target=_sample_memory, args=(proc.pid, memory, done),
                                   daemon=True)
        sampler.start()
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        first_byte = None
        while chunk := os.read(fd, 1 << 16):
            if first_byte is None:
                first_byte = time.perf_counter() - started
            chunks.append(chunk)
        done.set()
        sampler.join()
        _, status = os.waitpid(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        proc.stdout.close()
        err.seek(0)
        return Run(wall, first_byte, memory.get("VmHWM", 0), memory.get("RssAnon", 0),
                   b"".join(chunks),
                   proc.returncode, err.read().decode(errors="replace"))


def _sample_memory(pid: int, memory: dict[str, int], done: threading.Event) -> None:
    """Until ``done`` (or ``pid`` exits): its VmHWM, and the largest RssAnon seen, in bytes.

    (``wait4``'s ru_maxrss would count the pages of this process that the child
    held between fork and exec.)
    """
    path = f"/proc/{pid}/status"
    while not done.is_set():
        try:
            with open(path, "rb") as f:
                for line in f:
                    key = line.split(b":")[0].decode()
                    if key in ("VmHWM", "RssAnon"):
                        memory[key] = max(memory.get(key, 0), int(line.split()[1]) * 1024)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            return
        time.sleep(0.001)


def answer(output: bytes) -> list[tuple[str, ...]]:
    """The rows of a CSV answer, header dropped, sorted, numbers to 9 significant digits."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(output.decode())))[1:]
    return sorted(tuple(_cell(c) for c in row) for row in rows)


def _cell(text: str) -> str:
    try:
        return f"{float(text):.9g}"
    except ValueError:
        return text


def contenders(path: Path, config: Path, arrowgate_bin: Path,
               csvql: list[str] | None) -> list[Contender]:
    duckdb = shutil.which("duckdb", path=str(BIN)) or shutil.which("duckdb")
    if duckdb is None:
        sys.exit("no duckdb CLI: pip install duckdb-cli (in the dev extra)")
    found = [Contender("duckdb-cli", [duckdb, "-csv", "-c"],
                       table=f"read_csv_auto('{path}')"),
             Contender("arrowgate", [str(arrowgate_bin / "arrowgate"), "--config", str(config),
                                     "query", "--format", "csv"])]
    if csvql is not None:
        found.append(Contender("csvql", csvql, table=f"'{path}'"))
    return found


def find_csvql(binary: str | None, venv: Path, shim: bool = False) \
        -> tuple[list[str] | None, str]:
    """csvql's argv before the SQL, and what it is; or None and why it cannot run here.

    ``shim``: install into ``VENV-shim`` and loosen its library's ``fmod@GLIBC_2.38``
    (bench/elf_versions.py) so that it loads on an older glibc."""
    binary = binary or shutil.which("csvql")
    if binary:
        return [binary], f"csvql program {binary}"
    if shim:
        venv = venv.with_name(venv.name + "-shim")
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing {CSVQL_PACKAGE} into {venv}", file=sys.stderr, flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True)
        if made.returncode == 0:
            made = subprocess.run([str(python), "-m", "pip", "install", "--quiet", CSVQL_PACKAGE],
                                  capture_output=True, text=True)
        if made.returncode != 0:
            return None, f"pip install {CSVQL_PACKAGE} failed: {made.stderr.strip()[-300:]}"
        if shim:
            from elf_versions import loosen

            lib = next(venv.glob("lib/python3*/site-packages/csvql/libcsvql.so"))
            print(f"loosening fmod@GLIBC_2.38 in {lib}: {loosen(lib, {'fmod'}, 'GLIBC_2.38')}",
                  file=sys.stderr, flush=True)
    probe = subprocess.run([str(python), "-c", "import csvql._loader as l; l.load(); "
                            f"from importlib.metadata import version; "
                            f"print(version('{CSVQL_PACKAGE}'))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return None, (f"{CSVQL_PACKAGE} does not load here: "
                      + probe.stderr.strip().splitlines()[-1]
                      + ("" if shim else " (--csvql-shim loosens its fmod@GLIBC_2.38)"))
    return [str(python), "-c", CSVQL_RUNNER], \
        f"{CSVQL_PACKAGE} {probe.stdout.strip()} through python -c (no csvql program on PATH)" \
        + (", its fmod@GLIBC_2.38 bound to this glibc's fmod" if shim else "")


def measure(queries: list[tuple[str, str]], group: list[Contender], rounds: int,
            reference: str) -> tuple[dict[str, dict[str, Figures]], dict[str, dict[str, str]]]:
    """Check answers (the warm-up), then ``rounds`` rotated rounds; figures and refusals."""
    figures = {q: {c.name: Figures() for c in group} for q, _ in queries}
    refused: dict[str, dict[str, str]] = {q: {} for q, _ in queries}
    for q, sql in queries:
        runs = {c.name: run_once(c.command(sql)) for c in group}
        expected = answer(runs[reference].output) if runs[reference].code == 0 else None
        for c in group:
            r = runs[c.name]
            if r.code != 0:
                refused[q][c.name] = f"exit {r.code}: {r.stderr.strip()[-200:]}"
            elif expected is None:
                refused[q][c.name] = f"no reference: {reference} failed"
            elif answer(r.output) != expected:
                refused[q][c.name] = "answer differs from " + reference
    for round_no in range(rounds):
        for i, (q, sql) in enumerate(queries):
            shift = (round_no + i) % len(group)
            for c in group[shift:] + group[:shift]:
                if c.name not in refused[q]:
                    figures[q][c.name].runs.append(run_once(c.command(sql)))
    return figures, refused


def table(title: str, figures: dict[str, dict[str, Figures]], refused: dict[str, dict[str, str]],
          names: list[str], ours: str) -> str:
    others = [n for n in names if n != ours]
    head = ["query", *(f"{n} ms (min-max)" for n in names),
            *(f"{n} / {ours}" for n in others), *(f"{n} first byte ms" for n in names),
            *(f"{n} peak RSS / RssAnon MB" for n in names)]
    lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for q, by_name in figures.items():
        cells = [q]
        for n in names:
            f = by_name[n]
            if n in refused[q] or not f.runs:
                cells.append(refused[q].get(n, "-"))
                continue
            low, high = f.spread("wall")
            cells.append(f"{f.median('wall') * 1000:.0f} ({low * 1000:.0f}-{high * 1000:.0f})")
        mine = by_name[ours]
        for n in others:
            f = by_name[n]
            if not f.runs or not mine.runs:
                cells.append("-")
                continue
            (lo, hi), (mlo, mhi) = f.spread("wall"), mine.spread("wall")
            cells.append(f"**{f.median('wall') / mine.median('wall'):.2f}x** "
                         f"({lo / mhi:.2f}-{hi / mlo:.2f})")
        cells += [f"{by_name[n].median('first_byte') * 1000:.0f}" if by_name[n].runs else "-"
                  for n in names]
        cells += [f"{by_name[n].median('peak_rss') / 2**20:.0f} / "
                  f"{by_name[n].median('rss_anon') / 2**20:.0f}" if by_name[n].runs else "-"
                  for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def startup_queries() -> tuple[list[tuple[str, str]], Path]:
    path = DATA / "one_row.csv"
    DATA.mkdir(parents=True, exist_ok=True)
    path.write_text("a,b\n1,x\n")
    return [("one-row query", "SELECT a, b FROM trips")], path


def toml(path: Path) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    config = RESULTS / f"csvql_bench_{path.stem}.toml"
    config.write_text(f'[engines.csv]\ntype = "csv"\n\n[sources.trips]\npath = "{path}"\n')
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000],
                        help="file sizes (the issue's: 1000000 5000000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--install", choices=["dev", "runtime"], default="dev",
                        help="whose arrowgate: this venv's, or a regular install with runtime "
                             "dependencies only (bench/.runtime-venv, as bench/csv_bench.py)")
    parser.add_argument("--csvql-bin", help="csvql's own program (default: csvql on PATH)")
    parser.add_argument("--csvql-venv", type=Path, default=Path("/tmp/csvql-venv"))
    parser.add_argument("--csvql-shim", action="store_true",
                        help="where csvql's library needs glibc 2.38 and this one is older: "
                             "install it into CSVQL_VENV-shim with its one 2.38 symbol (fmod) "
                             "bound to this glibc's (bench/elf_versions.py)")
    parser.add_argument("--sniff-cache", choices=["on", "off"], default="on",
                        help="arrowgate's layouts kept between processes (gateway_csv."
                             "sniff_cache; on by default, as users run it: the answers' check "
                             "fills it), or off: every run sniffs its file's head")
    parser.add_argument("--page-cache", choices=STATES, default="read-back",
                        help="each data file evicted from the page cache and read back before "
                             "its rounds, as a file read from disk (the default), written again, "
                             "as a file just written, or left as it is (bench/page_cache.py)")
    parser.add_argument("--quoted", action="store_true",
                        help="the taxi file with one row in 500 holding a quoted value "
                             "(bench/taxi.py quoted_taxi_file) instead of the plain one")
    args = parser.parse_args()
    if args.sniff_cache == "off":
        USER_ENV["ARROWGATE_SNIFF_CACHE"] = "off"
    arrowgate_bin = BIN
    if args.install == "runtime":
        from csv_bench import runtime_install

        arrowgate_bin = runtime_install()
    csvql, what = find_csvql(args.csvql_bin, args.csvql_venv, args.csvql_shim)
    print(f"csvql: {what}" if csvql else f"csvql skipped: {what}", flush=True)
    print(f"arrowgate: {arrowgate_bin / 'arrowgate'}; load average {os.getloadavg()[0]:.1f} "
          "at the start", flush=True)
    results = {}
    queries = [(q.name, q.sql) for q in CSVQL_QUERIES]
    for rows in args.rows:
        path = quoted_taxi_file(rows) if args.quoted else taxi_file(rows)
        settle(path, args.page_cache)
        print(f"page cache ({args.page_cache}): {describe(path)}", flush=True)
        group = contenders(path, toml(path), arrowgate_bin, csvql)
        figures, refused = measure(queries, group, args.rounds, reference="duckdb-cli")
        print(table(f"{rows:,} rows{' (quoted)' if args.quoted else ''}, {args.rounds} rounds",
                    figures, refused,
                    [c.name for c in group], "arrowgate"), "\n", flush=True)
        results[str(rows)] = _raw(figures, refused)
    one_row, path = startup_queries()
    group = [*contenders(path, toml(path), arrowgate_bin, csvql),
             Contender("import pyarrow", [str(arrowgate_bin / "python"), "-c",
                                          "import sys, pyarrow; print('a,b'); print('1,x')",
                                          "--"])]
    figures, refused = measure(one_row, group, max(args.rounds, 5), reference="duckdb-cli")
    print(table("Start-up: a one-row file, beside python -c 'import pyarrow'", figures, refused,
                [c.name for c in group], "arrowgate"), flush=True)
    results["one_row"] = _raw(figures, refused)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    (RESULTS / "csvql_bench.json").write_text(json.dumps(results, indent=1))


def _raw(figures: dict[str, dict[str, Figures]], refused: dict[str, dict[str, str]]) -> dict:
    return {q: {n: {"refused": refused[q].get(n),
                    "runs": [{"wall": r.wall, "first_byte": r.first_byte, "peak_rss": r.peak_rss,
                              "rss_anon": r.rss_anon} for r in f.runs]}
                for n, f in by_name.items()}
            for q, by_name in figures.items()}


if __name__ == "__main__":
    main()
