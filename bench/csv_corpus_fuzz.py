"""The differential fuzzer on every file of a folder: random queries, csv engine against DuckDB.

    .venv/bin/python bench/csv_corpus_fuzz.py [PATH] [--queries-per-file N]
        [--seconds-per-file S] [--seed S] [--jobs 1] [--limit N] [--timeout T] [--out DIR]

``bench/csv_corpus.py`` asks each file only ``count(*)`` and ``*``. Here every
file under PATH (default DuckDB's CSV test corpus) is mounted as the source
``t`` of a csv engine (one thread, no fallback) and of a duckdb engine, and
``gateway.fuzz.fuzzer.DifferentialFuzzer`` draws queries over its columns and
values from the csv engine's native operations, as ``arrowgate fuzz`` does,
compares both answers (names included) and shrinks every divergence. A file
runs in a worker process with a time limit (``csv_corpus.Worker``), so a hang
or a crash is counted, not suffered; a worker is kept for the next file until
it hangs or crashes. A file DuckDB cannot read, or whose columns cannot be
sampled, is skipped and counted, and so is one the csv engine refuses whole
(``Unsupported`` on ``SELECT *``: its queries would all be refused). The table
of counts goes to stdout as Markdown; each shrunk divergence is written to
``--out`` as a corpus file whose header names its file, and listed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from csv_corpus import Worker, corpus_files

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "duckdb-csv" / "files"
#: the verdicts a divergence can have (gateway.verify.compare's categories but match, nondeterministic)
CATEGORIES = ("schema", "row_count", "missing_rows", "extra_rows", "values", "order", "error")
#: why a file was not fuzzed
SKIPS = ("DuckDB cannot read it", "columns cannot be sampled", "csv refuses the file")


# ------------------------------------------------------------------ worker

def fuzz_file(path: str, emit: Any, *, seed: int, seconds: float,
              queries: int | None) -> None:
    """Fuzz one file; ``emit`` gets a ``running`` record before each query and a summary."""
    import dataclasses

    import gateway
    from gateway.errors import GatewayError, Unsupported
    from gateway.fuzz.fuzzer import DifferentialFuzzer
    from gateway.verify.verdict import CompareOptions

    class ReportingFuzzer(DifferentialFuzzer):
        def _outcome(self, sql: str, engine: str) -> Any:
            emit({"running": engine, "query": sql})
            return super()._outcome(sql, engine)

    config = {"engines": {"csv": {"type": "csv", "threads": 1},
                          "duck": {"type": "duckdb", "settings": {"threads": 1}}},
              "sources": {"t": {"path": path, "format": "csv"}}}
    try:
        gw = gateway.connect(config)
    except GatewayError as exc:
        emit({"skipped": SKIPS[0], "why": str(exc).splitlines()[0][:200]})
        return
    with gw:
        try:
            gw.execute("SELECT * FROM t LIMIT 1", engine="duck", shadow=False).to_arrow()
        except GatewayError as exc:
            emit({"skipped": SKIPS[0], "why": str(exc).splitlines()[0][:200]})
            return
        emit({"running": "csv", "query": "SELECT * FROM t"})
        try:
            gw.execute("SELECT * FROM t", engine="csv", shadow=False).to_arrow()
        except Unsupported as exc:
            emit({"skipped": SKIPS[2], "why": str(exc).splitlines()[0][:200]})
            return
        except GatewayError:
            pass  # a wrong refusal: the fuzzer's queries show it as divergences
        options = dataclasses.replace(CompareOptions(), ignore_engine_chosen_names=False)
        fuzzer = ReportingFuzzer(gw, "csv", "duck", "t", seed=seed, options=options,
                                 operations=gw.engine("csv").native_operations)
        try:
            fuzzer.columns()
        except GatewayError as exc:
            emit({"skipped": SKIPS[1], "why": str(exc).splitlines()[0][:200]})
            return
        report = fuzzer.run(seconds=seconds, max_queries=queries)
    emit({"queries": report.queries, "unsupported": report.unsupported,
          "repeats": report.repeats,
          "findings": [{"category": f.category, "message": " ".join(f.message.split())[:500],
                        "sql": f.sql, "shrunk": f.shrunk, "flaky": f.flaky,
                        "after_queries": f.after_queries} for f in report.findings]})


def worker(seed: int, seconds: float, queries: int | None) -> None:
    """Read file paths from stdin; answer each with JSON lines, then ``{"done": path}``."""
    running: dict[str, Any] = {}

    def emit(record: dict[str, Any]) -> None:
        if "running" in record:
            running.update(record)
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        path = line.rstrip("\n")
        running.clear()
        try:
            fuzz_file(path, emit, seed=seed, seconds=seconds, queries=queries)
        except Exception as exc:  # an exception past the gateway's errors is a crash, reported
            emit({"exception": f"{type(exc).__name__}: {exc}"[:300],
                  "query": running.get("query", ""),
                  "traceback": traceback.format_exc()[-2000:]})
        emit({"done": path})


# ------------------------------------------------------------------ driver

class FuzzWorker(Worker):
    """csv_corpus's worker process, running this script's worker."""

    def __init__(self, timeout: float, options: list[Any]):
        super().__init__(timeout, reuse=True)
        self.options = options

    def command(self) -> list[str]:
        return [sys.executable, __file__, "--worker", json.dumps(self.options)]

    def _unfinished(self, path: str, records: list[dict[str, Any]], running: dict[str, Any],
                    outcome: str) -> list[dict[str, Any]]:
        code = self.proc.poll() if self.proc else None
        self._stop()
        side = "DuckDB" if running.get("running") == "duck" else "csv"
        return [*records, {"file": path, "outcome": f"hang: {side}" if outcome == "hang" else
                           "crash", "query": running.get("query", ""), "exit": code}]


def summarise(records: list[dict[str, Any]]) -> tuple[Counter[str], list[dict[str, Any]]]:
    """The counts of the table, and every finding, hang and crash with its file."""
    counts: Counter[str] = Counter()
    found: list[dict[str, Any]] = []
    for r in records:
        if "skipped" in r:
            counts[f"skipped: {r['skipped']}"] += 1
        elif "queries" in r:
            counts["files fuzzed"] += 1
            counts["queries"] += r["queries"]
            counts["unsupported by csv"] += r["unsupported"]
            counts["further divergent queries of a kind already shrunk"] += r["repeats"]
            for f in r["findings"]:
                counts[f"divergences: {f['category']}"] += 1
                found.append({"file": r["file"], **f})
        elif "exception" in r:
            counts["crashes"] += 1
            found.append({"file": r["file"], "category": "crash", "message": r["exception"],
                          "shrunk": r.get("query", ""), "traceback": r.get("traceback", "")})
        elif "outcome" in r:
            key = "hangs" if r["outcome"].startswith("hang") else "crashes"
            counts[key] += 1
            found.append({"file": r["file"], "category": r["outcome"], "shrunk": r["query"],
                          "message": f"exit {r['exit']}"})
    return counts, found


def _progress(record: dict[str, Any]) -> str:
    if "queries" in record:
        return (f"{record['queries']} queries, {record['unsupported']} unsupported, "
                f"{len(record['findings'])} divergences")
    return str(record.get("skipped") or record.get("outcome") or record.get("exception"))


def table(counts: Counter[str]) -> str:
    rows = ["files fuzzed", "queries", "unsupported by csv",
            *(f"divergences: {c}" for c in CATEGORIES),
            "further divergent queries of a kind already shrunk", "hangs", "crashes",
            *(f"skipped: {s}" for s in SKIPS)]
    return "\n".join(["| | count |", "|---|---|", *(f"| {row} | {counts[row]} |" for row in rows)])


def write_finding(out: Path, root: Path, finding: dict[str, Any], seed: int) -> Path:
    """A corpus file for one shrunk divergence (or hang), its file named in the header."""
    rel = os.path.relpath(finding["file"], root)
    sql = finding.get("shrunk") or ""
    digest = hashlib.sha1(f"{rel}\n{sql}".encode()).hexdigest()[:8]
    name = f"corpus_{finding['category'].replace(': ', '_').replace(' ', '_')}_{digest}"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.sql"
    path.write_text(
        f"-- Found by bench/csv_corpus_fuzz.py --seed {seed}: csv against duckdb, "
        f"source t = {rel} (under {root})\n"
        f"-- {finding['category']}: {' '.join(str(finding.get('message', '')).split())}\n"
        + (f"-- {finding['flaky']}\n" if finding.get("flaky") else "")
        + (f"-- as generated: {finding['sql']}\n" if finding.get("sql") else "")
        + f"-- name: {name}\n{sql};\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--seconds-per-file", type=float, default=5.0,
                        help="fuzz each file this long (default 5; shrinking comes after)")
    parser.add_argument("--queries-per-file", type=int, help="stop each file after N queries")
    parser.add_argument("--seed", type=int, default=0, help="the fuzzer's seed, for every file")
    parser.add_argument("--jobs", type=int, default=1, help="files fuzzed at once")
    parser.add_argument("--limit", type=int, help="fuzz only the first N files")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a file may take, shrinking included (default 120)")
    parser.add_argument("--out", type=Path, default=Path("corpus-fuzz-findings"),
                        help="folder the shrunk divergences are written to")
    parser.add_argument("--worker", metavar="OPTIONS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*json.loads(args.worker))
        return
    files = corpus_files(args.path)[:args.limit]
    workers = [FuzzWorker(args.timeout, [args.seed, args.seconds_per_file,
                                         args.queries_per_file])
               for _ in range(max(1, args.jobs))]
    started = time.perf_counter()

    def lane(k: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(k, len(files), len(workers)):
            got = workers[k].check(files[i])
            out.extend(got)
            print(f"[{i + 1}/{len(files)}] {os.path.relpath(files[i], args.path)}: "
                  + "; ".join(_progress(r) for r in got), file=sys.stderr, flush=True)
        workers[k]._stop()
        return out

    records: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        for part in pool.map(lane, range(len(workers))):
            records.extend(part)
    counts, found = summarise(records)
    print(f"{len(files)} files under {args.path}, {time.perf_counter() - started:.0f} s, "
          f"seed {args.seed}, {args.queries_per_file or 'unlimited'} queries or "
          f"{args.seconds_per_file:g} s per file, timeout {args.timeout:g} s, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print(table(counts))
    if found:
        print("\n| file | category | shrunk query | written to |\n|---|---|---|---|")
    for f in sorted(found, key=lambda f: (f["file"], f["category"])):
        path = write_finding(args.out, args.path, f, args.seed)
        query = (f.get("shrunk") or f.get("message", "")).replace("|", "\\|")
        print(f"| {os.path.relpath(f['file'], args.path)} | {f['category']} | `{query}` "
              f"| {path} |")


if __name__ == "__main__":
    main()
