#!/usr/bin/env python3
"""The field's raw-CSV benchmarks: h2o groupby q1-q10 and TPC-H Q1, Q6 and a count of lineitem, arrowgate against DuckDB, Polars, DataFusion and chDB.

    .venv/bin/pip install falsa tpchgen-cli                      # the generators, bench only
    .venv/bin/pip install --target bench/data/peers polars datafusion chdb
    .venv/bin/python bench/field_bench.py --generate             # the data, once, into bench/data/
    .venv/bin/python bench/field_bench.py [--h2o PATH] [--lineitem PATH] [--rounds 5]
        [--queries q1,q2,...,Q1,Q6,count] [--engines arrowgate,duckdb,polars,datafusion,chdb]
        [--peers bench/data/peers] [--base OTHER/.venv/bin/python]

The peers live in a folder of their own (--peers, put on the peers' PYTHONPATH only):
in the project's venv, datafusion's dependency cloudpickle is imported by every
``import pyarrow`` (pyarrow looks for it), which changes arrowgate's start and fails
the test that a query imports no dataclass.

The data: ``falsa groupby --size SMALL --data-format CSV`` (1e7 rows, 672 MB) and
``tpchgen-cli csv -s 1 --tables lineitem`` (SF1 lineitem, 766 MB); --generate writes
them to bench/data/ (git-ignored). Any CSV of the same columns will do (a head of
either file validates the run quickly).

Every query runs in a fresh process per engine that imports the engine, reads the
CSV in place and turns the answer into an Arrow table (the whole process is timed,
its peak RSS read from ``wait4``). arrowgate is its csv engine with ``fallback =
"duck"`` (the table says which queries it answered itself); DuckDB is
``read_csv``, Polars ``scan_csv`` and its SQL context, DataFusion ``register_csv``,
chDB the ``file()`` table function. An engine that is not installed is skipped with a
line saying so. The SQL is that of DuckDB's and DataFusion's db-benchmark entries
(chDB's own names where ClickHouse's differ: its ``median`` is approximate).

Answers first: every engine's answer (written to an Arrow file by one untimed run,
which is also the warm-up) is checked against DuckDB's, rows sorted, numbers to 1e-6
relative (NaN and NULL alike); an engine whose answer differs gets no time for that query. Then the
engines alternate, the order rotated each round; printed: per query and engine the
median seconds with the min-max spread, the median CPU seconds (user and system, from
``wait4``: steadier than seconds on a shared machine) and the peak RSS, and the best peer's median
over arrowgate's (above 1 means arrowgate is faster), as a markdown table. With
``--base`` another arrowgate install (its venv's python: the main branch, say) runs
as one more engine, so a change's before and after are measured in the same run.

Every child runs with ``OPENBLAS_NUM_THREADS=1`` (unless the caller sets it): the
project's venv holds numpy (pandas and matplotlib, dev dependencies, bring it), which
``import pyarrow`` imports, and numpy's OpenBLAS starts a thread per core that spins
for about 0.1 s of CPU, beside the engine's own threads on a 2-core machine (9% of
q4's samples in arrowgate, which imports pyarrow first; a peer that imports it only for
its answer pays it after its work). No engine here computes with BLAS, and
arrowgate's own install has no numpy.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

DATA = Path(__file__).resolve().parent / "data"
PEERS_DIR = DATA / "peers"
H2O_FILE = DATA / "G1_1e7_1e7_100_0.csv"
LINEITEM_FILE = DATA / "lineitem.csv"

#: name -> (data set, SQL over {t}); the h2o SQL is DuckDB's db-benchmark entry's
QUERIES: dict[str, tuple[str, str]] = {
    "q1": ("h2o", "SELECT id1, sum(v1) AS v1 FROM {t} GROUP BY id1"),
    "q2": ("h2o", "SELECT id1, id2, sum(v1) AS v1 FROM {t} GROUP BY id1, id2"),
    "q3": ("h2o", "SELECT id3, sum(v1) AS v1, avg(v3) AS v3 FROM {t} GROUP BY id3"),
    "q4": ("h2o", "SELECT id4, avg(v1) AS v1, avg(v2) AS v2, avg(v3) AS v3 FROM {t} GROUP BY id4"),
    "q5": ("h2o", "SELECT id6, sum(v1) AS v1, sum(v2) AS v2, sum(v3) AS v3 FROM {t} GROUP BY id6"),
    "q6": ("h2o", "SELECT id4, id5, median(v3) AS median_v3, stddev(v3) AS sd_v3 FROM {t} "
                  "GROUP BY id4, id5"),
    # issue 39: q6's stddev alone (its median is measured on its own branch)
    "q6sd": ("h2o", "SELECT id4, id5, stddev(v3) AS sd_v3 FROM {t} GROUP BY id4, id5"),
    # q6 with median alone (issue 39: median native in the csv engine, stddev another's)
    "q6m": ("h2o", "SELECT id4, id5, median(v3) AS median_v3 FROM {t} GROUP BY id4, id5"),
    "q7": ("h2o", "SELECT id3, max(v1) - min(v2) AS range_v1_v2 FROM {t} GROUP BY id3"),
    "q8": ("h2o", "SELECT id6, v3 AS largest2_v3 FROM (SELECT id6, v3, row_number() OVER "
                  "(PARTITION BY id6 ORDER BY v3 DESC) AS order_v3 FROM {t} WHERE v3 IS NOT NULL) "
                  "AS sub_query WHERE order_v3 <= 2"),
    "q9": ("h2o", "SELECT id2, id4, pow(corr(v1, v2), 2) AS r2 FROM {t} GROUP BY id2, id4"),
    "q10": ("h2o", "SELECT id1, id2, id3, id4, id5, id6, sum(v3) AS v3, count(*) AS count "
                   "FROM {t} GROUP BY id1, id2, id3, id4, id5, id6"),
    "Q1": ("tpch", "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, "
                   "sum(l_extendedprice) AS sum_base_price, "
                   "sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, "
                   "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, "
                   "avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, "
                   "avg(l_discount) AS avg_disc, count(*) AS count_order FROM {t} "
                   "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus "
                   "ORDER BY l_returnflag, l_linestatus"),
    # issue 39: a count of lineitem's rows, within 1.2x of the fastest peer (it took 155 s when
    # the file was rewritten in Python at every query)
    "count": ("tpch", "SELECT count(*) AS n FROM {t}"),
    "Q6": ("tpch", "SELECT sum(l_extendedprice * l_discount) AS revenue FROM {t} "
                   "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
                   "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"),
}
#: an engine's own SQL where the shared one means something else there
OWN_SQL = {
    ("chdb", "q6"): "SELECT id4, id5, quantileExactInclusive(0.5)(v3) AS median_v3, stddevSamp(v3) AS sd_v3 "
                    "FROM {t} GROUP BY id4, id5",
    ("chdb", "q6sd"): "SELECT id4, id5, stddevSamp(v3) AS sd_v3 FROM {t} GROUP BY id4, id5",
    ("chdb", "q6m"): "SELECT id4, id5, quantileExactInclusive(0.5)(v3) AS median_v3 "
                     "FROM {t} GROUP BY id4, id5",
}

#: engine -> (the module it needs, the child program: argv = path, sql, answer file or "")
ENGINES: dict[str, tuple[str, str]] = {
    "arrowgate": ("gateway", r"""
