"""DuckDB in a worker process: a crash or a hang costs one query, not the gateway.

The worker (``python -m gateway_duckdb.worker``) loads one DuckDB build and
answers requests read from its stdin (:mod:`gateway_duckdb.protocol`). An
answer is a frame ``{"ok": True, "schema": ...}``, one frame per segment of
rows handed over in shared memory, then ``{"end": True}`` or an error frame.
The protocol owns the worker's fd 1; the worker's own fd 1 points at its
stderr, so nothing a library prints can corrupt a frame.

:class:`WorkerSession` is the gateway's side. When the worker dies (killed,
crashed, or stopped by ``timeout``) the query running on it gets an error and
the next query starts a fresh worker.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from gateway import errors
from gateway.engine import EngineResult, EngineSession
from gateway.errors import Cancelled, EngineConnectionError, GatewayError, QueryTimeout
from gateway_duckdb.adbc_session import SetupFailed
from gateway_duckdb.protocol import (
    GatewayGone,
    SegmentWriter,
    memory_files,
    open_segment,
    read_frame,
    write_frame,
)


def _error_frame(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, SetupFailed):
        return {"error": "SetupFailed", "message": exc.message, "index": exc.index}
    if isinstance(exc, GatewayError):
        return {"error": type(exc).__name__, "message": exc.message, "hint": exc.hint,
                "kind": exc.kind}
    return {"error": "QueryError", "message": f"{type(exc).__name__}: {exc}"}


# -- the worker ---------------------------------------------------------------
def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Answer requests until stdin closes."""
    session: Any = None
    segments = SegmentWriter(inp, out, None)
    try:
        while (request := read_frame(inp)) is not None:
            segments.heard(request)
            op = request["op"]
            if op == "open":
                segments = SegmentWriter(inp, out, request["spool"])
                try:
                    session = _open_session(request)
                    if request.get("pinned"):
                        session = _Pinned(session, request["engine"])
                except (GatewayError, SetupFailed) as exc:
                    write_frame(out, _error_frame(exc))
                    continue
                write_frame(out, {"ok": True})
            elif op == "execute":
                if session is None:
                    write_frame(out, {"error": "EngineConnectionError", "message": "not opened"})
                    continue
                try:
                    reader = session.execute(request["sql"], request["parameters"])
                except Exception as exc:
                    write_frame(out, _error_frame(exc))
                    continue
                write_frame(out, {"ok": True, "schema": reader.schema.serialize().to_pybytes()})
                try:
                    segments.send(reader, reader.schema)
                except GatewayGone:
                    break
                except Exception as exc:
                    write_frame(out, _error_frame(exc))
                    continue
                write_frame(out, {"end": True})
            elif op == "close":
                break
    finally:
        segments.release_all()
        if session is not None:
            session.close()


def _open_session(request: dict[str, Any]) -> Any:
    """The release's own Python module when the build has one (this process loads no other
    duckdb, and its Arrow export hands over larger batches than its ADBC driver), else ADBC."""
    root = request["root"]
    if root is not None:
        sys.path.insert(0, root)
        from gateway_duckdb.python_session import PythonSession

        return PythonSession(request["database"], request["setup"], request["settings"],
                             request["engine"], read_only=request["read_only"])
    from gateway_duckdb.adbc_session import AdbcSession

    return AdbcSession(Path(request["library"]), request["database"],
                       [*request["setup"], request["search_path"]], request["engine"],
                       read_only=request["read_only"],
                       per_connection=[*request["settings"], request["search_path"]])


class _Pinned:
    """A worker serving one gateway session: every statement on one cursor (or ADBC
    connection), so temp tables, settings and transactions last between them."""

    def __init__(self, paths: Any, engine: str):
        self._paths = paths
        self._engine = engine
        self._session = paths.open(None)

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        from gateway.result import QueryHandle

        # the gateway cancels by stopping this process; the handle is never cancelled here
        handle = QueryHandle(self._engine, 0, sql)
        reader: pa.RecordBatchReader = self._session.execute(sql, parameters, handle).reader
        return reader

    def close(self) -> None:
        self._session.close()
        self._paths.close()


def main() -> None:
    # keep the protocol on a private descriptor; fd 1 becomes stderr for anyone who prints
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the gateway stops us, not the terminal
    serve(sys.stdin.buffer, protocol)


