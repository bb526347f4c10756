"""The core as the console uses it: one gateway, one session per tab, the catalog by level.

This module is the console's only door into the core, so the widgets never see
how a query is run, cancelled or shadowed. Everything here blocks: the app calls
it from worker threads only.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.errors import Cancelled, GatewayError, QueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.core import Gateway
    from gateway.shadow import ShadowRecord

#: Seconds an answer may go on streaming before the rows already in are shown.
FIRST_ROWS_WAIT = 0.3


@dataclass
class Answer:
    """One run of one statement, as the results area shows it."""

    sql: str
    engine: str
    reference: str | None
    table: pa.Table
    elapsed: float
    complete: bool = True
    answered_by: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    shadow: ShadowRecord | None = None

    @property
    def fallback(self) -> str | None:
        """Why the engine asked handed the statement on, when it did."""
        reason = self.notes.get("fallback_reason")
        return str(reason) if reason else None


class ConsoleCore:
    """One gateway for the whole app; tabs open :class:`TabSession` objects on it."""

    def __init__(self, gw: Gateway):
        self.gw = gw
        self._catalog_cache: dict[str, Any] = {}
        self._catalog_lock = threading.Lock()

    @classmethod
    def open(cls, config: str | os.PathLike[str] | None) -> ConsoleCore:
        from gateway.config import find_config_path
        from gateway.core import Gateway

        return cls(Gateway(find_config_path(None if config is None else str(config))))

    @property
    def engines(self) -> list[str]:
        return list(self.gw.config.engines)

    @property
    def default_engine(self) -> str:
        return self.gw.default_engine

    @property
    def sources(self) -> list[str]:
        return list(self.gw.config.sources)

    @property
    def state_dir(self) -> Path:
        """Where buffers and history persist: ``$ARROWGATE_HOME/tui`` or beside the config."""
        home = os.environ.get("ARROWGATE_HOME")
        if home:
            return Path(home) / "tui"
        return Path(self.gw.config.base_dir) / ".arrowgate" / "tui"

    def dialect(self, engine: str | None) -> str:
        return "duckdb"

    def warm(self, engine: str) -> None:
        """Start ``engine`` now, so the first statement does not wait for it. Never raises:
        an engine that cannot start says why when a statement runs on it."""
        try:
            self.gw.engine(engine)
        except Exception:
            pass

    def session(self, engine: str) -> TabSession:
        return TabSession(self, engine)

    def close(self) -> None:
        self.gw.close()

    # -- the catalog tree, one level per call ----------------------------------
    def _columns(self, engine: str) -> list[Any]:
        with self._catalog_lock:
            if engine not in self._catalog_cache:
                self._catalog_cache[engine] = self.gw.catalog(engine)
            return list(self._catalog_cache[engine])

    def catalogs(self, engine: str) -> list[str]:
        """The engine's catalogs; one unnamed one ("") when the engine has no such level."""
        return [""]

    def schemas(self, engine: str, catalog: str) -> list[str]:
        return sorted({c.schema for c in self._columns(engine)})

    def tables(self, engine: str, catalog: str, schema: str) -> list[tuple[str, str]]:
        """``(table, table_type)`` pairs."""
        seen: dict[str, str] = {}
        for c in self._columns(engine):
            if c.schema == schema:
                seen.setdefault(c.table, c.table_type)
        return sorted(seen.items())

    def columns(self, engine: str, catalog: str, schema: str,
                table: str) -> list[tuple[str, str]]:
        """``(column, type)`` pairs."""
        return [(c.column, str(c.type)) for c in self._columns(engine)
                if c.schema == schema and c.table == table]


