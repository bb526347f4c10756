#!/usr/bin/env python3
"""How fast the comparator judges two large answers, against DuckDB's EXCEPT ALL (docs/shadow.md).

    .venv/bin/python bench/compare_bench.py --rows 10000000
    .venv/bin/python bench/compare_bench.py --stream --rows 10000000
    .venv/bin/python bench/compare_bench.py --stream --columns mixed10 --rows 10000000
    .venv/bin/python bench/compare_bench.py --nested --rows 10000000

``--nested``: two answers with nested columns (a LIST, a STRUCT, a MAP, besides an
integer, a string and a double) holding the same rows in different orders (no
ORDER BY: paired as multisets), the primary's maps with their entries in another
order; then the same with one nested value changed. Both are written to Arrow IPC
files first (not timed), then compared by the streaming comparison, read batch by
batch from those files, within ``--memory`` bytes (``shadow.max_compare_bytes``'
default). The rate is gross: the rows of both answers over the CPU seconds of
the whole process while it compared (wall seconds times the cores it used),
reading included. Memory: the most the process's anonymous RSS (what it holds,
not the page cache of files) and its whole RSS grew above the start of a round
(the warm-up's growth, held by the allocators, is not counted again), and the
most anonymous RSS the process held (Python, pyarrow and DuckDB included).

``--stream``: the streaming comparison (:mod:`gateway.verify.compare_stream`) on two
answers DuckDB generates batch by batch from ``range()`` (so 100M rows never
sit in memory), within ``--memory`` bytes, of ``--columns`` (4, or mixed10);
the anchors are DuckDB's own ``EXCEPT ALL`` both ways and a full outer join
on the key comparing every column, over the same two queries, run inside
DuckDB. Every verdict and anchor count is checked in the first round, before
anything is timed. Both
sides run on one thread each (DuckDB ``threads = 1``). Besides the wall time,
the CPU seconds of the whole process; "net" subtracts the CPU of only reading
both answers (measured in the same round), which leaves the comparator's own.
Rows/s per core is the rows of both answers over the net CPU seconds.

Builds one answer of ROWS rows (id, string, double, small int) in DuckDB, and
variants of it, then, round by round with the order alternated, times
``compare_tables`` on each pair and the anchor: DuckDB's own ``EXCEPT ALL``
both ways (exact, no tolerance, no order check) over the same Arrow tables.
Prints the median and min-max of the rounds; the most the RSS grew during any
call (the warm-up included, sampled every 5 ms: memory an earlier call left in
the allocator is not counted again, so it is a lower bound); the process's peak
RSS; and the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import duckdb

from gateway.verify.compare import compare_tables

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def measured(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its seconds, and the peak RSS above the start while it ran (MiB)."""
    start, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    try:
        result = fn()
    finally:
        seconds = time.perf_counter() - began
        done.set()
        sampler.join()
    return result, seconds, max(peak[0], _rss()) / 2**20 - start / 2**20


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _reader(sql: str) -> Any:
    return duckdb.connect(config={"threads": 1}).sql(sql).to_arrow_reader(1 << 17)


#: the columns of a generated answer: ``f`` is the float a case changes
COLUMNS = {
    "4": ["i AS id", "(i % 1000)::VARCHAR AS s", "{f}::DOUBLE AS f", "(i % 7)::INTEGER AS g"],
    "mixed10": ["i AS id", "(i % 7)::INTEGER AS g", "{f}::DOUBLE AS f",
                "(i % 1000)::VARCHAR AS s", "'customer-' || (i % 99991)::VARCHAR AS name",
                "TIMESTAMP '2024-01-01' + to_microseconds(i * 1000) AS ts",
                "DATE '2000-01-01' + (i % 9000)::INTEGER AS day",
                "(i % 100000)::DECIMAL(18, 2) / 100 AS price",
                "(i * 7)::DECIMAL(38, 4) AS amount", "i % 3 = 0 AS flag"],
}


