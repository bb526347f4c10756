#!/usr/bin/env python3
"""DuckDB's sqllogictest files as a differential check of the csv engine.

    .venv/bin/python bench/sqllogic_csv.py PATH... [--timeout 60] [--details OUT.tsv]

Every ``*.test`` file under each PATH (DuckDB's ``test/sql/...``; the repository's
own sample is ``tests/fixtures/sqllogic``) runs in a worker process with a time
limit, so a hang or a crash is counted, not suffered. Its ``statement`` records
run on an in-memory DuckDB; before each ``query`` record the tables then in it
are exported to CSV files (``COPY ... (HEADER)``, again only after a statement
changed them), mounted as sources of the same names on a csv engine (``fallback
= "duck"``) and on a duckdb engine, and the query runs on both: the csv engine
(answered natively, or by its fallback) against DuckDB over the same CSV files.
The expected answers written in the file are not used: DuckDB over the CSV files
is the reference (a CSV round trip changes types, so the file's answers would not
hold).

Each query lands in one class (CLASSES); printed is the table of counts, the
native share (queries the csv engine answered itself, of those DuckDB answers),
and every query of the three classes issue #39 wants empty, with its file.
Records this runner does not read (``loop``, ``foreach``, ``require``, ``load``,
``mode skip``, ``onlyif`` another engine, ...) skip the rest of the file, or the
next record, and are counted as skipped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

#: the classes a query lands in; the first three must stay empty
CLASSES = ("native wrong", "native answers refused SQL", "csv error where DuckDB answers",
           "native agrees", "fallback agrees", "fallback differs", "undetermined",
           "both refuse", "hang", "crash")
BAD = CLASSES[:3]


def records(text: str) -> tuple[list[tuple[str, str]], int]:
    """The (kind, sql) records of a test file this runner reads, ``kind`` being
    ``statement ok``, ``statement error`` or ``query``; and how many it skipped."""
    out: list[tuple[str, str]] = []
    skipped = 0
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    skip_next = False
    for block in blocks:
        lines = [ln for ln in block.split("\n") if not ln.startswith("#")]
        while lines and lines[0].split(" ")[0] in ("onlyif", "skipif"):
            word, _, engine = lines[0].partition(" ")
            if (word == "onlyif") != (engine.strip() == "duckdb"):
                skip_next = True
            lines = lines[1:]
        if not lines:
            continue
        head = lines[0].split()
        if not head:
            continue
        if head[0] in ("loop", "foreach", "concurrentloop", "require", "load", "halt",
                       "mode", "require-env", "restart", "reconnect", "concurrentforeach"):
            if head[0] == "mode" and head[1:] != ["skip"]:
                continue
            skipped += sum(1 for b in blocks[blocks.index(block) + 1:]
                               if b.lstrip().startswith(("query", "statement")))
            return out, skipped  # the rest depends on what it changes
        if head[0] not in ("statement", "query"):
            continue
        body = lines[1:]
        if "----" in body:
            body = body[:body.index("----")]
        sql = "\n".join(body).strip()
        if skip_next or not sql:
            skip_next = False
            skipped += 1
            continue
        if head[0] == "statement":
            out.append(("statement error" if head[1:2] == ["error"] else "statement ok", sql))
        else:
            out.append(("query", sql))
    return out, skipped


def _is_query(sql: str) -> bool:
    """A statement record that is a query (``statement error`` over a SELECT is how
    DuckDB's files say the binder refuses it): it is classified like a query."""
    return sql.lstrip("( \n").split(None, 1)[0].upper() in ("SELECT", "FROM", "WITH", "VALUES")


def _tables(con: Any) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
        "AND database_name = current_database() AND schema_name = 'main' "
        "ORDER BY table_name").fetchall()]


def run_file(path: str, folder: str) -> dict[str, Any]:
    """Every query of one test file, classified; runs in a worker process."""
    import duckdb

    import gateway
    from gateway.verify.compare import compare_tables

    recs, skipped = records(Path(path).read_text(errors="replace"))
    con = duckdb.connect()
    counts: Counter[str] = Counter()
    bad: list[tuple[str, str, str]] = []
    gw = None
    dirty = True
    try:
        for _kind, sql in recs:
            # a write is run, not compared, whether a ``statement`` or a ``query`` record
            # (``query I`` over a CREATE TABLE AS checks its row count)
            if not _is_query(sql):
                try:
                    con.execute(sql)
                    dirty = True
                except Exception:
                    pass
                continue
            if dirty:
                if gw is not None:
                    gw.close()
                sources = {}
                for name in _tables(con):
                    file = os.path.join(folder, f"{name}.csv")
                    con.execute(f"COPY \"{name}\" TO '{file}' (HEADER)")
                    sources[name] = {"path": file}
                gw = gateway.connect({
                    "engines": {"csv": {"type": "csv", "fallback": "duck"},
                                "duck": {"type": "duckdb"}},
                    "sources": sources})
                dirty = False
            assert gw is not None
            label = classify(gw, sql, compare_tables)
            counts[label] += 1
            if label in BAD or label == "fallback differs":
                bad.append((label, sql, _last_reason))
    finally:
        if gw is not None:
            gw.close()
        con.close()
    return {"counts": dict(counts), "bad": bad, "skipped": skipped}