# -- the gateway's side -------------------------------------------------------
class WorkerSession:
    """A DuckDB build running in a worker process, restarted when it dies.

    Args:
        library: the ``_duckdb*.so`` of the build.
        root: the folder holding the build's ``duckdb`` Python package, which the
            worker then imports and uses; None to load ``library`` as an ADBC driver.
        database, read_only: what the worker opens.
        setup: statements run once after connecting; ``settings`` (the SET
            statements among them) are repeated on every cursor.
        search_path: the statement that puts the source views on the search path.
        engine: the engine's name, for errors.
        timeout: seconds one query may take (to its last row) before the
            worker is killed; None for no limit.
        pinned: the worker serves one session: every statement on one cursor.

    Raises:
        EngineConnectionError: the worker could not start.
        SetupFailed: a setup statement failed in the worker.
    """

    def __init__(self, library: Path, root: Path | None, database: str, setup: Sequence[str],
                 settings: Sequence[str], search_path: str, engine: str,
                 read_only: bool = False, timeout: float | None = None, pinned: bool = False):
        self.engine = engine
        self.timeout = timeout
        self._args = (library, root, database, setup, settings, search_path, engine)
        self._read_only = read_only
        # answers come back in memory files; elsewhere than Linux, in files in this folder
        self._spool = None if memory_files() else tempfile.mkdtemp(prefix="arrowgate-duckdb-")
        self._open_request = {"op": "open", "pinned": pinned, "library": str(library),
                              "spool": self._spool,
                              "root": str(root) if root is not None else None,
                              "database": database, "setup": list(setup),
                              "settings": list(settings), "search_path": search_path,
                              "engine": engine, "read_only": read_only}
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._stream: _WorkerStream | None = None
        # segments whose last batch is gone, told to the worker with the next frame
        self._released: deque[tuple[str, int]] = deque()
        self._stopped_for: type[GatewayError] | None = None
        self._in_flight = False  # a query was sent and its answer is not read to the end
        self._closed = False
        self._start()

    @property
    def pid(self) -> int | None:
        """The worker's process id (None when no worker is running)."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as the worker
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gateway_duckdb.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
        )
        self._send(self._open_request)
        reply = self._receive()
        if "error" in reply:
            self._stop()
            if reply["error"] == "SetupFailed":
                raise SetupFailed(reply["index"], reply["message"])
            raise _rebuild(reply, self.engine)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            write_frame(self._proc.stdin, message)
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _receive(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        reply = read_frame(self._proc.stdout)
        if reply is None:
            raise self._died()
        return reply

    def _died(self) -> GatewayError:
        """The error for the query that was running when the worker went away."""
        proc, self._proc = self._proc, None
        self._in_flight = False
        code = proc.wait() if proc is not None else None
        self._clear_spool()
        stopped_for, self._stopped_for = self._stopped_for, None
        if stopped_for is QueryTimeout:
            return QueryTimeout(f"the query ran longer than {self.timeout:g} s; its worker "
                                "process was stopped", engine=self.engine,
                                hint="raise the engine's timeout; the next query starts a "
                                "fresh worker")
        if stopped_for is Cancelled:
            return Cancelled("the query was cancelled (its worker process was stopped)",
                             engine=self.engine)
        how = (f"was killed by signal {-code}" if code is not None and code < 0
               else f"exited with code {code}")
        tail = self._stderr_tail()
        return EngineConnectionError(
            f"the DuckDB worker process {how} during the query" + (f": {tail}" if tail else ""),
            engine=self.engine, hint="the next query starts a fresh worker")

    def _broken(self, message: str) -> GatewayError:
        """Stop a worker whose answer cannot be read; the error for that query."""
        if self._proc is not None:
            self._proc.kill()
        self._died()
        return EngineConnectionError(message, engine=self.engine,
                                     hint="the next query starts a fresh worker")

    def _clear_spool(self) -> None:
        """Remove the segment files a dead worker left (memory files go with it)."""
        if self._spool is not None:
            for leftover in Path(self._spool).glob("*"):
                leftover.unlink(missing_ok=True)

    def _acknowledge(self) -> None:
        """Tell the worker the last segment is mapped (a dead worker is noticed later)."""
        assert self._proc is not None and self._proc.stdin is not None
        try:
            write_frame(self._proc.stdin, {"op": "ack", "released": self._take_released()})
        except OSError:
            pass

    def _take_released(self) -> list[tuple[str, int]]:
        keys = []
        while self._released:  # appended to from whichever thread frees a batch
            keys.append(self._released.popleft())
        return keys

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return lines[-1][:300] if lines else ""

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader:
        """Run one statement in the worker; the reader streams its answer."""
        with self._lock:
            if self._closed:
                raise EngineConnectionError("the engine is closed", engine=self.engine)
            if self._stream is not None:
                # one worker answers one query at a time: keep the unread rest in memory
                self._stream.drain()
            if self._proc is None or self._proc.poll() is not None:
                self._proc = None
                self._start()
            self._in_flight = True
            self._send({"op": "execute", "sql": sql,
                        "parameters": list(parameters) if parameters is not None else None,
                        "released": self._take_released()})
            timer = self._arm_timer()
            try:
                reply = self._receive()
                if "error" in reply:
                    raise _rebuild(reply, self.engine)
            except BaseException:
                self._in_flight = False
                if timer is not None:
                    timer.cancel()
                raise
            stream = _WorkerStream(self, timer)
            self._stream = stream
            schema = pa.ipc.read_schema(pa.py_buffer(reply["schema"]))
            return pa.RecordBatchReader.from_batches(schema, stream)

    def _arm_timer(self) -> threading.Timer | None:
        if self.timeout is None:
            return None
        timer = threading.Timer(self.timeout, self._stop_for, args=(QueryTimeout,))
        timer.daemon = True
        timer.start()
        return timer

    def _stop_for(self, reason: type[GatewayError]) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._stopped_for = reason
            proc.kill()

    def open(self, engine: Any, one_shot: bool = False) -> EngineSession | None:
        """A session: a worker process of its own, so its state is its own.

        Only where a second process can open the database: in memory (each
        worker then has a database of its own) or read-only. A read-write
        database file admits one process, so its sessions share the engine's
        worker and keep nothing (None: the stateless default).
        """
        database = self._args[2]
        if database != ":memory:" and not self._read_only:
            return None
        worker = WorkerSession(*self._args, read_only=self._read_only, timeout=self.timeout,
                               pinned=True)
        return WorkerProcessSession(engine, worker)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def cancel(self) -> None:
        """Stop the running query by stopping its worker (the next query starts another)."""
        if self._in_flight:
            self._stop_for(Cancelled)

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def close(self) -> None:
        self._closed = True
        if self._in_flight:
            # a query still running or a stream left half read: stop it first, so a thread
            # blocked on the worker's pipe lets go of the lock
            self._stop_for(Cancelled)
        with self._lock:
            self._stream = None
            self._stop()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if self._spool is not None:
                shutil.rmtree(self._spool, ignore_errors=True)


class WorkerProcessSession(EngineSession):
    """A session on a worker process of its own; cancelling stops that process only.

    Stopping the process (a cancel, a timeout, a crash) loses what the session
    kept, so the session then refuses further statements instead of quietly
    starting a fresh worker without them.
    """

    def __init__(self, engine: Any, worker: WorkerSession):
        super().__init__(engine)
        self._worker = worker

    def execute(self, sql: str, parameters: Sequence[Any] | None, handle: Any) -> EngineResult:
        if not self._worker.alive():
            raise EngineConnectionError(
                "this session's worker process was stopped (a cancel, a timeout or a "
                "crash), and the temp tables, settings and transactions it kept went with it",
                engine=self._worker.engine, hint="open a new session")
        handle.on_cancel(self._worker.cancel)
        return EngineResult(self._worker.execute(sql, parameters), self.engine.result_notes())

    def close(self) -> None:
        self._worker.close()


class _WorkerStream(Iterator[pa.RecordBatch]):
    """The batches of one answer, read from the worker's segments, or from memory once drained."""

    def __init__(self, session: WorkerSession, timer: threading.Timer | None):
        self._session = session
        self._timer = timer
        self._open = True  # frames of this answer are still to come
        self._segment: pa.RecordBatchReader | None = None
        self._buffered: list[pa.RecordBatch] = []
        self._error: GatewayError | None = None

    def __next__(self) -> pa.RecordBatch:
        with self._session._lock:
            if self._buffered:
                return self._buffered.pop(0)
            return self._read_one()

    def _read_one(self) -> pa.RecordBatch:
        while self._segment is not None or self._open:
            if self._segment is not None:
                try:
                    return self._segment.read_next_batch()
                except StopIteration:
                    self._segment = None
                    continue
            self._next_frame()
        if self._error is not None:
            err, self._error = self._error, None
            raise err
        raise StopIteration

    def _next_frame(self) -> None:
        session = self._session
        try:
            frame = session._receive()
            if "segment" in frame:
                try:
                    self._segment = open_segment(frame["segment"], functools.partial(
                        session._released.append, frame["key"]))
                except FileNotFoundError:  # the worker died before it was opened
                    raise session._died() from None
                except (OSError, pa.ArrowInvalid) as exc:
                    raise session._broken(f"cannot read the worker's answer: {exc}") from None
                session._acknowledge()
                return
        except GatewayError:
            self._done()
            raise
        self._done()
        if "error" in frame:
            self._error = _rebuild(frame, session.engine)

    def _done(self) -> None:
        self._open = False
        self._session._in_flight = False
        if self._timer is not None:
            self._timer.cancel()
        if self._session._stream is self:
            self._session._stream = None

    def drain(self) -> None:
        """Map the rest of the answer, freeing the worker for the next query."""
        while True:
            try:
                self._buffered.append(self._read_one())
            except StopIteration:
                break
            except GatewayError as exc:
                self._error = exc
                break


def _rebuild(reply: dict[str, Any], engine: str) -> GatewayError:
    cls = getattr(errors, reply["error"], None)
    if not (isinstance(cls, type) and issubclass(cls, GatewayError)) or cls is errors.ConfigError:
        cls = errors.QueryError
    error = cls(reply["message"], engine=engine, hint=reply.get("hint"))
    if reply.get("kind") in errors.KINDS:
        error.kind = reply["kind"]
    return error


if __name__ == "__main__":
    main()
