"""The csv engine against DuckDB's reader on every file of a folder: the differential corpus check.

    .venv/bin/python bench/csv_corpus.py PATH [--timeout 30] [--jobs 1] [--reuse]
                                              [--details OUT.tsv] [--limit N]

Every file under PATH (recursively) is mounted as the source ``t`` of a csv
engine without fallback and of a duckdb engine, and each query of QUERIES runs
on both. A file runs in its own worker process with a time limit, so a hang or
a crash is counted, not suffered; ``--reuse`` keeps a worker for the next file
until it hangs or crashes (much faster: the imports are paid once per worker).
Each (file, query) is classified as one of OUTCOMES; the table of counts goes
to stdout as Markdown, and ``--details`` writes one line per file and query
with both sides' answers or errors.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

QUERIES = ("SELECT count(*) FROM t", "SELECT * FROM t")
OUTCOMES = ("agree", "differs", "both refuse", "csv refuses", "DuckDB refuses", "hang: csv",
            "hang: DuckDB", "crash")
_SKIP_NAMES = {"LICENSE", "README.md"}


# ------------------------------------------------------------------ worker

def _outcome(gw: Any, sql: str, engine: str) -> Any:
    try:
        return gw.execute(sql, engine=engine).to_arrow()
    except Exception as exc:  # every refusal is an outcome here, whatever its type
        return exc


def _describe(value: Any) -> str:
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {str(value).splitlines()[0][:300] if str(value) else ''}"
    return f"{value.num_rows} rows, {value.schema.types}"[:300]


def check_file(path: str, emit: Any) -> None:
    """Run QUERIES on one file on both engines; ``emit`` gets one record per step."""
    import gateway
    from gateway.verify.compare import compare_tables

    config = {"engines": {"csv": {"type": "csv", "threads": 1},
                          "duckdb": {"type": "duckdb", "settings": {"threads": 1}}},
              "sources": {"t": {"path": path, "format": "csv"}}}
    try:
        gw = gateway.connect(config)
    except Exception as exc:
        for sql in QUERIES:
            emit({"query": sql, "csv": _describe(exc), "duckdb": _describe(exc),
                  "outcome": "both refuse"})
        return
    with gw:
        for sql in QUERIES:
            emit({"query": sql, "running": "csv"})
            got = _outcome(gw, sql, "csv")
            emit({"query": sql, "running": "duckdb"})
            expected = _outcome(gw, sql, "duckdb")
            csv_ok = not isinstance(got, BaseException)
            duck_ok = not isinstance(expected, BaseException)
            record = {"query": sql, "csv": _describe(got), "duckdb": _describe(expected)}
            if csv_ok and duck_ok:
                verdict = compare_tables(got, expected, sql=sql)
                record["outcome"] = "agree" if verdict.category == "match" else "differs"
                if verdict.category != "match":
                    record["verdict"] = (verdict.message or verdict.category)[:300]
            elif csv_ok:
                record["outcome"] = "DuckDB refuses"
            elif duck_ok:
                record["outcome"] = "csv refuses"
            else:
                record["outcome"] = "both refuse"
            emit(record)


def worker() -> None:
    """Read file paths from stdin; answer each with JSON lines, then ``{"done": path}``."""
    def emit(record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        path = line.rstrip("\n")
        check_file(path, emit)
        emit({"done": path})


# ------------------------------------------------------------------ driver

class Worker:
    """A worker process, replaced after a hang or a crash (or after every file).

    It runs ``command()`` (this file's ``--worker``; bench/csv_corpus_fuzz.py runs its
    own) and reads its JSON lines until ``{"done": path}``; ``_unfinished`` turns a hang
    or a crash into the script's records.
    """

    def __init__(self, timeout: float, reuse: bool):
        self.timeout = timeout
        self.reuse = reuse
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
                cwd=Path(__file__).resolve().parent.parent)
            self.lines = queue.Queue()
            threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()
        return self.proc

    def command(self) -> list[str]:
        return [sys.executable, __file__, "--worker"]

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def check(self, path: str) -> list[dict[str, Any]]:
        proc = self._start()
        assert proc.stdin is not None
        proc.stdin.write(path + "\n")
        proc.stdin.flush()
        records: list[dict[str, Any]] = []
        running: dict[str, Any] = {}
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return self._unfinished(path, records, running, "hang")
            if line is None:
                return self._unfinished(path, records, running, "crash")
            record = json.loads(line)
            if "done" in record:
                if not self.reuse:
                    self._stop()
                return records
            if "running" in record:
                running = record
            else:
                records.append({"file": path, **record})

    def _unfinished(self, path: str, records: list[dict[str, Any]], running: dict[str, Any],
                    outcome: str) -> list[dict[str, Any]]:
        code = self.proc.poll() if self.proc else None
        self._stop()
        finished = {r["query"] for r in records}
        side = {"csv": "csv", "duckdb": "DuckDB"}.get(running.get("running", ""), "csv")
        for sql in QUERIES:
            if sql not in finished:
                ran = sql == running.get("query")
                label = f"hang: {side}" if outcome == "hang" else outcome
                records.append({"file": path, "query": sql, "outcome": label,
                                "csv": f"{label} (exit {code})" if ran else
                                f"not run after the {label} of an earlier query",
                                "duckdb": ""})
        return records


def corpus_files(root: Path) -> list[str]:
    files = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if name not in _SKIP_NAMES and path.is_file():
                files.append(str(path))
    return files


def table(records: list[dict[str, Any]]) -> str:
    counts = {sql: Counter(r["outcome"] for r in records if r["query"] == sql) for sql in QUERIES}
    lines = ["| outcome | " + " | ".join(f"`{q}`" for q in QUERIES) + " |",
             "|---|" + "---|" * len(QUERIES)]
    for outcome in OUTCOMES:
        lines.append(f"| {outcome} | " + " | ".join(str(counts[q][outcome]) for q in QUERIES)
                     + " |")
    for sql in QUERIES:
        duck = sum(counts[sql][o] for o in ("agree", "differs", "csv refuses"))
        csv_answers = counts[sql]["agree"] + counts[sql]["differs"]
        share = f"{100 * csv_answers / duck:.1f}%" if duck else "n/a"
        lines.append(f"\n`{sql}`: csv answers {csv_answers} of the {duck} files DuckDB "
                     f"answers ({share}); agrees on {counts[sql]['agree']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per file")
    parser.add_argument("--jobs", type=int, default=1, help="files checked at once")
    parser.add_argument("--reuse", action="store_true",
                        help="keep a worker for the next file until it hangs or crashes")
    parser.add_argument("--details", type=Path, help="write one TSV line per file and query")
    parser.add_argument("--limit", type=int, help="check only the first N files")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if args.path is None:
        parser.error("PATH is required")
    files = corpus_files(args.path)[:args.limit]
    workers = [Worker(args.timeout, args.reuse) for _ in range(max(1, args.jobs))]
    started = time.perf_counter()

    def run(index: int) -> list[dict[str, Any]]:
        w = workers[index % len(workers)]
        return w.check(files[index])

    records: list[dict[str, Any]] = []
    # worker i takes files i, i + jobs, ...: one thread per worker
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        def lane(k: int) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for i in range(k, len(files), len(workers)):
                out.extend(run(i))
            workers[k]._stop()
            return out

        for part in pool.map(lane, range(len(workers))):
            records.extend(part)
    records.sort(key=lambda r: (r["file"], QUERIES.index(r["query"])))
    root = str(args.path)
    if args.details:
        with args.details.open("w") as out:
            out.write("file\tquery\toutcome\tcsv\tduckdb\tverdict\n")
            for r in records:
                fields = [os.path.relpath(r["file"], root), r["query"], r["outcome"],
                          r.get("csv", ""), r.get("duckdb", ""), r.get("verdict", "")]
                out.write("\t".join(f.replace("\t", " ").replace("\n", " ") for f in fields)
                          + "\n")
    print(f"{len(files)} files under {args.path}, {time.perf_counter() - started:.0f} s, "
          f"timeout {args.timeout:g} s, load average {os.getloadavg()[0]:.1f}\n")
    print(table(records))


if __name__ == "__main__":
    main()