import sys, gateway
path, sql, out = sys.argv[1:4]
with gateway.connect({"engines": {"csv": {"type": "csv", "fallback": "duck"},
                                  "duck": {"type": "duckdb"}},
                      "sources": {"t": {"path": path}}}) as gw:
    result = gw.execute(sql.format(t="t"), engine="csv")
    table = result.to_arrow()
    route = "fallback" if "fallback_reason" in result.notes else "native"
"""),
    "duckdb": ("duckdb", r"""
import sys, duckdb
path, sql, out = sys.argv[1:4]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # it prints to stdout past 2 s
table = con.sql(sql.format(t="read_csv('" + path + "')")).to_arrow_table()
"""),
    "polars": ("polars", r"""
import sys, polars as pl
path, sql, out = sys.argv[1:4]
ctx = pl.SQLContext(t=pl.scan_csv(path, try_parse_dates=True))
table = ctx.execute(sql.format(t="t")).collect().to_arrow()
"""),
    "datafusion": ("datafusion", r"""
import sys, datafusion
path, sql, out = sys.argv[1:4]
ctx = datafusion.SessionContext()
ctx.register_csv("t", path)
table = ctx.sql(sql.format(t="t")).to_arrow_table()
"""),
    "chdb": ("chdb", r"""
import sys, chdb
path, sql, out = sys.argv[1:4]
table = chdb.query(sql.format(t="file('" + path + "', 'CSVWithNames')"), "ArrowTable")
"""),
}
#: what every child does with its table: the answer file when asked, then one line: its peak
#: RSS (VmHWM: a child's ru_maxrss starts from the RSS of the parent that forked it, which
#: holds answers of millions of rows), the rows, and arrowgate's route (native or fallback)
CHILD_END = r"""
if out:
    import pyarrow.ipc
    with pyarrow.ipc.new_file(out, table.schema) as w:
        w.write_table(table)
