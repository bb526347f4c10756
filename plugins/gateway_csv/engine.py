"""The ``csv`` engine: SQL on raw CSV files in place, through the compiled scanner."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.config import Source
from gateway.engine import Engine, EngineResult, EngineSession, Option
from gateway.errors import EngineConnectionError, GatewayError, QueryError, Unsupported

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.engine import CatalogColumn
    from gateway.result import QueryHandle
    from gateway_csv.layout import Layout
    from gateway_csv.scan import Scanner, ScanPool
    from gateway_csv.shape import Projection
    from gateway_csv.shape_aggregation import Aggregation
    from gateway_csv.topn import TopN


#: polled between scan chunks: true (or raising) stops the query
Stop = Callable[[], "bool | None"]


#: layouts one engine keeps in memory (the oldest found goes first)
_LAYOUTS_KEPT = 256
#: how long a file must have been left alone for its layout to be kept in memory
_SETTLED_NS = 2_000_000_000


def _options_key(options: dict[str, Any]) -> str:
    """A source's CSV options as text, for the layout cache's key: repr, not json (1 ms
    to import), and a nested table written in another order only misses the cache."""
    return repr(sorted(options.items()))


def _same_columns(scanners: list[Scanner], engine: str) -> None:
    """Refuse (Unsupported) a source whose files differ in their columns' names or types.

    Each file is sniffed on its own; the engine answers one schema, the first
    file's. DuckDB reads such files too, matching columns by name and widening
    types across them ('1' in one file and 'hello' in another make a VARCHAR):
    that is its fallback's to answer, not this engine's to fail at (pyarrow's
    "Failed to parse string" from the second file) or to answer otherwise.
    """
    first = scanners[0]
    want = [n.lower() for n in first.layout.names], first.layout.kinds, first.layout.formats
    for s in scanners[1:]:
        names = [n.lower() for n in s.layout.names]
        if (names, s.layout.kinds, s.layout.formats) == want:
            continue
        what = (f"has columns {s.layout.names}, unlike {first.path} ({first.layout.names})"
                if names != want[0] else
                f"types its columns {_types(s.layout)}, unlike {first.path} "
                f"({_types(first.layout)})")
        raise Unsupported(f"{s.path} {what}: the csv engine answers files of one source "
                          "only when their columns and types agree", engine=engine,
                          engines=("duckdb",),
                          hint="set fallback on the csv engine to a duckdb engine, which "
                               "matches the files' columns by name and widens their types")


def _types(layout: Layout) -> str:
    from gateway_csv.typenames import kind_type

    return ", ".join(f"{n} {kind_type(k)}" for n, k in zip(layout.names, layout.kinds, strict=True))


class CsvEngine(Engine):
    """Queries CSV files with the compiled mmap scanner, in this process."""

    type_name = "csv"
    description = "native mmap CSV scanner (raw files in place, all cores)"
    supports_streaming = True
    supports_catalog = True

    options: ClassVar[dict[str, Option]] = {
        "threads": Option((int,), default=0, minimum=0,
                          help="scanner threads; 0 means one per core"),
        "chunk_bytes": Option((int,), default=8 << 20, minimum=1,
                              help="bytes of file per scanned chunk (default 8 MiB)"),
        "fallback": Option((str,), default=None,
                           help="an engine that answers the queries this one reports as "
                                "unsupported"),
        "files": Option((str,), default="any", choices=("any", "sources"),
                        help='"sources": queries read only the configured sources, never a '
                             "path named in SQL; arrowgate serve sets it"),
    }

    def __init__(self, name: str, options: Any, sources: Any):
        super().__init__(name, options, sources)
        self._pool: ScanPool | None = None
        self._layouts: dict[tuple[Any, ...], Layout] = {}
        self._lock = threading.Lock()

    @property
    def native_operations(self) -> Any:
        """The operations this engine evaluates itself (:mod:`gateway_csv.native`);
        ``arrowgate fuzz`` draws its expressions from them."""
        from gateway_csv import native

        return native

    def connect(self) -> None:
        from gateway_csv.scan import ScanPool

        self._pool = ScanPool(self.config["threads"] or os.cpu_count() or 1)
        # Starting the engine loads what every statement needs; the planner (sqlglot's
        # DuckDB dialect) is left to the first statement that needs it, since a
        # projection of columns or a common aggregation (gateway_csv.shape,
        # gateway_csv.shape_aggregation) needs none, and to warm(), which whoever
        # compares a first statement's latency calls (the shadow, the console). Sources
        # are sniffed by the first query that reads them: one bad file fails its own
        # queries, never the engine's start.
        from gateway_csv import columns, shape  # noqa: F401

    def warm(self) -> None:
        """The planner and pyarrow.compute (60-120 ms to import), which a statement
        gateway_csv.shape and gateway_csv.shape_aggregation do not read loads on its first
        use."""
        import pyarrow.compute  # noqa: F401

        from gateway_csv import query, run, shape_aggregation  # noqa: F401

        query.parse("SELECT 1")

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()

    # -- sources ---------------------------------------------------------
    def _files(self, name: str, is_path: bool) -> tuple[str, list[str], dict[str, Any]]:
        """(display name, files, CSV options) of a table named in FROM."""
        if not is_path:
            for source_name, source in self.sources.items():
                if source_name.lower() == name.lower():
                    return self._source_files(source)
            if not any(c in name for c in "./\\"):
                raise QueryError(f"no table named {name!r}",
                                 hint="sources: " + (", ".join(self.sources) or "none; declare "
                                                     "[sources.NAME] in the config or query "
                                                     "a file path in quotes"), kind="unknown_object")
        if self.config.get("files") == "sources":
            raise QueryError(f"reading {name!r} is not allowed: this engine reads only the "
                             "configured sources", engine=self.name, kind="permission",
                             hint="declare the file as a source")
        path = Path(name).expanduser()
        if path.is_dir():
            raise QueryError(f"{name} is a folder, not a CSV file",
                             hint="declare it as a source to read every *.csv in it, or "
                                  "name one file", kind="unknown_object")
        if not path.exists():
            raise QueryError(f"no such file: {name}", hint="check the path (relative paths "
                             f"start at {os.getcwd()})", kind="unknown_object")
        return name, [str(path)], {}

    def _source_files(self, source: Source) -> tuple[str, list[str], dict[str, Any]]:
        if source.format != "csv":
            raise Unsupported(f"source {source.name!r} is {source.format}; the csv engine reads "
                              "only CSV", engine=self.name, engines=("duckdb",))
        files = source.files()
        if not files:
            if Path(source.path).is_dir() or source.is_glob:
                raise QueryError(f"source {source.name!r}: no CSV files match {source.path}",
                                 engine=self.name, kind="unknown_object")
            raise QueryError(f"source {source.name!r}: no such file: {source.path}",
                             engine=self.name, hint="fix [sources." + source.name + "].path", kind="unknown_object")
        return source.name, files, dict(source.options)

    def layout(self, path: str, file: Any, options: dict[str, Any]) -> Layout:
        from gateway_csv.layout import DIALECT_BYTES, SAMPLE_BYTES, SAMPLE_ROWS
        from gateway_csv.sniff_cache import sniffed

        st = os.stat(path)
        # The change time moves with every write, rename and touch, and no one sets it;
        # but it moves by the clock's tick (a few ms), so a layout is kept only when
        # the file had not changed for a while when it was read (git's "racily clean"
        # rule): a same-sized rewrite in the tick of the sniffed write is sniffed
        # again. (The kept bytes' own cache, gateway_csv.sniff_cache, trusts no time.)
        keep = time.time_ns() - st.st_ctime_ns > _SETTLED_NS
        options_key = _options_key(options)
        cache_key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                     options_key)
        with self._lock:
            hit = self._layouts.get(cache_key)
        if hit is not None:
            return hit
        # DuckDB types the columns on its first SAMPLE_ROWS rows, however many bytes they
        # take: read on until the head holds that many lines (a quoted newline only makes
        # it read more), up to SAMPLE_BYTES
        needed = SAMPLE_ROWS + 200  # and a preamble DuckDB skips
        size = file.size
        n = min(DIALECT_BYTES, size)
        while n < size and file.newlines(n) <= needed:
            if n >= SAMPLE_BYTES:
                raise Unsupported(
                    f"{path}: its first {SAMPLE_ROWS:,} rows, on which DuckDB types its "
                    f"columns, take more than {SAMPLE_BYTES >> 20} MiB; the csv engine would "
                    "type them on fewer rows", engine=self.name, engines=("duckdb",),
                    # (declared "columns" do not help: the sample still finds the header)
                    hint="query it on a duckdb engine, or set fallback on the csv engine "
                         "to one")
            n = min(n * 2, SAMPLE_BYTES, size)
        from gateway_csv.opening import unpadded_layout

        layout = sniffed(file, n, options, path=path, options_key=options_key,
                         then=lambda head, found: unpadded_layout(head, n >= size, found,
                                                                  options, path))
        if not keep:
            return layout
        with self._lock:
            self._layouts[cache_key] = layout
            if len(self._layouts) > _LAYOUTS_KEPT:  # files rewritten again and again
                del self._layouts[next(iter(self._layouts))]
        return layout

    def _rewritten(self, path: str, file: Any, layout: Layout,
                   options: dict[str, Any]) -> tuple[Any, Layout]:
        """The file cut at its comments (and without blanks around its quoted fields),
        and its layout, sniffed again in the dialect found."""
        from gateway_csv.opening import without_comments

        try:
            copy = without_comments(file, layout.comment, layout.quote, layout.delimiter,
                                    layout.escape, layout.padded_quotes)
        finally:
            file.close()
        given = {**options, "delimiter": layout.delimiter, "quote": layout.quote,
                 "escape": layout.escape, "comment": layout.comment}
        try:
            return copy, self.layout(path, copy, given)
        except BaseException:
            copy.close()
            raise

    def _open(self, name: str, is_path: bool, stop: Stop | None) -> list[Scanner]:
        from gateway_csv.opening import open_csv
        from gateway_csv.scan import Scanner

        _, files, options = self._files(name, is_path)
        for path in files:
            folders = Path(path).parent.parts
            keys = [f for f in folders if "=" in f and not f.startswith("=")]
            if keys:
                # DuckDB adds a column per key=value folder (hive partitioning)
                raise Unsupported(f"{path} lies in hive partition folders ({', '.join(keys)}); "
                                  "the csv engine does not add their columns",
                                  engines=("duckdb",))
        if self._pool is None:
            raise EngineConnectionError("the engine is closed", engine=self.name)
        scanners = []
        try:
            for path in files:
                refuse_special(path)
                try:
                    file = open_csv(path, options)
                except IsADirectoryError:
                    raise QueryError(f"{path} is a folder, not a CSV file", kind="unknown_object") from None
                except OSError as exc:
                    raise QueryError(f"cannot open {path}: {exc.strerror}", kind="resource") from None
                layout = self.layout(path, file, options)
                if layout.cut_comments:
                    file, layout = self._rewritten(path, file, layout, options)
                scanners.append(Scanner(path, file, layout, self._pool,
                                        self.config["chunk_bytes"], self.name, stop))
            _same_columns(scanners, self.name)
        except BaseException:
            for s in scanners:
                s.file.close()
            raise
        return scanners

    # -- queries ---------------------------------------------------------
    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        # it runs SELECTs only: the pipeline's check is all a read-only user needs
        return _StoppableSession(self)

    def execute(self, sql: str, parameters: Sequence[Any] | None = None, *,
                stop: Stop | None = None) -> EngineResult:
        """Run one SELECT (see :class:`gateway.engine.Engine`).

        Args:
            stop: polled between chunks of every scan of this query, including
                the chunks read while the result streams; a true answer raises
                :class:`gateway.errors.Cancelled`, and it may raise itself (pass
                ``QueryHandle.check``).
        """
        import pyarrow as pa

        try:
            try:
                return self._execute(sql, parameters, stop)
            except RecursionError:
                raise Unsupported("the csv engine cannot plan an expression nested this deeply",
                                  engines=("duckdb",)) from None
            except pa.ArrowException as exc:
                raise Unsupported("the csv engine cannot run this query: "
                                  + str(exc).splitlines()[0], engines=("duckdb",)) from None
        except GatewayError as exc:
            if exc.engine is None:
                exc.engine = self.name
                exc.args = (str(exc),)
            raise

    def _execute(self, sql: str, parameters: Sequence[Any] | None, stop: Stop | None) \
            -> EngineResult:
        if parameters is not None:
            raise Unsupported("query parameters are not supported by the csv engine",
                              engines=("duckdb",))
        if not sql.isascii():
            _refuse_folding_letters(sql)
        from gateway_csv.shape import projection

        shape = projection(sql)
        if shape is not None:
            answer = self._project(shape, stop)
            if answer is not None:
                return answer
        else:
            # before the aggregations' reader (and the fused scan it imports): what the
            # statement's words hand over, neither it nor the planner reads
            from gateway_csv.handover import refusal

            refused = refusal(sql)
            if refused is not None:
                raise refused
            from gateway_csv.handover import TOP_N

            if TOP_N.search(sql):
                from gateway_csv.topn import top_n

                top = top_n(sql)
                if top is not None:
                    return self._top(top, stop)
            from gateway_csv.shape_aggregation import aggregation

            grouped = aggregation(sql)
            if grouped is not None:
                answer = self._aggregate(grouped, stop)
                if answer is not None:
                    return answer
        from gateway_csv import query as q
        from gateway_csv.binding import bind
        from gateway_csv.compute import Frame

        select = q.parse(sql)
        table = q.source_name(select)
        if table is None:
            import pyarrow as pa

            from gateway_csv.run import finish

            query = q.analyse(select, None, None)
            query.types = bind(query, {})[0]
            _name_columns(query, sql, None)
            if query.is_aggregate:
                raise Unsupported("the csv engine does not run aggregates without FROM",
                                  engines=("duckdb",))
            result = finish(query, Frame({}, 1))
            return EngineResult(pa.RecordBatchReader.from_batches(result.schema,
                                                                  result.to_batches()))
        q.refuse_unrun_aggregates(select)
        scanners = self._open(*table, stop)
        try:
            return self._answer(sql, select, table, scanners)
        except BaseException:
            for s in scanners:
                s.file.close()
            raise

    def _answer(self, sql: str, select: Any, table: tuple[str, bool],
                scanners: list[Scanner]) -> EngineResult:
        from gateway_csv import query as q
        from gateway_csv.binding import bind
        from gateway_csv.native import column_types
        from gateway_csv.run import aggregate, plain_batches

        query = q.analyse(select, scanners[0].layout, table)
        query.types = bind(query, column_types(scanners[0].layout))[0]
        _name_columns(query, sql, scanners[0].layout)
        if query.is_aggregate:
            result = aggregate(scanners, query)
            for s in scanners:
                s.file.close()
            return _aggregation(result, scanners)
        return self._plain(plain_batches(scanners, query), scanners, {})

    def _project(self, shape: Projection, stop: Stop | None) -> EngineResult | None:
        """A projection's answer without the planner; None when the planner must say why
        it has none (a column the files lack)."""
        from gateway_csv.shape import batches
        from gateway_csv.typenames import column_types

        scanners = self._open(shape.table, False, stop)
        try:
            tables = batches(scanners, shape, column_types(scanners[0].layout))
            if tables is not None:
                return self._plain(tables, scanners, {})
        except BaseException:
            for s in scanners:
                s.file.close()
            raise
        for s in scanners:
            s.file.close()
        return None

    def _aggregate(self, shape: Aggregation, stop: Stop | None) -> EngineResult | None:
        """An aggregation's answer without the planner; None when the planner must judge
        it (:func:`gateway_csv.shape_aggregation.aggregated`)."""
        from gateway_csv.shape_aggregation import aggregated

        scanners = self._open(shape.table, False, stop)
        try:
            result = aggregated(scanners, shape)
        finally:
            for s in scanners:
                s.file.close()
        return None if result is None else _aggregation(result, scanners)

    def _top(self, shape: TopN, stop: Stop | None) -> EngineResult:
        """The first k rows of each group (:mod:`gateway_csv.topn`)."""
        from gateway_csv.topn import answer

        scanners = self._open(*shape.table, stop)
        try:
            result = answer(scanners, shape)
        finally:
            for s in scanners:
                s.file.close()
        return _aggregation(result, scanners)

    def _plain(self, tables: Iterator[pa.Table], scanners: list[Scanner],
               notes: dict[str, Any]) -> EngineResult:
        """A plain query's answer: streamed, or whole when bad rows are skipped."""
        import pyarrow as pa

        if any(s.layout.skip_bad for s in scanners):
            # the count of skipped rows is only known at the end: answer whole
            whole = list(tables)
            for s in scanners:
                s.file.close()
            skipped = sum(s.skipped for s in scanners)
            if skipped:
                notes["skipped_rows"] = skipped
            result = pa.concat_tables([t.cast(whole[0].schema) for t in whole])
            return EngineResult(pa.RecordBatchReader.from_batches(result.schema,
                                                                  result.to_batches()), notes)
        first = next(tables)
        reader = pa.RecordBatchReader.from_batches(first.schema, _stream(tables, first, scanners))
        return EngineResult(reader, notes)

    def catalog(self) -> list[CatalogColumn]:
        from gateway.engine import CatalogColumn
        from gateway_csv.columns import arrow_type
        from gateway_csv.opening import open_csv

        columns: list[CatalogColumn] = []
        for name, source in self.sources.items():
            if source.format != "csv":
                continue
            _, files, options = self._source_files(source)
            file = open_csv(files[0], options)
            try:
                layout = self.layout(files[0], file, options)
            except Unsupported:
                continue  # a source this engine hands to another
            finally:
                file.close()
            for col, kind in zip(layout.names, layout.kinds, strict=True):
                columns.append(CatalogColumn("main", name, col, arrow_type(kind)))
        return columns


