"""Driving the compiled scanner over a file: line-aligned chunks on every core.

Chunk starts are guesses (the byte after the first newline past each
boundary, found with pread so the mapping is never touched); each chunk's scan
reports where its last row really ended, and a chunk whose guess disagrees
(it began inside a quoted field) is scanned again from the true position.
The first chunk starts at a known row start, so by induction every accepted
chunk is aligned, and only accepted chunks' errors and skip counts count.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.errors import Cancelled, QueryError, Unsupported
from gateway.records import Record
from gateway_csv import _scanner
from gateway_csv.layout import KIND_NAMES, Layout

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

DEFAULT_CHUNK_BYTES = 8 << 20
#: a grouped scan's chunks, in chunk_bytes: each chunk's groups are a table to merge, so
#: 1e5 groups in chunks of 8 MiB (about 1e5 rows of h2o) cost a merge per row; a chunk
#: that turns out to be of mostly new groups is cut back to chunk_bytes (_scanner.scan's
#: spill), so many groups hold no more memory than before
GROUPED_CHUNKS = 8
#: columns one scan reads (MAX_SLOTS in _scanner.c)
MAX_COLUMNS = 2048
_ERRORS = {
    "ragged": "the row has {found}; {expected}",
    "wide": "the row ends in one delimiter more than {header}, its last field empty (DuckDB "
            "drops that field and reads the row; the csv engine does so only when its sample "
            "has such rows)",
    "unterminated_quote": "a quoted field is not closed before the end of the file",
    "after_quote": "text follows the closing quote of a field",
    "type": "the value does not fit the column's type {type}",
    "utf8": "the value is not valid UTF-8",
}


class Plan(Record):
    """What one scan computes (see _scanner.scan).

    slots: ((column index, kind), ...) by increasing column.
    filters: ((slot, op, ctype, value), ...), all of which a row must pass.
    keys / aggs: the AGG mode's group keys ((slot, fn), ...) and aggregates
        ((fn, slot), ...), or None for COLUMNS mode.
    """

    __slots__ = ("slots", "filters", "keys", "aggs")

    def __init__(self, slots: tuple[tuple[int, int], ...],
                 filters: tuple[tuple[int, int, str, Any], ...] = (),
                 keys: tuple[tuple[int, int], ...] | None = None,
                 aggs: tuple[tuple[int, int], ...] | None = None) -> None:
        self.slots, self.filters, self.keys, self.aggs = slots, filters, keys, aggs


class Chunk(Record):
    """A range a scan reads: rows starting from ``start`` (a guess but for the first
    chunk) up to ``boundary``; ``unindexed``: a grouped scan appends its rows as groups
    of their own from the start (the rest of a chunk of mostly new groups)."""

    __slots__ = ("start", "boundary", "unindexed")

    def __init__(self, start: int, boundary: int, unindexed: bool = False) -> None:
        self.start, self.boundary, self.unindexed = start, boundary, unindexed


class ScanPool:
    """The engine's scanner threads, started when a scan first has more than one chunk.

    A file of one chunk is scanned in the thread that reads it (:meth:`Scanner.results`),
    so a small file's query starts no thread and does not import
    ``concurrent.futures`` (with ``logging``: 3-4 ms of a one-row ``arrowgate query``).
    """

    def __init__(self, threads: int):
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                                thread_name_prefix="csv-scan")
            return self._pool.submit(fn, *args)

    def shutdown(self) -> None:
        """Wait for the running scans, cancel the queued ones (the pool can start again)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class Scanner:
    """One mapped file, its layout and the worker pool.

    Args:
        path: the file.
        layout: its layout (from :func:`gateway_csv.layout.sniff`).
        pool: the thread pool chunks run on.
        chunk_bytes: the target chunk size; tests force tiny chunks.
        engine: the engine's name, for errors raised while a result streams.
        stop: called before each chunk is used: a true answer ends the scan with
            :class:`gateway.errors.Cancelled`; it may also raise its own error
            (``QueryHandle.check`` raises Cancelled or QueryTimeout).
    """

    def __init__(self, path: str, file: Any, layout: Layout, pool: ScanPool | ThreadPoolExecutor,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, engine: str | None = None,
                 stop: Callable[[], bool | None] | None = None):
        self.path = path
        self.stop = stop
        self.engine = engine
        self.file = file
        self.layout = layout
        self.pool = pool
        self.chunk_bytes = max(1, chunk_bytes)
        self.skipped = 0

    def chunks(self, chunk_bytes: int | None = None) -> list[Chunk]:
        return self._split(self.layout.data_start, self.file.size, chunk_bytes or self.chunk_bytes)

    def _split(self, start: int, size: int, step: int, unindexed: bool = False) -> list[Chunk]:
        """[start, size) in chunks of about ``step`` bytes, the first starting at ``start``."""
        starts = [start]
        bounds: list[int] = []
        pos = start + step
        while pos < size:
            if self.stop is not None and self.stop():
                raise Cancelled("the query was cancelled", engine=self.engine)
            guess = self._row_start_after(pos)
            if guess >= size:
                break
            if guess > starts[-1]:
                bounds.append(pos)
                starts.append(guess)
            pos = max(pos + step, guess)
        bounds.append(size)
        return [Chunk(s, b, unindexed) for s, b in zip(starts, bounds, strict=True)]

    def _row_start_after(self, pos: int) -> int:
        """The byte after the first newline at or after pos - 1 (file size when none)."""
        offset = pos - 1
        # a row is a few hundred bytes where it is not a few megabytes: 4 KiB first,
        # then twice as much each read (64 KiB at once made a 339 MB file's 41 chunk
        # starts cost 6 ms, read before the first chunk is scanned)
        step = 4 << 10
        while offset < self.file.size:
            block = self.file.pread(offset, step)
            if not block:
                # the file is shorter than when it was opened: reading on would never
                # move past this offset
                raise self.error("changed", offset, -1)
            hit = block.find(b"\n")
            if hit >= 0:
                return offset + hit + 1
            offset += len(block)
            step = min(step * 2, 1 << 20)
        return self.file.size

    def _scan(self, chunk: Chunk, plan: Plan, limit: int, spill: int = -1,
              groups: int = 0, row_bytes: float = 0.0) -> tuple[Any, ...]:
        # an unindexed chunk's table has room for its rows from the start (row_bytes: the
        # bytes of a row where a chunk spilled), not grown by doubling and copying
        if chunk.unindexed and row_bytes:
            rows = (min(chunk.boundary - chunk.start, spill) if spill > 0
                    else chunk.boundary - chunk.start) / row_bytes
            groups = int(rows * 1.05) + 64
        return _scanner.scan(self.file, chunk.start, chunk.boundary, self.layout.dialect(),
                             plan.slots, plan.filters, plan.keys, plan.aggs, limit, spill,
                             chunk.unindexed, groups)

    def results(self, plan: Plan, limit: int = -1) -> Iterator[tuple[Any, ...]]:
        """Each aligned chunk's (rows_out, payload), in file order.

        A grouped scan (``plan.keys`` not None) reads chunks of GROUPED_CHUNKS times
        chunk_bytes; one that stops early, its rows mostly new groups, has the rest of
        its chunk scanned as chunks of chunk_bytes, each a payload of its own. A grouped
        chunk's table starts with room for the most groups a whole chunk had so far.

        Raises:
            QueryError: a malformed row (file, line, byte offset, column), unless the
                layout skips them; skipped rows are added to :attr:`skipped`.
        """
        grouped = plan.keys is not None and limit < 0
        spill = self.chunk_bytes if grouped else -1
        chunks = self.chunks(self.chunk_bytes * GROUPED_CHUNKS if grouped else None)
        ahead = max(2, 2 * (os.cpu_count() or 1))
        # the chunks not yet yielded, in file order, each with its scan once submitted
        work: deque[tuple[Chunk, Future[tuple[Any, ...]] | None]] = \
            deque((chunk, None) for chunk in chunks)
        expected = chunks[0].start
        groups = 0
        row_bytes = 0.0
        try:
            while work:
                if self.stop is not None and self.stop():
                    raise Cancelled("the query was cancelled", engine=self.engine)
                if len(work) == 1 and work[0][1] is None:
                    # a file of one chunk is scanned in this thread (see ScanPool)
                    chunk, _ = work.popleft()
                    result = self._scan(chunk, plan, limit, spill, groups, row_bytes)
                else:
                    for i in range(min(ahead, len(work))):
                        if work[i][1] is None:
                            work[i] = (work[i][0], self.pool.submit(
                                self._scan, work[i][0], plan, limit, spill, groups, row_bytes))
                    chunk, task = work.popleft()
                    assert task is not None
                    result = task.result()
                if chunk.start != expected:
                    # the guess started inside a quoted field: rescan from the real row start
                    chunk = Chunk(expected, chunk.boundary, chunk.unindexed)
                    result = self._scan(chunk, plan, limit, spill, groups, row_bytes)
                end, seen, rows_out, skipped, error, payload = result
                if error is not None:
                    raise self.error(*error)
                self.skipped += skipped
                expected = end
                if grouped and not work and end >= chunk.boundary:
                    # the last scan: the freed tables' arrays kept for the next scan's go
                    # back to the system before the caller merges the last chunks (q9's
                    # partitions grow most then: 40 MB off its peak)
                    _scanner.pool_release()
                yield rows_out, payload
                if limit >= 0:
                    limit -= rows_out
                    if limit <= 0:
                        return
                elif grouped and end < chunk.boundary:
                    # it stopped early (spill): the rest, without looking rows up, and so
                    # the chunks not yet started (which looked their rows up until they
                    # stopped: q9 spent a tenth of its time there)
                    if seen:
                        row_bytes = row_bytes or (end - chunk.start) / seen
                    work = deque((Chunk(c.start, c.boundary, True) if task is None else c, task)
                                 for c, task in work)
                    work.extendleft((rest, None) for rest in reversed(
                        self._split(end, chunk.boundary, self.chunk_bytes, unindexed=True)))
                elif grouped and not chunk.unindexed:
                    groups = max(groups, payload.groups)
        finally:
            # an error, an early stop or an abandoned stream: speculative scans still
            # running must end before the caller unmaps the file
            rest = [task for _chunk, task in work if task is not None]
            for task in rest:
                task.cancel()
            for task in rest:
                if not task.cancelled():
                    task.exception()

    def error(self, kind: str, offset: int, column: int) -> QueryError | Unsupported:
        if kind == "changed":
            return QueryError(f"{self.path}: the file changed during the scan (it was "
                              "truncated or rewritten while being read)",
                              hint="run the query again once the file is no longer being "
                                   "written", engine=self.engine, kind="resource")
        layout = self.layout
        line = self._line_of(offset)
        what = _ERRORS.get(kind, kind).format(
            found=_fields(self._fields_at(offset)) if kind == "ragged" else "",
            expected=(f"the header has {layout.ncols}" if layout.header else
                      f"the first row has {layout.ncols}"),
            header="the header" if layout.header else "the first row",
            type=KIND_NAMES[layout.kinds[column]] if 0 <= column < layout.ncols else "")
        where = f"{self.path}: line {line}, byte {offset}"
        if 0 <= column < layout.ncols and kind not in ("ragged", "wide"):
            where += f", column {layout.names[column]!r}"
        if kind == "type":
            # DuckDB's reader is laxer past its sample: a BIGINT column takes 0x1F, 0b11,
            # 1_000, 5.0 and 1e3, which this scanner refuses; so the value is left to
            # DuckDB, which reads it or refuses it itself (through the fallback)
            return Unsupported(
                f"{where}: {what} as the csv engine reads it (plain digits, a sign, a "
                "decimal point); DuckDB reads more forms there (hexadecimal, binary, "
                "underscores, exponents) and answers or refuses the value itself",
                engine=self.engine, engines=("duckdb",),
                hint='set fallback on the csv engine to a duckdb engine, declare the '
                     'column\'s type in the source\'s "columns" table, or set on_error = '
                     '"skip"')
        if kind in ("ragged", "wide", "after_quote", "unterminated_quote"):
            # DuckDB answers some queries over such a file: past its sample it drops the
            # empty field of a row ending in one delimiter more than the header, and a
            # WHERE its optimizer proves false or a LIMIT it reaches first never reads the
            # row; so the row is left to DuckDB, which answers or refuses (the fallback)
            return Unsupported(
                f"{where}: {what}", engine=self.engine, engines=("duckdb",),
                hint=f"the sniffer chose delimiter {layout.delimiter!r} and quote "
                     f"{layout.quote!r}" + (" and took the first line as the header"
                                            if layout.header else "")
                     + "; set delimiter, quote or header on the source if that is wrong, "
                       'on_error = "skip" to skip malformed rows, or fallback on the csv '
                       "engine to a duckdb engine")
        return QueryError(f"{where}: {what}", engine=self.engine, kind="type",
                          hint='set on_error = "skip" on the source to skip malformed rows')

    def _fields_at(self, offset: int) -> int:
        """How many fields the row at ``offset`` has (quotes respected)."""
        import csv
        import io

        layout = self.layout
        text = self.file.pread(offset, 1 << 20).decode("utf-8", "replace")
        quoting = {"quotechar": layout.quote} if layout.quote else {"quoting": csv.QUOTE_NONE}
        try:
            row = next(csv.reader(io.StringIO(text, newline=""), delimiter=layout.delimiter,
                                  strict=False, **quoting), [])
        except csv.Error:  # a quoted field past the csv module's size limit
            return text.split("\n", 1)[0].count(layout.delimiter) + 1
        return len(row)

    def _line_of(self, offset: int) -> int:
        """1-based physical line number of a byte offset."""
        lines, pos, step = 1, 0, 1 << 20
        while pos < offset:
            block = self.file.pread(pos, min(step, offset - pos))
            if not block:
                break
            lines += block.count(b"\n")
            pos += len(block)
        return lines


def _fields(n: int) -> str:
    return f"{n} field" if n == 1 else f"{n} fields"