peak = next((line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")),
            "0")
print(peak, table.num_rows, globals().get("route", ""))
"""
PEERS = ("duckdb", "polars", "datafusion", "chdb")
LABELS = {"arrowgate": "arrowgate", "base": "arrowgate (--base)", "duckdb": "DuckDB", "polars": "Polars",
          "datafusion": "DataFusion", "chdb": "chDB"}
REL_TOL = 1e-6


#: the folder holding the peers (--peers), on their PYTHONPATH, not arrowgate's
peers_path = ""
#: --base: the interpreter of another arrowgate install (its venv's python), run as the
#: engine "base" beside this one: a change's before and after in one run
base_python = ""


def run(engine: str, path: str, sql: str, out: str = "") -> tuple[float, str, int, float]:
    """(seconds, its printed line, peak RSS in KiB, CPU seconds: user and system, all
    its threads) of one fresh process."""
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ, "ARROWGATE_SNIFF_CACHE": "off"}
    if engine not in ("arrowgate", "base") and peers_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (peers_path, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile("w+") as errors:
        start = time.perf_counter()
        python = base_python if engine == "base" else sys.executable
        program = ENGINES["arrowgate" if engine == "base" else engine][1] + CHILD_END
        # -P: the working folder is not put on the child's path, where a checkout's
        # gateway/ would shadow the --base install's own
        child = subprocess.Popen([python, "-P", "-c", program, path, sql, out], env=env,
                                 stdout=subprocess.PIPE, stderr=errors, text=True)
        line = child.stdout.read() if child.stdout else ""
        _, status, usage = os.wait4(child.pid, 0)
        took = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if child.returncode:
            errors.seek(0)
            lines = errors.read().strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"exit {child.returncode}")
    peak, _, rest = line.strip().partition(" ")
    return took, rest, int(peak) or usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def normalised(table: pa.Table) -> pa.Table:
    """Columns by position, numbers as doubles (NaN as NULL: the corr of a constant group is
    NaN in DuckDB, NULL in DataFusion) and text as strings, rows sorted."""
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            col = pc.cast(col, pa.float64())
            col = pc.if_else(pc.is_nan(col), pa.scalar(None, pa.float64()), col)
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) \
                or pa.types.is_dictionary(t):
            col = pc.cast(col, pa.string())
        cols.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    names = [f"c{i}" for i in range(len(cols))]
    out = pa.table(cols, names=names)
    return out.sort_by([(n, "ascending") for n in names])


def differs(a: pa.Table, b: pa.Table) -> str | None:
    """Why two normalised answers differ, or None."""
    if a.num_columns != b.num_columns or a.num_rows != b.num_rows:
        return f"{a.num_rows} rows x {a.num_columns} against {b.num_rows} x {b.num_columns}"
    for i, (x, y) in enumerate(zip(a.columns, b.columns, strict=True)):
        x, y = x.combine_chunks(), y.combine_chunks()
        if pa.types.is_floating(x.type) and pa.types.is_floating(y.type):
            if not x.is_null().equals(y.is_null()):
                return f"column {i}: NULLs differ"
            gap = pc.abs(pc.subtract(x, y))
            tol = pc.max_element_wise(pc.multiply(pc.max_element_wise(pc.abs(x), pc.abs(y)), REL_TOL),
                                      pa.scalar(1e-9))
            bad = pc.sum(pc.cast(pc.fill_null(pc.greater(gap, tol), False), pa.int64())).as_py()
            if bad:
                return f"column {i}: {bad} values differ"
        elif not x.cast(pa.string()).equals(y.cast(pa.string())):
            return f"column {i} differs"
    return None


def answer(engine: str, path: str, sql: str, folder: str) -> tuple[pa.Table | None, str]:
    """(the normalised answer or None, what the child said or the error)."""
    out = os.path.join(folder, f"{engine}.arrow")
    try:
        _, line, _, _ = run(engine, path, sql, out)
    except RuntimeError as exc:
        return None, f"error: {exc}"[:160]
    with ipc.open_file(out) as reader:
        table = reader.read_all()
    os.unlink(out)
    return normalised(table), line


def generate() -> None:
    """The two files into bench/data/, each unless it is there."""
    DATA.mkdir(parents=True, exist_ok=True)
    tools = Path(sys.executable).parent
    if not H2O_FILE.exists():
        subprocess.run([str(tools / "falsa"), "groupby", "--path-prefix", str(DATA), "--size", "SMALL",
                        "--data-format", "CSV"], check=True)
    if not LINEITEM_FILE.exists():
        subprocess.run([str(tools / "tpchgen-cli"), "csv", "-s", "1", "--tables", "lineitem",
                        "-o", str(DATA)], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--h2o", default=str(H2O_FILE))
    ap.add_argument("--lineitem", default=str(LINEITEM_FILE))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--peers", default=str(PEERS_DIR),
                    help="the folder the peers were installed in (pip install --target)")
    ap.add_argument("--base", help="another arrowgate's python (its venv), timed beside this one")
    ap.add_argument("--generate", action="store_true", help="write the data files, then stop")
    args = ap.parse_args()
    if args.generate:
        generate()
        return
    global peers_path, base_python
    if os.path.isdir(args.peers):
        peers_path = args.peers
        sys.path.append(peers_path)  # last: found by find_spec, never before the venv's
    engines = []
    for name in args.engines.split(","):
        if importlib.util.find_spec(ENGINES[name][0]) is None:
            print(f"{name}: not installed, skipped (pip install --target {args.peers} {name})")
        else:
            engines.append(name)
    if args.base:
        base_python = args.base
        engines.append("base")
    if "duckdb" not in engines:
        raise SystemExit("DuckDB gives the reference answers: pip install duckdb")
    files = {"h2o": args.h2o, "tpch": args.lineitem}
    for kind, path in files.items():
        if os.path.exists(path):
            print(f"{kind}: {path}, {os.path.getsize(path) / 1e6:.0f} MB")
    print(f"rounds: {args.rounds} after one checked run; {os.cpu_count()} cores")
    rows = []
    for name in args.queries.split(","):
        kind, shared = QUERIES[name]
        path = files[kind]
        if not os.path.exists(path):
            print(f"{name}: no file {path} (--generate writes it)")
            continue
        sqls = {e: OWN_SQL.get((e, name), shared) for e in engines}
        with tempfile.TemporaryDirectory() as folder:
            reference, _ = answer("duckdb", path, sqls["duckdb"], folder)
            if reference is None:
                print(f"{name}: DuckDB fails, no reference")
                continue
            notes: dict[str, str] = {}
            timed = ["duckdb"]
            for e in engines:
                if e == "duckdb":
                    continue
                got, line = answer(e, path, sqls[e], folder)
                why = "no answer" if got is None else differs(got, reference)
                if why is None:
                    timed.append(e)
                    notes[e] = line.split()[-1] if e in ("arrowgate", "base") else ""
                else:
                    notes[e] = f"wrong: {why}" if got is not None else line
                    print(f"{name} {e}: {notes[e]} (no timing)")
                del got
            del reference
        times: dict[str, list[float]] = {e: [] for e in timed}
        cpus: dict[str, list[float]] = {e: [] for e in timed}
        peaks = dict.fromkeys(timed, 0)
        for r in range(args.rounds):
            for e in timed[r % len(timed):] + timed[:r % len(timed)]:
                took, _, peak, cpu = run(e, path, sqls[e])
                times[e].append(took)
                cpus[e].append(cpu)
                peaks[e] = max(peaks[e], peak)
        med = {e: statistics.median(times[e]) for e in timed}
        cpu = {e: statistics.median(cpus[e]) for e in timed}
        for e in timed:
            print(f"{name:4} {e:10} median {med[e]:7.2f} s (min {min(times[e]):.2f} max "
                  f"{max(times[e]):.2f}), CPU {cpu[e]:.2f} s  peak {peaks[e] >> 10} MB "
                  f"{notes.get(e, '')}  load {os.getloadavg()[0]:.1f}", flush=True)
        rows.append((name, shared, med, times, peaks, notes, cpu))
    print_table(rows, engines)


def print_table(rows: list[tuple[str, str, dict[str, float], dict[str, list[float]], dict[str, int],
                                 dict[str, str], dict[str, float]]], engines: list[str]) -> None:
    peers = [e for e in PEERS if e in engines]
    cols = peers + [e for e in ("base", "arrowgate") if e in engines]
    print()
    ratio = "best peer / arrowgate" + (" (--base / this)" if "base" in cols else "")
    print("| query | " + " | ".join(LABELS[e] for e in cols) + f" | {ratio} |")
    print("|---|" + "---|" * len(cols) + "---|")
    for name, _, med, times, peaks, notes, cpu in rows:
        cells = []
        for e in cols:
            if e not in med:
                cells.append("wrong" if notes.get(e, "").startswith("wrong") else "n/a")
                continue
            cell = (f"{med[e]:.2f} s ({min(times[e]):.2f}-{max(times[e]):.2f}), CPU {cpu[e]:.2f} s, "
                    f"{peaks[e] >> 10} MB")
            if e in ("arrowgate", "base"):
                cell += f" ({notes[e]})"
            cells.append(cell)
        best = min((med[e] for e in peers if e in med), default=None)
        ratios = [f"{best / med[e]:.2f}x" if best and e in med else "n/a"
                  for e in ("base", "arrowgate") if e in cols]
        print(f"| {name} | " + " | ".join(cells) + f" | {' / '.join(ratios)} |")


if __name__ == "__main__":
    main()