def stream_cases(rows: int, rounds: int, memory: int, skip: list[str], warmups: int,
                 anchor: bool, columns: str = "4") -> None:
    """The streaming comparison on answers generated batch by batch, against EXCEPT ALL both
    ways and a full outer join on the key, side by side."""
    from gateway.verify.compare_stream import compare_streams

    def answer_sql(f: str, descending: bool = False) -> str:
        select = ", ".join(c.format(f=f) for c in COLUMNS[columns])
        span = f"{rows - 1}, -1, -1" if descending else f"{rows}"
        return f"SELECT {select} FROM range({span}) t(i)"

    answer = answer_sql("i * 1.5")
    cases = [
        ("equal", answer, answer, None, "match"),
        ("same rows reversed, no ORDER BY", answer_sql("i * 1.5", True), answer, None, "match"),
        ("order only: reversed, ORDER BY id", answer_sql("i * 1.5", True), answer,
         "SELECT * FROM t ORDER BY id", "order"),
        (f"values differ: {rows // 100000} cells",
         answer_sql("CASE WHEN i % 100000 = 0 THEN i * 1.5 + 1 ELSE i * 1.5 END"), answer, None,
         "values"),
        ("worst case: every row differs", answer_sql("i * 1.5 + 1"), answer, None, "values"),
    ]
    names = [c.split(" AS ")[-1] for c in COLUMNS[columns]]
    print(f"{rows} rows per answer, {len(names)} columns ({columns}: {', '.join(names)}), "
          f"memory cap {memory >> 20} MiB, median of {rounds} rounds (min-max), {warmups} "
          "warm-up(s); every verdict and anchor count checked before timing\n")
    print("| case | verdict | compare s | CPU s | net CPU s | rows/s per core (net) | "
          "peak RSS growth MiB (read only) | EXCEPT ALL both ways s | full outer join s | "
          "differing rows (EXCEPT ALL, join) | compare / EXCEPT ALL | compare / join |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")
    equal_net: float | None = None
    for name, p_sql, r_sql, sql, expected in cases:
        if any(word in name for word in skip):
            continue

        def read_only(a: str = p_sql, b: str = r_sql) -> int:
            return sum(batch.num_rows for q in (a, b) for batch in _reader(q))

        def judge(a: str = p_sql, b: str = r_sql, q: str | None = sql) -> Any:
            pr, rr = _reader(a), _reader(b)
            return compare_streams(pr, rr, pr.schema, rr.schema, sql=q, memory_bytes=memory)

        def in_duckdb(query: str) -> int:
            # DuckDB spills past its memory limit into ./.tmp unless told: the system's
            # temp folder instead, as the comparison's own spill
            with tempfile.TemporaryDirectory(prefix="arrowgate-except-") as spill:
                con = duckdb.connect(config={"threads": 1, "memory_limit": "4GB",
                                             "temp_directory": spill})
                try:
                    return int(con.execute(query).fetchall()[0][0])
                finally:
                    con.close()

        def except_all(a: str = p_sql, b: str = r_sql) -> int:
            return sum(in_duckdb(f"SELECT count(*) FROM (({x}) EXCEPT ALL ({y}))")
                       for x, y in ((a, b), (b, a)))

        def full_join(a: str = p_sql, b: str = r_sql) -> int:
            differs = " OR ".join(f"p.{c} IS DISTINCT FROM r.{c}" for c in names[1:])
            return in_duckdb(f"SELECT count(*) FROM ({a}) p FULL OUTER JOIN ({b}) r "
                             f"ON p.id = r.id WHERE p.id IS NULL OR r.id IS NULL OR {differs}")

        runs: dict[str, list[tuple[Any, float, float, float]]] = {
            "read": [], "compare": [], "except": [], "join": []}
        memory_mib = {"read": 0.0, "compare": 0.0}
        contenders: list[tuple[str, Callable[[], Any]]] = [("read", read_only), ("compare", judge)]
        if anchor:
            contenders += [("except", except_all), ("join", full_join)]
        n = len(contenders)
        for i in range(rounds + warmups):
            for label, fn in contenders[i % n:] + contenders[:i % n]:
                cpu = _cpu()
                result, seconds, grown = measured(fn)
                if label in memory_mib:
                    memory_mib[label] = max(memory_mib[label], grown)
                if i == 0:  # answers first: a wrong verdict or anchor gets no timing
                    if label == "compare":
                        assert result.category == expected, (name, result.message)
                    if label in ("except", "join"):
                        assert (result == 0) == (expected in ("match", "order")), (name, label)
                if i >= warmups:
                    runs[label].append((result, seconds, grown, _cpu() - cpu))
        verdict = runs["compare"][0][0]
        anchor_rows = f"{runs['except'][0][0]}, {runs['join'][0][0]}" if anchor else "not run"
        c_s = [r[1] for r in runs["compare"]]
        e_s = [r[1] for r in runs["except"]] or [math.nan] * len(c_s)
        j_s = [r[1] for r in runs["join"]] or [math.nan] * len(c_s)
        cpu_s = [r[3] for r in runs["compare"]]
        net = [c - r[3] for c, r in zip(cpu_s, runs["read"], strict=True)]
        per_core = [2 * rows / n / 1e6 for n in net]
        ratios = [c / e for c, e in zip(c_s, e_s, strict=True)]
        join_ratios = [c / j for c, j in zip(c_s, j_s, strict=True)]
        if name == "equal":
            equal_net = statistics.median(net)
        vs_equal = f" ({statistics.median(net) / equal_net:.1f}x equal's net CPU)" \
            if equal_net and name != "equal" else ""
        print(f"| {name} | {verdict.category} | {spread(c_s)} | {spread(cpu_s)} | "
              f"{spread(net)}{vs_equal} | {spread(per_core)}M | {memory_mib['compare']:.0f} "
              f"({memory_mib['read']:.0f}) | {spread(e_s)} | {spread(j_s)} | {anchor_rows} | "
              f"{spread(ratios)} | {spread(join_ratios)} |", flush=True)