_last_reason = ""


def classify(gw: Any, sql: str, compare: Any) -> str:
    global _last_reason
    try:
        expected = gw.execute(sql, engine="duck").to_arrow()
        duck_error = None
    except Exception as exc:
        expected, duck_error = None, exc
    try:
        result = gw.execute(sql, engine="csv")
        got = result.to_arrow()
        answered_by = result.notes.get("answered_by", result.engine)
        csv_error = None
    except Exception as exc:
        got, answered_by, csv_error = None, None, exc
    native = answered_by == "csv"
    if duck_error is not None:
        if csv_error is not None or not native:
            return "both refuse"
        _last_reason = f"DuckDB: {str(duck_error).splitlines()[0][:200]}"
        return "native answers refused SQL"
    if csv_error is not None:
        _last_reason = f"csv: {type(csv_error).__name__}: {str(csv_error).splitlines()[0][:200]}"
        return "csv error where DuckDB answers"
    verdict = compare(got, expected, sql=sql)
    same = verdict.category == "match" and got.schema.names == expected.schema.names
    _last_reason = "" if same else (verdict.message or "names differ")[:300]
    if verdict.category in ("nondeterministic", "order_unchecked") and \
            got.schema.names == expected.schema.names:
        # the rest agrees, and what differs cannot be told from the answers (first(),
        # DISTINCT ON over ties, USING SAMPLE...): neither agreement nor a difference
        return "undetermined"
    if native:
        return "native agrees" if same else "native wrong"
    return "fallback agrees" if same else "fallback differs"


def _worker(path: str, out: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="sqllogic-") as folder:
        try:
            out.put(run_file(path, folder))
        except BaseException as exc:
            out.put({"error": f"{type(exc).__name__}: {exc}"[:300]})


def run_isolated(path: str, timeout: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(path, out))
    proc.start()
    try:
        return out.get(timeout=timeout)
    except Exception:
        return {"hang": True}
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def test_files(paths: list[str]) -> list[str]:
    found: list[str] = []
    for p in paths:
        found.extend(sorted(str(f) for f in Path(p).rglob("*.test")) if Path(p).is_dir() else [p])
    return found


def main(argv: list[str] | None = None) -> dict[str, int]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--details", help="write every query of the bad classes here (JSON lines)")
    args = ap.parse_args(argv)
    totals: Counter[str] = Counter()
    skipped = 0
    details = []
    files = test_files(args.paths)
    for path in files:
        res = run_isolated(path, args.timeout)
        if res.get("hang"):
            totals["hang"] += 1
            details.append(("hang", "", path))
            continue
        if "error" in res:
            totals["crash"] += 1
            details.append(("crash", res["error"], path))
            continue
        totals.update(res["counts"])
        skipped += res["skipped"]
        details.extend((label, f"{sql}  [{why}]", path) for label, sql, why in res["bad"])
    print(f"{len(files)} files, {sum(totals.values())} queries ({skipped} records skipped)\n")
    print("| class | queries |\n|---|---|")
    for c in CLASSES:
        print(f"| {c} | {totals[c]} |")
    duck_answers = sum(totals[c] for c in ("native wrong", "csv error where DuckDB answers",
                                            "native agrees", "fallback agrees",
                                            "fallback differs", "undetermined"))
    native = totals["native agrees"] + totals["native wrong"]
    share = native / duck_answers if duck_answers else 0.0
    print(f"\nnative share: {native} of the {duck_answers} queries DuckDB answers ({share:.1%})")
    for label, what, path in details:
        print(f"{label}: {path}: {what}".replace("\n", " "))
    if args.details:
        with open(args.details, "w") as f:
            for label, what, path in details:
                f.write(json.dumps({"class": label, "query": what, "file": path}) + "\n")
    return dict(totals)


if __name__ == "__main__":
    found = main()
    sys.exit(1 if any(found.get(c) for c in BAD) else 0)