class TabSession:
    """One tab's connection to one engine: runs a statement, cancels it."""

    def __init__(self, core: ConsoleCore, engine: str):
        self.core = core
        self.engine = engine
        self._cancelled = threading.Event()
        self._running: list[str] = []

    def run(self, sql: str, reference: str | None = None,
            on_first_rows: Callable[[Answer], None] | None = None) -> Answer:
        """Run ``sql`` (shadowed on ``reference`` when given); the answer read whole.

        ``on_first_rows`` sees the rows that are in when an (unshadowed) answer is still
        streaming FIRST_ROWS_WAIT seconds after its first batch.
        With a reference, the answer comes back before the verdict: ``answer.shadow``
        is then pending until :func:`wait_for_verdict` returns.

        Raises:
            gateway.errors.GatewayError: the statement failed or was cancelled.
        """
        self._cancelled.clear()
        self._running = [self.engine] + ([reference] if reference else [])
        try:
            if reference:
                return self._run_shadowed(sql, reference)
            return self._run_plain(sql, on_first_rows)
        finally:
            self._running = []

    def _run_plain(self, sql: str, on_first_rows: Callable[[Answer], None] | None) -> Answer:
        import pyarrow as pa

        gw = self.core.gw
        gw.engine(self.engine)  # starting the engine is not the statement's time
        started = time.perf_counter()
        result = gw.execute(sql, engine=self.engine, shadow=False)
        batches: list[pa.RecordBatch] = []
        inbox: queue.Queue[pa.RecordBatch | BaseException | None] = queue.Queue()

        def pump() -> None:
            try:
                for batch in result.reader():
                    inbox.put(batch)
                    if self._cancelled.is_set():
                        break
            except BaseException as exc:
                inbox.put(exc)
                return
            inbox.put(None)

        threading.Thread(target=pump, name=f"tui-read-{self.engine}", daemon=True).start()
        shown = on_first_rows is None
        while True:
            # an answer that keeps streaming shows what is in, once, FIRST_ROWS_WAIT after
            # its first batch; one that arrives whole at once is shown once, whole
            try:
                item = inbox.get(timeout=FIRST_ROWS_WAIT if batches and not shown else None)
            except queue.Empty:
                shown = True
                assert on_first_rows is not None
                on_first_rows(Answer(sql, self.engine, None,
                                     pa.Table.from_batches(batches, schema=result.schema),
                                     time.perf_counter() - started, complete=False,
                                     answered_by=result.engine, notes=dict(result.notes)))
                continue
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            batches.append(item)
            if self._cancelled.is_set():
                result.close()
                raise Cancelled("cancelled", engine=self.engine)
        if self._cancelled.is_set():
            raise Cancelled("cancelled", engine=self.engine)
        table = pa.Table.from_batches(batches, schema=result.schema)
        return Answer(sql, self.engine, None, table, time.perf_counter() - started,
                      answered_by=result.engine, notes=dict(result.notes))

    def _run_shadowed(self, sql: str, reference: str) -> Answer:
        from gateway.shadow import DEFAULT_STORE, ShadowSettings, run_shadowed

        gw = self.core.gw
        configured = gw.shadow_settings
        settings = (dataclasses.replace(configured, reference=reference, sample=1.0,
                                        background=True) if configured is not None else
                    ShadowSettings(reference=reference, background=True,
                                   store=str(Path(gw.config.base_dir) / DEFAULT_STORE)))
        started = time.perf_counter()
        result, error, record = run_shadowed(gw, sql, self.engine, reference, settings)
        if self._cancelled.is_set():
            raise Cancelled("cancelled", engine=self.engine)
        if error is not None:
            if isinstance(error, GatewayError):
                raise error
            raise QueryError(str(error), engine=self.engine) from error
        assert result is not None
        elapsed = (record.primary_ms / 1000 if record.primary_ms is not None
                   else time.perf_counter() - started)
        return Answer(sql, self.engine, reference, result.to_arrow(), elapsed, answered_by=result.engine,
                      notes=dict(result.notes), shadow=record)

    def cancel(self) -> None:
        """Stop this tab's running statement (from any thread). Never raises."""
        self._cancelled.set()
        for name in list(self._running):
            try:
                self.core.gw.engine(name).cancel()
            except Exception:
                pass  # best effort: the engine may already be done or gone

    def close(self) -> None:
        self.cancel()


def wait_for_verdict(record: ShadowRecord, timeout: float | None = None) -> bool:
    """Block until the shadow record is final; False when ``timeout`` passed first."""
    return record.wait(timeout)


def reference_answer(record: ShadowRecord) -> pa.Table | None:
    """The reference's whole answer, when the core keeps it (the shadow record does not yet)."""
    return None