def _aggregation(result: pa.Table, scanners: list[Scanner]) -> EngineResult:
    """An aggregation's answer, with the rows its scans skipped."""
    import pyarrow as pa

    skipped = sum(s.skipped for s in scanners)
    notes = {"skipped_rows": skipped} if skipped else {}
    return EngineResult(pa.RecordBatchReader.from_batches(result.schema, result.to_batches()),
                        notes)


def _name_columns(query: Any, sql: str, layout: Layout | None) -> None:
    """Give the select items DuckDB names after its own rendering (``(a + 1)``) DuckDB's
    names (:mod:`gateway_csv.naming`).

    Raises:
        Unsupported: a statement reading a path names such an item (DuckDB would read
            the file to name it), or DuckDB cannot describe the statement.
    """
    if not query.unnamed:
        return
    from gateway_csv.naming import duckdb_names
    from gateway_csv.native import column_types

    if query.table_is_path:
        raise Unsupported("the csv engine names an unaliased expression over a path as "
                          "DuckDB does only over a source", engines=("duckdb",),
                          hint="give the expression an alias (AS name), or query a source")
    types = column_types(layout)
    columns = tuple((n, types[n.lower()]) for n in layout.names) if layout else ()
    names = duckdb_names(sql, query.table if layout else "", columns)
    if len(names) != len(query.items):
        raise Unsupported("the csv engine and DuckDB read this select list differently",
                          engines=("duckdb",))
    for i in query.unnamed:
        query.items[i] = (names[i], query.items[i][1])


