"""The shadow store: where shadow records are appended and what ``shadow report`` reads.

One Parquet dataset: a folder of Parquet files read as one table. Records
are appended in batches (:meth:`ShadowStore.add` buffers them per process and
writes one file per flush); every file is written under a hidden temporary
name and renamed into place, so any number of threads and processes append
without locks, and a writer killed mid-write leaves only a hidden temporary
file that readers never see. Folders written one file per query (before
batching) read the same way. A record's message and evidence pass through
:func:`gateway.masking.mask` first: evidence quotes the answers' values, and an
answer can hold a secret the gateway knows.

A file in the folder that is not a store file (corrupt, another program's
Parquet, a symlink to nothing) is skipped with a one-line warning naming it,
and the next compaction moves it into ``quarantine/``, where it is not read
again.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError
from gateway.masking import mask

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.shadow.record import ShadowRecord


_COLUMNS = ("id", "time", "name", "sql", "primary", "reference", "status", "category", "message",
            "evidence", "skip_reason", "primary_ms", "reference_ms", "ratio", "primary_rows",
            "reference_rows", "primary_peak_mb", "reference_peak_mb", "noise_checked",
            "answered_by", "downgraded", "query_id")
#: a buffer is written when it holds this many records, or its oldest is this old
FLUSH_RECORDS = 100
FLUSH_SECONDS = 5.0
#: past this many files, a flush merges them (one process at a time)
COMPACT_FILES = 64
#: a temporary file older than this was left by a writer that died
STALE_SECONDS = 3600.0
#: the subfolder compaction moves unreadable files into
QUARANTINE = "quarantine"
#: the columns a file must have to be taken for a store file
_REQUIRED = ("id", "time", "status")

log = logging.getLogger("arrowgate.shadow_store")
_warned: set[Path] = set()


class _Unreadable(Exception):
    """A file in the store folder that is no store file; the message says why."""


class ShadowStore:
    """A Parquet dataset folder of shadow records.

    :meth:`append` writes one file now; :meth:`add` buffers records and
    writes one file per :data:`FLUSH_RECORDS` records or
    :data:`FLUSH_SECONDS` seconds (and at exit, and before this process
    reads the store). :meth:`compact` merges the files.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def append(self, records: list[ShadowRecord]) -> None:
        """Write ``records`` as one new file, now.

        Raises:
            GatewayError: the folder cannot be written.
        """
        if not records:
            return
        self._write(_records_table(records), "")
        if len(self.files()) > COMPACT_FILES:
            self.compact(wait=False)

    def add(self, record: ShadowRecord) -> None:
        """Buffer ``record``; it is written with the next flush of this process's buffer."""
        _buffer(self.path).add(record)

    def flush(self) -> None:
        """Write what this process has buffered for this store.

        Raises:
            GatewayError: the folder cannot be written (the records stay buffered).
        """
        _buffer(self.path).flush()

    def _write(self, table: pa.Table, tag: str) -> Path:
        import pyarrow.parquet as pq

        stem = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}{tag}"
        tmp = self.path / f".{stem}.tmp"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, tmp)
            final = self.path / f"{stem}.parquet"
            os.replace(tmp, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise GatewayError(f"cannot write the shadow store {self.path}: {exc.strerror}",
                               hint="set [shadow] store to a writable folder, or false") from None
        return final

    def files(self) -> list[Path]:
        return sorted(self.path.glob("[!.]*.parquet")) if self.path.is_dir() else []

    def read(self) -> pa.Table:
        """Every record, oldest first (this process's buffered records are flushed first).

        Raises:
            GatewayError: the store does not exist or holds no record.
        """
        import pyarrow as pa

        _flush_if_buffered(self.path)
        tables = [table for _, table in self._read_all(quarantine=False)]
        if not tables:
            raise GatewayError(f"no shadow records in {self.path}",
                               hint="run queries in shadow mode first, or pass --store")
        return _unique(pa.concat_tables(tables, promote_options="default")).sort_by("time")

    def _read_all(self, *, quarantine: bool) -> list[tuple[Path, pa.Table]]:
        """Every store file and its records; unreadable files are skipped, saying so (and
        moved into ``quarantine/`` when ``quarantine``)."""
        while True:
            tables, vanished = [], False
            for f in self.files():
                try:
                    table = _read_file(f)
                except _Unreadable as exc:
                    self._set_aside(f, str(exc), quarantine)
                    continue
                if table is None:
                    vanished = True  # a compaction merged it since the listing
                    break
                tables.append((f, table))
            if not vanished:
                return tables

    def _set_aside(self, path: Path, why: str, quarantine: bool) -> None:
        if quarantine:
            folder = self.path / QUARANTINE
            try:
                folder.mkdir(exist_ok=True)
                os.replace(path, folder / path.name)
            except OSError as exc:
                log.warning("shadow store: cannot move %s into %s: %s", path, folder,
                            exc.strerror)
                return
            log.warning("shadow store: moved %s into %s: %s", path.name, folder, why)
        elif path not in _warned:
            _warned.add(path)
            log.warning("shadow store: skipped %s: %s (the next compaction moves it into "
                        "%s/)", path, why, QUARANTINE)

    def compact(self, wait: bool = True) -> None:
        """Merge every file into one, and remove temporary files writers left behind.

        One process compacts at a time (``wait=False``: skip when another
        is). Records appended meanwhile are in files of their own and stay.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".compact.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return
            for tmp in self.path.glob(".*.tmp"):
                try:
                    if time.time() - tmp.stat().st_mtime > STALE_SECONDS:
                        tmp.unlink()
                except FileNotFoundError:
                    pass
            import pyarrow as pa

            read = self._read_all(quarantine=True)
            if len(read) < 2:
                return
            files = [f for f, _ in read]  # files appended since stay as they are
            table = _unique(pa.concat_tables([t for _, t in read],
                                             promote_options="default")).sort_by("time")
            self._write(table, "-compacted")
            for f in files:  # a crash before the last unlink leaves duplicates: reads skip them
                f.unlink(missing_ok=True)


def _read_file(path: Path) -> pa.Table | None:
    """The records of one store file in the store's schema; None when it is gone.

    Raises:
        _Unreadable: the file is no store file (corrupt, foreign, a symlink to nothing).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.is_symlink() and not path.exists():
        raise _Unreadable("a symlink to nothing")
    if path.is_dir():
        raise _Unreadable("a folder, not a file")
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        return None
    except (pa.ArrowException, OSError) as exc:
        raise _Unreadable(f"not a readable Parquet file ({exc})") from None
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise _Unreadable("not a shadow store file (no column " + ", ".join(missing) + ")")
    schema = _schema()
    try:
        return pa.table([table.column(f.name).cast(f.type) if f.name in table.column_names
                         else pa.nulls(table.num_rows, f.type) for f in schema], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise _Unreadable(f"not a shadow store file ({exc})") from None


def _unique(table: pa.Table) -> pa.Table:
    """``table`` without repeated record ids (left by a compaction that died half-way)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pc.count_distinct(table.column("id")).as_py() == table.num_rows:
        return table
    first = (table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
             .group_by("id", use_threads=False).aggregate([("_row", "min")]))
    return table.take(pc.sort_indices(first.column("_row_min")))


class _Buffer:
    """One process's records waiting to be written to one store."""

    def __init__(self, store: ShadowStore):
        self.store = store
        self.records: list[ShadowRecord] = []
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def add(self, record: ShadowRecord) -> None:
        with self.lock:
            self.records.append(record)
            full = len(self.records) >= FLUSH_RECORDS
            if not full and self.timer is None:
                self.timer = threading.Timer(FLUSH_SECONDS, self._flush_quietly)
                self.timer.daemon = True
                self.timer.start()
        if full:
            self._flush_quietly()

    def flush(self) -> None:
        with self.lock:
            records, self.records = self.records, []
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            try:
                self.store.append(records)
            except GatewayError:
                self.records = records + self.records
                raise

    def _flush_quietly(self) -> None:
        import warnings

        try:
            self.flush()
        except GatewayError as exc:
            warnings.warn(f"shadow records not stored yet: {exc.message} ({exc.hint})",
                          RuntimeWarning, stacklevel=2)


_buffers: dict[Path, _Buffer] = {}
_buffers_lock = threading.Lock()


def _buffer(path: Path) -> _Buffer:
    # imported now, not by the flush at interpreter exit, where an import that registers
    # an atexit handler fails ("can't register atexit after shutdown") and the records
    # were lost: pyarrow.parquet, and concurrent.futures.thread, which pandas imports
    # when pyarrow builds the records' table from Python lists
    import concurrent.futures.thread  # noqa: F401

    import pyarrow.parquet  # noqa: F401

    key = path.absolute()
    with _buffers_lock:
        buf = _buffers.get(key)
        if buf is None:
            buf = _buffers[key] = _Buffer(ShadowStore(key))
        return buf


def _flush_if_buffered(path: Path) -> None:
    with _buffers_lock:
        buf = _buffers.get(path.absolute())
    if buf is not None:
        buf.flush()


def flush_all() -> None:
    """Write every record this process has waiting, now (a command's end calls it)."""
    _flush_all()


@atexit.register
def _flush_all() -> None:
    with _buffers_lock:
        buffers = list(_buffers.values())
    for buf in buffers:
        try:
            buf._flush_quietly()
        except Exception as exc:  # at exit a traceback helps no one: say what was lost
            log.warning("shadow store: %d records not written to %s: %s: %s",
                        len(buf.records), buf.store.path, type(exc).__name__, exc)


def _records_table(records: list[ShadowRecord]) -> pa.Table:
    import pyarrow as pa

    rows = [r.to_dict() for r in records]
    for row in rows:
        row["evidence"] = mask(json.dumps(mask(row["evidence"]), default=str))
        row["message"] = mask(row["message"])
        row["sql"] = mask(row["sql"])  # a statement may carry a credential (CREATE SECRET)
        row["name"] = mask(row["name"])
    return pa.Table.from_pylist([{c: row[c] for c in _COLUMNS} for row in rows], schema=_schema())


def _schema() -> pa.Schema:
    """The store files' schema (a file from before a column existed reads it as NULL)."""
    import pyarrow as pa

    return pa.schema([
        ("id", pa.string()), ("time", pa.string()), ("name", pa.string()), ("sql", pa.string()),
        ("primary", pa.string()), ("reference", pa.string()), ("status", pa.string()),
        ("category", pa.string()), ("message", pa.string()), ("evidence", pa.string()),
        ("skip_reason", pa.string()), ("primary_ms", pa.float64()),
        ("reference_ms", pa.float64()), ("ratio", pa.float64()), ("primary_rows", pa.int64()),
        ("reference_rows", pa.int64()), ("primary_peak_mb", pa.float64()),
        ("reference_peak_mb", pa.float64()), ("noise_checked", pa.bool_()),
        ("answered_by", pa.string()), ("downgraded", pa.bool_()), ("query_id", pa.int64()),
    ])


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
