"""A DuckDB command-line binary, run once per query.

The script goes in on stdin; the answer comes back through pipes the binary
inherits (never a null device). For a query, one run writes the column types
(``DESCRIBE``) to stdout as CSV and the rows as Parquet to a second pipe, and
rebuilds in Arrow the types Parquet cannot hold from the DESCRIBE answer
(HUGEINT comes back as decimal128(38, 0) like DuckDB's own Arrow export;
INTERVAL, UUID, BIT and TIME WITH TIME ZONE as text). A bare ``NULL`` column
comes back as int32: the CLI's DESCRIBE reports it as INTEGER. The progress bar is switched off first, and every run
repeats the engine's setup (extension loads, settings, source views,
``setup_sql``): the binary keeps no state between queries beyond its
database file.
"""

from __future__ import annotations

import csv
import io
import os
import re
import selectors
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gateway.errors import Cancelled, ConfigError, QueryError, QueryTimeout, Unsupported
from gateway_duckdb.mount import literal
from gateway_duckdb.translate import error_kind

#: Types Parquet would change: sent as text, rebuilt from the DESCRIBE answer.
_AS_TEXT = {"HUGEINT": pa.decimal128(38, 0), "UHUGEINT": pa.decimal128(38, 0),
            "INTERVAL": pa.string(),
            "TIME WITH TIME ZONE": pa.string(), "BIT": pa.string(), "BIGNUM": pa.string(),
            "VARINT": pa.string(), "UUID": pa.string()}
_QUERY_START = re.compile(r"^\s*(\(|SELECT\b|WITH\b|FROM\b|VALUES\b|TABLE\b|SHOW\b|DESCRIBE\b|"
                          r"SUMMARIZE\b|PIVOT\b|UNPIVOT\b)", re.IGNORECASE)
_LEADING_COMMENTS = re.compile(r"(\s*(--[^\n]*(\n|$)|/\*.*?\*/))*\s*", re.DOTALL)
_VERSION = re.compile(r"v(\d+\.\d+\.\d+)")
#: a line the binary reads as one of its dot commands when no statement is pending
#: (``.shell``/``.system`` run a program, ``.output`` writes a file, ``.read`` runs one)
_DOT_LINE = re.compile(r"(?m)^[ \t]*\.")


