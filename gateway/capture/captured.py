"""Capturing the statements clients send, to replay them against another engine.

``arrowgate serve`` with a ``[serve.capture]`` section keeps the statements
its clients run as JSON lines in a folder::

    [serve.capture]
    folder = "capture"        # created mode 0700; its files are 0600
    sample = 0.1              # the share of statements kept (default 1.0)
    engines = ["duck"]        # whose statements (default: every engine)
    users = ["app"]           # whose statements (default: every user)
    max_bytes = 268435456     # the folder's cap: the oldest files go first
    include_writes = true     # keep writes, DDL, settings and transactions too

Each line is one statement the service received, whatever became of it:
``sql``, ``engine``, ``user``, ``time`` (ISO 8601, UTC), ``kind`` (``read``,
``write``, ``ddl``, ``settings`` or ``transaction``, as the statement pipeline
reads it: :func:`gateway.sql.kinds.capture_kind`), ``parameters`` (a prepared
statement's parameter rows, as an Arrow IPC stream in base64, so every type
comes back exactly), ``settings`` (the ``SET`` statements its session ran
before it, which change answers), ``ms`` (the primary's latency), ``rows``,
``outcome`` (``ok``, ``error``, ``refused``, ``cancelled``, ``expired``,
``disconnected``) and, for an error or a refusal, ``error_kind`` and ``error``
(its message, masked). Credentials are never written: a statement's text,
settings and messages are masked from their structure
(:func:`gateway.masking.mask_text`) before they are written; parameters are kept
as sent, and they can be as sensitive as the data (hence the modes).
``arrowgate shadow --primary A --reference B FOLDER`` replays a capture
(:func:`read_capture`).

The folder is a write-ahead record: an entry reaches its file (the operating
system's cache) within :data:`FLUSH_SECONDS` of being offered, so a killed
service loses at most that window. A line torn by a kill is skipped with a
warning when the capture is read. An entry longer than the file cap
(``max_bytes / 8``) is refused and counted (:attr:`CaptureWriter.oversized`),
never a reason to remove older files.

Capture never slows or fails a client's statement: :meth:`CaptureWriter.offer`
puts the entry in a bounded queue and returns; one thread writes. When the
queue is full, or the folder cannot be written (a full disk, a permission),
entries are dropped and counted (:attr:`CaptureWriter.dropped`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import json
import os
import queue
import random
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.engine import Option
from gateway.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.corpus import Query

CAPTURE_OPTIONS: dict[str, Option] = {
    "folder": Option((str,), required=True, help="where captured statements are written"),
    "sample": Option((int, float), 1.0, help="the share of statements kept, 0 to 1"),
    "engines": Option((list,), None, help="the engines whose statements are kept (default: all)"),
    "users": Option((list,), None, help="the users whose statements are kept (default: all)"),
    "max_bytes": Option((int,), 256 * 2**20,
                        help="the folder's cap in bytes; the oldest files are removed first"),
    "include_writes": Option((bool,), True,
                             help="keep writes, DDL, settings and transactions too"),
}
#: a file of the folder is closed and a new one begun past this share of max_bytes
_FILE_SHARE = 8
#: entries waiting for the writer; past this, entries are dropped (and counted)
QUEUE_ENTRIES = 10_000
#: the longest an offered entry waits in the writer's buffer before it is in its file
FLUSH_SECONDS = 0.05
PREFIX = "capture-"


@dataclass(frozen=True)
class CaptureSettings:
    """A checked ``[serve.capture]`` section."""

    folder: Path
    sample: float = 1.0
    engines: frozenset[str] | None = None
    users: frozenset[str] | None = None
    max_bytes: int = 256 * 2**20
    include_writes: bool = True

    @classmethod
    def from_section(cls, section: Mapping[str, Any], base: Path, engines: Sequence[str],
                     path: str | None = None) -> CaptureSettings:
        """Check a ``[serve.capture]`` section.

        Raises:
            ConfigError: a wrong key or value, naming the key.
        """
        from gateway.config import check_options

        def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
            return ConfigError(message, path=path, key=key, hint=hint)

        values, _ = check_options("serve.capture", section, CAPTURE_OPTIONS, fail)
        if not 0.0 <= values["sample"] <= 1.0:
            raise fail("serve.capture.sample", f"must be between 0 and 1, not {values['sample']}")
        if values["max_bytes"] <= 0:
            raise fail("serve.capture.max_bytes", "must be a positive number of bytes")
        for key in ("engines", "users"):
            names = values[key]
            if names is not None and not all(isinstance(n, str) for n in names):
                raise fail(f"serve.capture.{key}", "must be a list of names")
        unknown = [e for e in values["engines"] or () if e not in engines]
        if unknown:
            raise fail("serve.capture.engines", f"names no declared engine: {unknown[0]!r}",
                       "declared engines: " + ", ".join(engines))
        folder = Path(values["folder"])
        return cls(folder=folder if folder.is_absolute() else base / folder,
                   sample=float(values["sample"]),
                   engines=None if values["engines"] is None else frozenset(values["engines"]),
                   users=None if values["users"] is None else frozenset(values["users"]),
                   max_bytes=values["max_bytes"], include_writes=values["include_writes"])


@dataclass
class CapturedStatement:
    """One statement a client ran, as captured (and as replay reads it back)."""

    sql: str
    engine: str
    user: str
    time: str
    parameters: pa.Table | None = None
    settings: list[str] = field(default_factory=list)
    ms: float | None = None
    rows: int | None = None
    outcome: str = "ok"
    #: read, write, ddl, settings or transaction (:func:`gateway.sql.kinds.capture_kind`)
    kind: str = "read"
    #: an error's or a refusal's kind (:data:`gateway.errors.KINDS`) and message
    error_kind: str | None = None
    error: str | None = None

    @property
    def write(self) -> bool:
        """Whether replaying the statement changes something (anything but a read)."""
        return self.kind != "read"

    def to_json(self) -> str:
        from gateway.masking import mask_text

        # a statement may carry a credential its user typed (CREATE SECRET, a refused
        # ATTACH 'password=...', a configured secret quoted back): masked from its structure
        record: dict[str, Any] = {
            "sql": mask_text(self.sql), "engine": self.engine, "user": self.user,
            "time": self.time, "kind": self.kind,
            "settings": [mask_text(s) for s in self.settings],
            "ms": self.ms, "rows": self.rows, "outcome": self.outcome,
            "error_kind": self.error_kind,
            "error": None if self.error is None else mask_text(self.error),
            "parameters": None if self.parameters is None else _ipc(self.parameters)}
        return json.dumps(record, default=str)

    @classmethod
    def from_json(cls, line: str) -> CapturedStatement:
        record = json.loads(line)
        parameters = record.get("parameters")
        kind = record.get("kind") or ("write" if record.get("write") else "read")
        return cls(sql=record["sql"], engine=record["engine"], user=record["user"],
                   time=record["time"],
                   parameters=None if parameters is None else _table(parameters),
                   settings=list(record.get("settings") or []), ms=record.get("ms"),
                   rows=record.get("rows"), outcome=record.get("outcome", "ok"),
                   kind=kind, error_kind=record.get("error_kind"), error=record.get("error"))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class CaptureWriter:
    """Writes captured statements from a thread of its own; never blocks a statement."""

    def __init__(self, settings: CaptureSettings):
        self.settings = settings
        #: entries dropped: the queue was full, or the folder could not be written
        self.dropped = 0
        #: entries refused for being longer than a file may be (``max_bytes / 8``)
        self.oversized = 0
        self.written = 0
        self._queue: queue.Queue[CapturedStatement | _Marker | None] = queue.Queue(QUEUE_ENTRIES)
        self._file: Any = None
        self._path: Path | None = None
        self._file_bytes = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="arrowgate-capture", daemon=True)
        self._thread.start()

    def wanted(self, engine: str, user: str, kind: str) -> bool:
        """Whether a statement of ``kind`` by ``user`` on ``engine`` is to be kept
        (sampling included)."""
        s = self.settings
        if kind != "read" and not s.include_writes:
            return False
        if s.engines is not None and engine not in s.engines:
            return False
        if s.users is not None and user not in s.users:
            return False
        return s.sample >= 1.0 or random.random() < s.sample

    def offer(self, entry: CapturedStatement) -> None:
        """Queue ``entry`` for writing; drop it (counted) when the writer is behind."""
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until what was offered so far is written (for tests and shutdown)."""
        done = threading.Event()
        self._queue.put(_Marker(done))
        done.wait(timeout)

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(10)

    def _run(self) -> None:
        # buffered writes, flushed once the queue is empty or FLUSH_SECONDS after the
        # oldest unflushed entry, whichever comes first
        unflushed_since: float | None = None
        while True:
            wait = None if unflushed_since is None else \
                max(0.0, unflushed_since + FLUSH_SECONDS - time.monotonic())
            try:
                entry = self._queue.get(timeout=wait)
            except queue.Empty:
                entry = _FLUSH
            if entry is None:
                self._close_file()
                return
            if isinstance(entry, _Marker):
                self._flush()
                unflushed_since = None
                entry.done.set()
                continue
            try:
                if self._write(entry.to_json() + "\n"):
                    self.written += 1
                    unflushed_since = unflushed_since or time.monotonic()
            except OSError:
                with self._lock:
                    self.dropped += 1
                self._close_file()
            if unflushed_since is not None and (
                    self._queue.empty() or time.monotonic() - unflushed_since >= FLUSH_SECONDS):
                self._flush()
                unflushed_since = None

    def _flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError:
                self._close_file()

    def _write(self, line: str) -> bool:
        """Write one entry; False (counted) for one longer than a file may be."""
        data = line.encode()
        limit = max(1, self.settings.max_bytes // _FILE_SHARE)
        if len(data) > limit:
            with self._lock:
                self.oversized += 1
            return False
        if self._file is None or self._file_bytes + len(data) > limit:
            self._close_file()
            self._open_file()
            self._rotate(len(data))
        self._file.write(data)
        self._file_bytes += len(data)
        return True

    def _open_file(self) -> None:
        folder = self.settings.folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%f")
        path = folder / f"{PREFIX}{stamp}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "ab", buffering=64 * 1024)
        self._file_bytes = 0
        self._path = path

    def _close_file(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _rotate(self, incoming: int) -> None:
        """Remove the oldest files until the folder holds at most ``max_bytes``."""
        files = sorted(self.settings.folder.glob(f"{PREFIX}*.jsonl"))
        sizes = {f: f.stat().st_size for f in files}
        total = sum(sizes.values()) + incoming
        for old in files:
            if total <= self.settings.max_bytes or old == self._path:
                break
            with contextlib.suppress(OSError):
                old.unlink()
                total -= sizes[old]


@dataclass
class _Marker:
    done: threading.Event


#: what the writer's queue yields when it waited FLUSH_SECONDS for nothing
_FLUSH = _Marker(threading.Event())


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a capture folder (it holds ``capture-*.jsonl`` files) or file."""
    if path.is_dir():
        return any(path.glob(f"{PREFIX}*.jsonl"))
    return path.name.startswith(PREFIX) and path.suffix == ".jsonl"


def read_capture(path: Path, since: str | None = None,
                 until: str | None = None) -> Iterator[CapturedStatement]:
    """The statements of a capture folder (or file), oldest first, within ``[since, until)``
    (ISO 8601 times, compared as UTC).

    A file's last line that is cut short (the service was killed while writing it) is
    skipped with a ``RuntimeWarning`` naming the file.

    Raises:
        ConfigError: a line before a file's last that is not a captured statement,
            naming the file and line.
    """
    if not path.exists():
        raise ConfigError("no capture here", path=str(path),
                          hint="name the [serve.capture] folder of a service that captured")
    files = sorted(path.glob(f"{PREFIX}*.jsonl")) if path.is_dir() else [path]
    low, high = _instant(since), _instant(until)
    for file in files:
        with file.open(encoding="utf-8", errors="replace") as lines:
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    entry = CapturedStatement.from_json(line)
                except (ValueError, KeyError, TypeError) as exc:
                    if not line.endswith("\n"):  # the last line, torn by a kill
                        warnings.warn(f"{file}: its last line (line {n}) was cut short "
                                      "(the service was stopped while writing it); skipped",
                                      RuntimeWarning, stacklevel=2)
                        break
                    raise ConfigError(f"line {n} is not a captured statement: {exc}",
                                      path=str(file)) from None
                at = _instant(entry.time)
                if (low is not None and at is not None and at < low) or \
                        (high is not None and at is not None and at >= high):
                    continue
                yield entry


def _instant(text: str | None) -> datetime.datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"not an ISO 8601 time: {text!r}",
                          hint="e.g. 2026-12-01T14:00 or 2026-12-01T14:00:00+00:00") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _ipc(table: pa.Table) -> str:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def _table(text: str) -> pa.Table:
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(base64.b64decode(text))).read_all()


def replay_queries(path: Path, *, since: str | None = None, until: str | None = None,
                   dedupe: bool = False, include_writes: bool | None = None) -> list[Query]:
    """A capture as the corpus ``arrowgate shadow`` runs: one query per captured statement
    (one per parameter row of a prepared statement), named by its text (cut to 60
    characters), the start of its shape's hash (:func:`gateway.sql.kinds.fingerprint`)
    and its place in the capture.

    With ``dedupe`` each shape of query runs once, with the first values seen,
    weighted by how often it was seen; its ``captured_ms`` holds every run's
    latency. Every captured statement is there, writes, DDL, settings and
    transactions too, each with its ``kind``: the replay decides what it runs and
    counts what it does not (``include_writes`` is kept for callers that want
    the queries alone).
    """
    from gateway.sql.corpus import Query
    from gateway.sql.kinds import fingerprint

    queries: list[Query] = []
    shapes: dict[str, int] = {}
    for entry in read_capture(path, since, until):
        if entry.write and not include_writes and include_writes is not None:
            continue
        rows = entry.parameters.to_pylist() if entry.parameters is not None else [None]
        shape = fingerprint(entry.sql)
        for row in rows:
            values = None if row is None else tuple(row.values())
            ms = () if entry.ms is None else (float(entry.ms),)
            if dedupe and not entry.write and shape in shapes:
                at = shapes[shape]
                seen = queries[at]
                queries[at] = dataclasses.replace(seen, weight=seen.weight + 1,
                                                  captured_ms=seen.captured_ms + ms)
                continue
            shapes.setdefault(shape, len(queries))
            # named by its text, which a person reads; the shape's hash tells apart two
            # shapes whose text starts alike
            readable = " ".join(entry.sql.split())
            readable = readable if len(readable) <= 60 else readable[:59] + "…"
            name = f"{readable} [{shape[:6]}]" if dedupe else \
                f"{readable} [{shape[:6]}:{len(queries) + 1}]"
            queries.append(Query(name=name, sql=entry.sql,
                                 file=str(path), parameters=values,
                                 settings=tuple(entry.settings), captured_ms=ms,
                                 kind=entry.kind))
    return queries