def _refuse_folding_letters(sql: str) -> None:
    """Refuse a statement with a word, outside quotes, that Python's upper-casing makes an
    ASCII keyword or function name (SELECT with U+017F for its S, INNER with U+0131 for
    its I, sum with U+017F): sqlglot reads it as one, where DuckDB's parser takes it for
    a name or refuses it."""
    import re

    from gateway_csv.naming import KEYWORDS

    bare = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "", sql)
    for found in re.finditer(r"[^\W\d][\w$]*(\s*\()?", bare):
        word = found.group(0).rstrip("( \t\r\n")
        folded = word.upper()
        if not word.isascii() and folded.isascii() and \
                (folded.lower() in KEYWORDS or found.group(1)):
            raise Unsupported(f"the csv engine does not read SQL holding {word!r} outside "
                              f"quotes, which its parser reads as {folded} and DuckDB's does "
                              "not", engines=("duckdb",))


def refuse_special(path: str) -> None:
    """Refuse a FIFO or a device before opening it: opening a FIFO waits for a writer,
    past any timeout or cancel, and a device may never end.

    Raises:
        QueryError: ``path`` is neither a regular file nor a folder.
    """
    from gateway.config import special_file

    kind = special_file(path)
    if kind is not None:
        raise QueryError(f"{path} is {kind}, not a CSV file", kind="unknown_object",
                         hint="name a regular file; copy what a pipe or device gives into "
                              "one first")


class _StoppableSession(EngineSession):
    """A stateless session whose scans poll the query's handle between chunks, so a
    cancel or a timeout stops the query within a chunk."""

    engine: CsvEngine

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        return self.engine.execute(sql, parameters, stop=handle.check)


def _stream(tables: Generator[pa.Table, None, None], first: pa.Table,
            scanners: list[Scanner]) -> Iterator[pa.RecordBatch]:
    try:
        yield from first.to_batches()
        for table in tables:
            yield from table.cast(first.schema).to_batches()
    finally:
        tables.close()  # ends the scans still running before the files close
        for s in scanners:
            s.file.close()

