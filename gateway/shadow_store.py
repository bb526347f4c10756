"""The shadow store: where shadow records are appended and what ``shadow report`` reads.

A folder of Parquet files, one per append, written under a temporary name and
renamed, so several processes append without locks and a reader never sees
half a file. A record's message and evidence pass through
:func:`gateway.masking.mask` first: evidence quotes the answers' values, and an
answer can hold a secret the gateway knows.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError
from gateway.masking import mask

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.shadow import ShadowRecord


_COLUMNS = ("id", "time", "name", "sql", "primary", "reference", "status", "category", "message",
            "evidence", "skip_reason", "primary_ms", "reference_ms", "ratio", "primary_rows",
            "reference_rows", "primary_peak_mb", "reference_peak_mb", "noise_checked",
            "answered_by")


class ShadowStore:
    """A folder of Parquet files, one per append, read as one table.

    Each append writes a new file under a temporary name and renames it, so
    several processes can append at once without locks, and a reader never
    sees half a file. :meth:`compact` merges the files.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def append(self, records: list[ShadowRecord]) -> None:
        """Append records.

        Raises:
            GatewayError: the folder cannot be written.
        """
        if not records:
            return
        import pyarrow.parquet as pq

        table = _records_table(records)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            stem = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            tmp = self.path / f".{stem}.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, self.path / f"{stem}.parquet")
        except OSError as exc:
            raise GatewayError(f"cannot write the shadow store {self.path}: {exc.strerror}",
                               hint="set [shadow] store to a writable folder, or false") from None

    def files(self) -> list[Path]:
        return sorted(self.path.glob("*.parquet")) if self.path.is_dir() else []

    def read(self) -> pa.Table:
        """Every record, oldest first.

        Raises:
            GatewayError: the store does not exist or holds no record.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = self.files()
        if not files:
            raise GatewayError(f"no shadow records in {self.path}",
                               hint="run queries in shadow mode first, or pass --store")
        tables = [pq.read_table(f) for f in files]
        return pa.concat_tables(tables, promote_options="default").sort_by("time")

    def compact(self) -> None:
        """Merge every file into one."""
        files = self.files()
        if len(files) < 2:
            return
        import pyarrow.parquet as pq

        table = self.read()
        stem = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-compacted"
        tmp = self.path / f".{stem}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.path / f"{stem}.parquet")
        for f in files:
            f.unlink()


def _records_table(records: list[ShadowRecord]) -> pa.Table:
    import pyarrow as pa

    rows = [r.to_dict() for r in records]
    for row in rows:
        row["evidence"] = mask(json.dumps(mask(row["evidence"]), default=str))
        row["message"] = mask(row["message"])
    schema = pa.schema([
        ("id", pa.string()), ("time", pa.string()), ("name", pa.string()), ("sql", pa.string()),
        ("primary", pa.string()), ("reference", pa.string()), ("status", pa.string()),
        ("category", pa.string()), ("message", pa.string()), ("evidence", pa.string()),
        ("skip_reason", pa.string()), ("primary_ms", pa.float64()),
        ("reference_ms", pa.float64()), ("ratio", pa.float64()), ("primary_rows", pa.int64()),
        ("reference_rows", pa.int64()), ("primary_peak_mb", pa.float64()),
        ("reference_peak_mb", pa.float64()), ("noise_checked", pa.bool_()),
        ("answered_by", pa.string()),
    ])
    return pa.Table.from_pylist([{c: row[c] for c in _COLUMNS} for row in rows], schema=schema)


def summarize(table: pa.Table, top: int = 10) -> dict[str, Any]:
    """What ``arrowgate shadow report`` shows, computed in DuckDB over the store's records.

    Returns:
        ``records``, ``skipped``, ``by_category`` (counts), ``queries`` (per
        query: runs, divergences, p50/p90/p99 latency ratio) and
        ``worst_ratio`` / ``recent_divergences`` (the worst offenders).
    """
    import duckdb

    con = duckdb.connect()
    try:
        con.register("records", table)
        key = "coalesce(name, left(regexp_replace(sql, '\\s+', ' ', 'g'), 80))"

        def rows(q: str) -> list[dict[str, Any]]:
            cur = con.execute(q)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

        total, skipped = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'skipped') FROM records").fetchall()[0]
        by_category = {r["category"]: r["n"] for r in rows(
            "SELECT category, count(*) AS n FROM records WHERE status = 'compared' "
            "GROUP BY category ORDER BY n DESC, category")}
        per_query = rows(
            f"SELECT {key} AS query, count(*) AS runs, "
            "count(*) FILTER (WHERE category NOT IN ('match', 'nondeterministic')) AS diverged, "
            "round(quantile_cont(ratio, 0.5), 3) AS ratio_p50, "
            "round(quantile_cont(ratio, 0.9), 3) AS ratio_p90, "
            "round(quantile_cont(ratio, 0.99), 3) AS ratio_p99 "
            "FROM records WHERE status = 'compared' GROUP BY query "
            "ORDER BY diverged DESC, ratio_p50 DESC NULLS LAST, query")
        worst = [q for q in per_query if q["ratio_p50"] is not None]
        worst.sort(key=lambda q: -q["ratio_p50"])
        recent = rows(
            f"SELECT time, {key} AS query, \"primary\", reference, category, message "
            "FROM records WHERE category NOT IN ('match', 'nondeterministic') "
            f"ORDER BY time DESC LIMIT {int(top)}")
        return {"records": total, "skipped": skipped, "by_category": by_category,
                "queries": per_query, "worst_ratio": worst[:top], "recent_divergences": recent}
    finally:
        con.close()