def _anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) << 10
    raise RuntimeError("no RssAnon in /proc/self/status")


def nested_answer_sql(rows: int, shuffled: bool, changed: bool = False) -> str:
    """An answer of ``rows`` rows with a LIST, a STRUCT and a MAP among its columns.

    ``shuffled``: the rows in another order (``i * P % rows`` for a prime P that does not
    divide ``rows``: every row once) and each map's entries in another order;
    ``changed``: one row's list holds another value."""
    prime = next(p for p in (7919, 7907, 7901) if rows % p)
    j = f"(i * {prime}) % {rows}" if shuffled else "i"
    third = f"CASE WHEN j = {rows // 2 + 1} THEN -1 ELSE j END" if changed else "j"
    entries = ["'k' || (j % 3): j % 11", "'z': j % 5"]
    if shuffled:
        entries.reverse()
    return (f"SELECT j AS id, (j % 1000)::VARCHAR AS s, (j * 1.5)::DOUBLE AS f, "
            f"CASE WHEN j % 10 = 0 THEN NULL ELSE [j % 100, j % 7, {third}] END AS l, "
            f"{{'a': j % 13, 'b': 'x' || (j % 17)}} AS st, MAP {{{', '.join(entries)}}} AS m "
            f"FROM (SELECT {j} AS j FROM range({rows}) t(i))")


