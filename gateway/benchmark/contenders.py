"""Benchmark contenders and the worker process each one runs in.

A contender answers SQL with an Arrow table. :func:`gateway.benchmark.runner.run_benchmark`
sends each contender to a process of its own (``multiprocessing`` spawn),
which starts it once and then answers ``answer`` (send the table back) and
``time`` (only the seconds, rows and peak memory) requests, so one engine's
caches, threads and allocations never touch another's. Peak memory is the
worker's resident high-water mark, reset before each run through
``/proc/self/clear_refs`` on Linux, or a child program's own peak
(``os.wait4``) for :class:`Command`.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError

if TYPE_CHECKING:
    import pyarrow as pa

#: seconds a worker may take to start its contender
STARTUP_TIMEOUT = 120.0


class Contender:
    """Something that answers SQL with an Arrow table, run inside a worker process.

    Subclasses must be picklable: they are sent to the worker, which calls
    :meth:`start` once, :meth:`run` per query and :meth:`stop` at the end.
    """

    name: str

    def start(self) -> str:
        """Prepare (connect, mount data); return a one-line description with the version."""
        return self.name

    def run(self, sql: str) -> pa.Table:
        """Answer one statement completely (the timed part)."""
        raise NotImplementedError

    def child_peak_rss(self) -> int | None:
        """Peak memory in bytes of a child program the last run started, if any."""
        return None

    def stop(self) -> None:
        """Release what :meth:`start` opened."""


#: Schema metadata of an answer another engine gave (a fallback): that engine's name.
ANSWERED_BY = b"arrowgate.answered_by"


@dataclass
class GatewayEngine(Contender):
    """An engine of an arrowgate configuration (a TOML path or a dict).

    ``label`` names it in reports (default: the engine name); ``plugins`` are
    modules to register beside the installed ones (by import name, since the
    contender is sent to another process).
    """

    engine: str
    config: str | Mapping[str, Any] | None = None
    label: str | None = None
    plugins: Sequence[str] = ()

    def __post_init__(self) -> None:
        self.name = self.label or self.engine
        self._gw: Any = None

    def start(self) -> str:
        import importlib

        import gateway

        modules = [importlib.import_module(name) for name in self.plugins]
        self._gw = gateway.connect(self.config, plugins=modules)
        cfg = self._gw.engine_config(self.engine)
        self._gw.engine(self.engine)
        version = self._gw.engine_types[cfg.type].describe_version(cfg.options)
        return f"{self.engine} ({cfg.type}{' ' + version if version else ''})"

    def run(self, sql: str) -> pa.Table:
        # never shadowed: a [shadow] section would time the reference too
        result = self._gw.execute(sql, engine=self.engine, shadow=False)
        table = result.to_arrow()
        if result.engine != self.engine:  # its fallback answered: the report must say so
            table = table.replace_schema_metadata({ANSWERED_BY: result.engine})
        return table

    def stop(self) -> None:
        if self._gw is not None:
            self._gw.close()


@dataclass
class AdbcDriver(Contender):
    """An ADBC driver package used directly, the baseline an engine on it is measured
    against: one connection (autocommit), one cursor per query, ``fetch_arrow_table``.

    ``driver`` is the package's short name (``postgresql`` for
    ``adbc_driver_postgresql``); ``uri`` is the database's.
    """

    name: str
    driver: str = ""
    uri: str = field(default="", repr=False)  # may hold a password

    def start(self) -> str:
        import importlib
        from importlib.metadata import version

        dbapi = importlib.import_module(f"adbc_driver_{self.driver}.dbapi")
        self._con: Any = dbapi.connect(self.uri, autocommit=True)
        return f"adbc-driver-{self.driver} {version(f'adbc-driver-{self.driver}')} directly"

    def run(self, sql: str) -> pa.Table:
        with self._con.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table()

    def stop(self) -> None:
        self._con.close()


@dataclass
class Command(Contender):
    """A program reading SQL on stdin and writing CSV (with a header) on stdout.

    ``setup`` is sent before every statement (views over the data files); the
    program runs once per query.
    """

    name: str
    argv: Sequence[str]
    setup: str = ""
    version: str | None = None

    def __post_init__(self) -> None:
        self._peak: int | None = None

    def start(self) -> str:
        return f"{self.name} ({self.version or ' '.join(self.argv)})"

    def run(self, sql: str) -> pa.Table:
        import io

        import pyarrow.csv as pcsv

        script = f"{self.setup}\n{sql.rstrip().rstrip(';')};\n".encode()
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(list(self.argv), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=err)
            except OSError as exc:
                raise GatewayError(f"cannot start {self.argv[0]!r}: {exc.strerror}",
                                   engine=self.name, hint="check the command's path") from None
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(script)
                proc.stdin.close()
            except BrokenPipeError:
                pass
            out = proc.stdout.read()
            # wait4, not wait(): it also returns the child's own peak memory
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            self._peak = usage.ru_maxrss * 1024
            err.seek(0)
            message = err.read().decode(errors="replace").strip()
        if proc.returncode != 0 or (message and not out):
            from gateway.errors import QueryError

            raise QueryError(message or f"exited with status {proc.returncode}", engine=self.name)
        if not out.strip():
            import pyarrow as pa

            return pa.table({})
        return pcsv.read_csv(io.BytesIO(out))

    def child_peak_rss(self) -> int | None:
        return self._peak


@dataclass
class Function(Contender):
    """A module-level callable ``fn(sql) -> pyarrow.Table``."""

    name: str
    fn: Callable[[str], pa.Table]
    description: str | None = None

    def start(self) -> str:
        return self.description or self.name

    def run(self, sql: str) -> pa.Table:
        return self.fn(sql)


# -- the worker process ------------------------------------------------------------
def _peak_rss() -> int | None:
    """This process's peak resident memory in bytes since the last reset."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass  # not Linux: the peak stays the process's peak since it started