def cli_version(binary: str, engine: str) -> str:
    """The version a DuckDB binary reports (``-version``).

    Raises:
        ConfigError: the file is missing, not executable, or not DuckDB.
    """
    path = Path(binary)
    if not path.is_file():
        raise ConfigError(f"the DuckDB binary {binary} does not exist",
                          key=f"engines.{engine}.cli",
                          hint="give the path of a duckdb executable (pip install duckdb-cli "
                          "provides one)")
    try:
        done = subprocess.run([str(path), "-version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except OSError as exc:
        raise ConfigError(f"cannot run {binary}: {exc.strerror}", key=f"engines.{engine}.cli",
                          hint="the file must be an executable DuckDB binary") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{binary} -version did not answer in 30 s",
                          key=f"engines.{engine}.cli") from None
    match = _VERSION.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise ConfigError(f"{binary} is not a DuckDB binary (its -version printed "
                          f"{done.stdout.strip()[:80]!r})", key=f"engines.{engine}.cli",
                          hint="give the path of a duckdb executable")
    return match.group(1)


class CliSession:
    """Runs statements through a DuckDB binary, one process per statement.

    Args:
        binary: the executable.
        database: a database file, or ``:memory:``.
        setup: statements run before every query.
        engine: the engine's name, for errors.
    """

    def __init__(self, binary: str, database: str, setup: Sequence[str], engine: str,
                 read_only: bool = False, timeout: float | None = None):
        self.binary = binary
        self.database = database
        self.read_only = read_only
        self.setup = list(setup)
        self.engine = engine
        self.timeout = timeout
        self._running: set[subprocess.Popen[bytes]] = set()
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()

    def check(self) -> None:
        """Run the setup once, so a bad setting or source fails at connect.

        Raises:
            QueryError: the setup failed, with the binary's message.
        """
        self._run("SELECT 1")

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        if parameters is not None:
            raise Unsupported("a CLI engine cannot bind parameters", engine=self.engine,
                              hint="write the values into the SQL, or use an in-process engine")
        table = self._run(sql.strip().rstrip(";"))
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())

    def _run(self, sql: str) -> pa.Table:
        if _DOT_LINE.search(sql):
            # the statement is fed to the binary's standard input, where a line starting
            # with a dot after a finished statement is a command of the binary's own:
            # "CREATE TABLE t (a INT);\n.shell ..." ran a program for a Flight user
            raise QueryError("a line of the statement starts with '.', which the DuckDB "
                             "command-line binary would run as one of its dot commands "
                             "(.shell runs a program)", engine=self.engine, kind="syntax",
                             hint="join that line to the one before it")
        rows_r, rows_w = os.pipe()
        # Leading comments (a corpus's "-- name: ...") must not hide a query, and
        # a trailing line comment must not swallow the parenthesis that follows
        # the SQL where it is embedded below: hence the newline after each use.
        start = _LEADING_COMMENTS.match(sql)  # always matches, possibly empty
        is_query = bool(_QUERY_START.match(sql[start.end() if start else 0:]))
        script = ["SET enable_progress_bar = false;", *(s.rstrip(";") + ";" for s in self.setup)]
        if is_query:
            script += [
                "SET VARIABLE __arrowgate_cols = (SELECT string_agg(CASE WHEN column_type IN ("
                + ", ".join(literal(t) for t in _AS_TEXT) + ") THEN 'CAST(#' || n || ' AS VARCHAR)'"
                " ELSE '#' || n END || ' AS ' || '\"' || replace(column_name, '\"', '\"\"') || '\"'"
                ", ', ' ORDER BY n) FROM (SELECT row_number() OVER () AS n, column_name, "
                f"column_type FROM (DESCRIBE {sql}\n)));",
                f"COPY (SELECT column_name, column_type FROM (DESCRIBE {sql}\n)) TO '/dev/stdout' "
                "(FORMAT csv, HEADER false);",
                "COPY (FROM query('SELECT ' || getvariable('__arrowgate_cols') || ' FROM ("
                + sql.replace("'", "''") + "\n)')) "
                f"TO '/dev/fd/{rows_w}' (FORMAT parquet);",
            ]
        else:
            script.append(sql + "\n;")
        args = [self.binary, "-batch", "-bail", "-noheader", "-csv"]
        if self.read_only:
            args.append("-readonly")
        args.append(self.database)
        try:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(rows_w,))
        except OSError as exc:
            os.close(rows_r)
            os.close(rows_w)
            raise QueryError(f"cannot run {self.binary}: {exc.strerror}", engine=self.engine) \
                from None
        os.close(rows_w)
        with self._lock:
            self._running.add(proc)
        try:
            out, err, rows = _communicate(proc, "\n".join(script).encode(), rows_r, self.timeout)
        finally:
            with self._lock:
                self._running.discard(proc)
        if proc.pid in self._cancelled:
            self._cancelled.discard(proc.pid)
            raise Cancelled("the query was cancelled", engine=self.engine)
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip() or \
                f"{self.binary} exited with code {proc.returncode}"
            if "INTERRUPT" in message.upper():
                raise Cancelled("the query was cancelled", engine=self.engine)
            raise QueryError(message, engine=self.engine, kind=error_kind(message))
        if not is_query:
            return pa.table({})
        types = list(csv.reader(io.StringIO(out.decode())))
        return _retype(pq.read_table(pa.BufferReader(rows)), types)

    def cancel(self) -> None:
        with self._lock:
            running = list(self._running)
        for proc in running:
            self._cancelled.add(proc.pid)
            proc.kill()

    def close(self) -> None:
        self.cancel()


def _communicate(proc: subprocess.Popen[bytes], script: bytes, rows_fd: int,
                 timeout: float | None) -> tuple[bytes, bytes, bytes]:
    """Feed the script, read stdout, stderr and the rows pipe to their ends, wait."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(script)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: [], rows_fd: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            events = sel.select(timeout)
            if not events:
                proc.kill()
                raise QueryTimeout(f"the DuckDB binary did not finish within {timeout:g} s",
                                   hint="raise the engine's timeout")
            for key, _ in events:
                data = os.read(key.fd, 1 << 20)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        os.close(rows_fd)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), b"".join(chunks[rows_fd])


def _retype(table: pa.Table, types: list[list[str]]) -> pa.Table:
    columns = []
    for i in range(table.num_columns):
        duck_type = types[i][1] if i < len(types) and len(types[i]) > 1 else ""
        target = _AS_TEXT.get(duck_type)
        column = table.column(i)
        if target is not None and column.type != target:
            try:
                column = pc.cast(column, target)
            except pa.ArrowInvalid:  # a HUGEINT past 38 digits: keep its text
                pass
        columns.append(column)
    return pa.table(columns, names=table.schema.names)