def nested_cases(rows: int, rounds: int, memory: int, warmups: int, folder: str | None) -> None:
    """Shuffled answers with nested columns, streamed from Arrow IPC files within the cap."""
    import pyarrow as pa

    from gateway.verify.compare_stream import compare_streams

    with tempfile.TemporaryDirectory(prefix="arrowgate-nested-", dir=folder) as where:
        con = duckdb.connect(config={"threads": 2})
        files = {}
        for name, sql in (("reference", nested_answer_sql(rows, False)),
                          ("primary", nested_answer_sql(rows, True)),
                          ("changed", nested_answer_sql(rows, True, changed=True))):
            files[name] = os.path.join(where, f"{name}.arrow")
            reader = con.sql(sql).to_arrow_reader(1 << 16)
            with pa.OSFile(files[name], "wb") as f, pa.ipc.new_stream(f, reader.schema) as w:
                for batch in reader:
                    w.write_batch(batch)
        con.close()
        size = os.path.getsize(files["reference"]) / 2**20
        print(f"{rows} rows per answer ({size:.0f} MiB as Arrow IPC), columns id BIGINT, "
              "s VARCHAR, f DOUBLE, l BIGINT[] (NULL every tenth row), st STRUCT(a BIGINT, "
              "b VARCHAR), m MAP(VARCHAR, BIGINT); the primary in another row order and its "
              f"maps' entries in another order; memory cap {memory >> 20} MiB; median of "
              f"{rounds} rounds (min-max) after {warmups} warm-up(s); the verdict checked "
              "before timing\n")
        print("| case | verdict | wall s | CPU s | cores used | gross rows/s per core "
              "(both answers) | peak RssAnon growth MiB | peak RSS growth MiB | peak RssAnon "
              "MiB | cap MiB |\n|---|---|---|---|---|---|---|---|---|---|")
        for name, primary, expected in (("same rows, shuffled, no ORDER BY", "primary", "match"),
                                        ("one nested value differs, shuffled", "changed",
                                         "values")):
            def judge(a: str = files[primary], b: str = files["reference"]) -> Any:
                with pa.OSFile(a) as fa, pa.OSFile(b) as fb:
                    pr, rr = pa.ipc.open_stream(fa), pa.ipc.open_stream(fb)
                    return compare_streams(pr, rr, pr.schema, rr.schema, memory_bytes=memory)

            runs = []
            for i in range(rounds + warmups):
                start_anon, start_rss, peak = _anon(), _rss(), [0, 0]
                done = threading.Event()

                def sample(p: list[int] = peak, d: threading.Event = done) -> None:
                    while not d.wait(0.005):
                        p[0], p[1] = max(p[0], _anon()), max(p[1], _rss())

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                cpu, began = _cpu(), time.perf_counter()
                verdict = judge()
                wall, used = time.perf_counter() - began, _cpu() - cpu
                done.set()
                sampler.join()
                if i == 0:  # answers first: a wrong verdict gets no timing
                    assert verdict.category == expected, (name, verdict.message)
                if i >= warmups:
                    runs.append((wall, used, (max(peak[0], _anon()) - start_anon) / 2**20,
                                 (max(peak[1], _rss()) - start_rss) / 2**20,
                                 max(peak[0], _anon()) / 2**20))
            walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
            per_core = [2 * rows / c / 1e6 for c in cpus]
            cores = [c / w for w, c in zip(walls, cpus, strict=True)]
            print(f"| {name} | {verdict.category} | {spread(walls)} | {spread(cpus)} | "
                  f"{spread(cores)} | {spread(per_core)}M | {max(r[2] for r in runs):.0f} | "
                  f"{max(r[3] for r in runs):.0f} | {max(r[4] for r in runs):.0f} | "
                  f"{memory >> 20} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", action="store_true",
                        help="the streaming comparison on answers generated batch by batch")
    parser.add_argument("--nested", action="store_true",
                        help="shuffled answers with LIST, STRUCT and MAP columns, streamed")
    parser.add_argument("--folder", default=None,
                        help="--nested: where the answers' files go (the system's temp folder)")
    parser.add_argument("--memory", type=int, default=256 << 20,
                        help="the streaming comparison's memory cap in bytes")
    parser.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=True,
                        help="streamed cases: run DuckDB's EXCEPT ALL both ways beside")
    parser.add_argument("--warmups", type=int, default=1,
                        help="streamed cases: rounds run first and not counted")
    parser.add_argument("--columns", choices=sorted(COLUMNS), default="4",
                        help="streamed cases: the answers' columns (mixed10: ints, a double, "
                             "strings, a timestamp, a date, decimals, a boolean)")
    parser.add_argument("--skip", action="append", default=[],
                        help="leave out the streamed cases whose name holds this word")
    args = parser.parse_args()
    if args.nested:
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        nested_cases(args.rows, args.rounds, args.memory, args.warmups, args.folder)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
        print(f"\npeak RSS of the whole process: {peak:.0f} MiB")
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    if args.stream:
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        stream_cases(args.rows, args.rounds, args.memory, args.skip, args.warmups, args.anchor,
                     args.columns)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
        print(f"\npeak RSS of the whole process: {peak:.0f} MiB")
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    con = duckdb.connect()
    answer = con.sql(f"SELECT i AS id, (i % 1000)::VARCHAR AS s, i * 1.5 AS f, i % 7 AS g "
                     f"FROM range({args.rows}) t(i)").to_arrow_table()
    con.register("answer", answer)
    shuffled = con.sql("SELECT * FROM answer ORDER BY hash(id)").to_arrow_table()
    changed = con.sql("SELECT id, s, CASE WHEN id % 100000 = 0 THEN f + 1 ELSE f END AS f, g "
                      "FROM answer").to_arrow_table()
    nudged = con.sql("SELECT id, s, f * (1 + 1e-12) AS f, g FROM answer").to_arrow_table()
    order_by = "SELECT * FROM t ORDER BY id"
    cases = [
        ("same rows, shuffled, no ORDER BY", shuffled, answer, None),
        ("same rows, shuffled, ORDER BY id", shuffled, answer, order_by),
        ("same rows, sorted, ORDER BY id", answer, answer, order_by),
        (f"{args.rows // 100000} cells differ", changed, answer, None),
        ("every float off by 1e-12 relative (within tolerance)", nudged, answer, None),
    ]
    print(f"{args.rows} rows, {answer.nbytes / 2**20:.0f} MiB per answer, "
          f"median of {args.rounds} rounds (min-max), one warm-up\n")
    print("| case | verdict | compare s | compare MiB | EXCEPT ALL both ways s | EXCEPT ALL "
          "MiB | EXCEPT ALL rows | ratio |\n|---|---|---|---|---|---|---|---|")
    for name, primary, reference, sql in cases:
        anchor = duckdb.connect()
        anchor.register("p", primary)
        anchor.register("r", reference)

        def judge(p: Any = primary, r: Any = reference, q: str | None = sql) -> str:
            return compare_tables(p, r, sql=q).category

        def except_all(a: Any = anchor) -> int:
            return sum(a.execute(f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL "
                                 f"SELECT * FROM {y})").fetchall()[0][0]
                       for x, y in (("p", "r"), ("r", "p")))

        runs: dict[str, list[tuple[Any, float, float]]] = {"compare": [], "except": []}
        memory = {"compare": 0.0, "except": 0.0}
        contenders: list[tuple[str, Callable[[], Any]]] = [("compare", judge), ("except", except_all)]
        for i in range(args.rounds + 1):
            for label, fn in contenders[i % 2:] + contenders[:i % 2]:
                run = measured(fn)
                memory[label] = max(memory[label], run[2])  # the warm-up's growth counts
                if i:
                    runs[label].append(run)
        category, rows = runs["compare"][0][0], runs["except"][0][0]
        c_s = [r[1] for r in runs["compare"]]
        e_s = [r[1] for r in runs["except"]]
        ratios = [c / e for c, e in zip(c_s, e_s, strict=True)]
        print(f"| {name} | {category} | {spread(c_s)} | {memory['compare']:.0f}"
              f" | {spread(e_s)} | {memory['except']:.0f} | {rows} | "
              f"{spread(ratios)} |", flush=True)
        anchor.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"\npeak RSS of the whole process (answers included): {peak:.0f} MiB")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