def _serve(contender: Contender, conn: Any) -> None:
    import pyarrow as pa

    try:
        description = contender.start()
    except BaseException as exc:
        conn.send(("failed", type(exc).__name__, str(exc)))
        return
    conn.send(("ready", description, _peak_rss()))
    while True:
        op, sql = conn.recv()
        if op == "stop":
            break
        _reset_peak_rss()
        started = time.perf_counter()
        try:
            table = contender.run(sql)
            seconds = time.perf_counter() - started
        except BaseException as exc:
            conn.send(("failed", type(exc).__name__, str(exc)))
            continue
        peak = max(_peak_rss() or 0, contender.child_peak_rss() or 0)
        payload = None
        if op == "answer":
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            payload = sink.getvalue().to_pybytes()
        conn.send(("ok", seconds, table.num_rows, peak, payload))
    contender.stop()


class RemoteError(Exception):
    """An error raised inside a worker, carrying its original class name."""

    def __init__(self, error_class: str, message: str):
        self.error_class = error_class
        super().__init__(message)


@dataclass
class Run:
    seconds: float = 0.0
    rows: int = 0
    peak: int | None = None
    table: pa.Table | None = None
    error: RemoteError | None = None


class Worker:
    """One contender in a process of its own; restarted after a timeout or a crash.

    ``timeout`` limits each call in seconds (None: no limit); starting the
    contender gets at least :data:`STARTUP_TIMEOUT`.
    """

    def __init__(self, contender: Contender, timeout: float | None):
        self.contender, self.timeout = contender, timeout
        self.description = contender.name
        self.idle_rss: int | None = None
        self.proc: Any = None
        self.conn: Any = None

    def _start(self) -> RemoteError | None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(self.contender, child), daemon=True,
                                name=f"bench-{self.contender.name}")
        self.proc.start()
        child.close()
        # starting (spawning Python, importing the engine, connecting) is not a query:
        # it gets its own, generous limit
        reply = self._receive(None if self.timeout is None
                              else max(self.timeout, STARTUP_TIMEOUT))
        if isinstance(reply, RemoteError):
            self.stop()
            return reply
        if reply[0] == "failed":
            self.stop()
            return RemoteError(reply[1], f"could not start: {reply[2]}")
        self.description, self.idle_rss = reply[1], reply[2]
        return None

    def _receive(self, timeout: float | None) -> Any:
        try:
            if not self.conn.poll(timeout):
                self.kill()
                return RemoteError("QueryTimeout", f"no answer within {timeout:g} s")
            return self.conn.recv()
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self.kill()
            return RemoteError("WorkerCrashed", f"the engine's process died (exit code {code})")

    def call(self, op: str, sql: str) -> Run:
        if self.proc is None:
            failed = self._start()
            if failed is not None:
                return Run(error=failed)
        self.conn.send((op, sql))
        reply = self._receive(self.timeout)
        if isinstance(reply, RemoteError):
            return Run(error=reply)
        if reply[0] == "failed":
            return Run(error=RemoteError(reply[1], reply[2]))
        _, seconds, rows, peak, payload = reply
        table = None
        if payload is not None:
            import pyarrow as pa

            table = pa.ipc.open_stream(payload).read_all()
        return Run(seconds, rows, peak, table)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            try:
                self.conn.send(("stop", ""))
                self.proc.join(10)
            except (OSError, BrokenPipeError):
                pass
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        self.proc = None
