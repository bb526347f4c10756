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

from gateway.config import check_options
from gateway.engine import Option
from gateway.errors import Cancelled, ConfigError, GatewayError, QueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.config import GatewayConfig
    from gateway.core import Gateway
    from gateway.result import Result
    from gateway.session import Session
    from gateway.shadow.record import ShadowRecord
    from gateway.shadow.run import ShadowedResult

#: Seconds an answer may go on streaming before the rows already in are shown.
FIRST_ROWS_WAIT = 0.3

#: Seconds closing a tab's session waits for its reading thread to stop.
CLOSE_WAIT = 2.0

#: Bytes a shadowed run's comparison may hold of both answers (the ``[shadow]`` section's
#: ``max_compare_bytes`` and ``keep_reference_bytes``, capped at this): a larger answer
#: goes through the core's streaming comparison, spilled and compared batch by batch,
#: so the reference's answer is never held whole beside the grid.
SHADOW_MEMORY_BYTES = 16 << 20

#: The ``[tui]`` section of the configuration.
TUI_OPTIONS = {
    "vim": Option((bool,), False, help="vim-style modal editing in the editor (f9 toggles it)"),
}


@dataclass(frozen=True)
class ConsoleSettings:
    """The checked ``[tui]`` section."""

    vim: bool = False

    @classmethod
    def from_config(cls, config: GatewayConfig) -> ConsoleSettings:
        """Raises: ConfigError: an unknown key or a wrong value, naming the file and key."""
        def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
            return ConfigError(message, path=config.path, key=key, hint=hint)

        values, _ = check_options("tui", config.tui, TUI_OPTIONS, fail)
        return cls(**values)


@dataclass
class ConsoleAnswer:
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
        self.settings = ConsoleSettings.from_config(gw.config)

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
        """Start ``engine`` now and load what its first statement would (Engine.warm), so
        that statement waits for neither. Never raises: an engine that cannot start says
        why when a statement runs on it."""
        try:
            self.gw.engine(engine).warm()
        except Exception:
            pass

    def session(self, engine: str) -> TabSession:
        return TabSession(self, engine)

    def close(self) -> None:
        self.gw.close()

    # -- the catalog tree, one level per call ----------------------------------
    def catalogs(self, engine: str) -> list[str]:
        """The engine's catalogs; one unnamed one ("") when the engine has no such level."""
        return self.gw.catalogs(engine) or [""]

    def schemas(self, engine: str, catalog: str) -> list[str]:
        return [s.schema for s in self.gw.schemas(engine, catalog or None)]

    def tables(self, engine: str, catalog: str, schema: str) -> list[tuple[str, str]]:
        """``(table, table_type)`` pairs."""
        return [(t.table, t.table_type) for t in self.gw.tables(engine, catalog or None, schema)]

    def columns(self, engine: str, catalog: str, schema: str,
                table: str) -> list[tuple[str, str]]:
        """``(column, type)`` pairs."""
        return [(c.column, str(c.type))
                for c in self.gw.columns(engine, table=table, catalog=catalog or None,
                                         schema=schema)]


class TabSession:
    """One tab's connection to one engine: runs a statement, cancels it."""

    def __init__(self, core: ConsoleCore, engine: str):
        self.core = core
        self.engine = engine
        self._cancelled = threading.Event()
        self._session: Session | None = None
        #: the last shadowed answer: cancelling the tab stops its reference too
        self._shadowed: ShadowedResult | None = None
        #: the thread reading the last answer's batches
        self._pump: threading.Thread | None = None
        #: rows of the running answer read so far (more than shown while it streams)
        self.rows_in = 0

    def _open(self) -> Session:
        """The tab's session on the engine, opened on the first statement (it may start it)."""
        if self._session is None or self._session.closed:
            self._session = self.core.gw.session(self.engine)
        return self._session

    def run(self, sql: str, reference: str | None = None,
            on_first_rows: Callable[[ConsoleAnswer], None] | None = None) -> ConsoleAnswer:
        """Run ``sql`` (shadowed on ``reference`` when given); the answer read whole.

        ``on_first_rows`` sees the rows that are in when the answer is still streaming
        FIRST_ROWS_WAIT seconds after its first batch (a shadowed primary's too: the
        comparison reads the same batches as they pass).
        With a reference, the answer comes back before the verdict: ``answer.shadow``
        is then pending until :func:`wait_for_verdict` returns. The reference has not
        started yet: :meth:`start_reference` starts it (the tab calls it once the grid
        shows the answer, so the reference never competes with the grid for the cores).

        Raises:
            gateway.errors.GatewayError: the statement failed or was cancelled.
        """
        self._cancelled.clear()
        self._shadowed = None
        self.rows_in = 0
        session = self._open()  # starting the engine is not the statement's time
        started = time.perf_counter()
        if not reference:
            return self._read(sql, session.execute(sql, shadow=False), None, started,
                              on_first_rows)
        result, record = self._start_shadowed(sql, reference, session)
        self._shadowed = result
        answer = self._read(sql, result, reference, started, on_first_rows)
        answer.shadow = record
        if record.primary_ms is not None:
            answer.elapsed = record.primary_ms / 1000
        return answer

    def _start_shadowed(self, sql: str, reference: str,
                        session: Session) -> tuple[ShadowedResult, ShadowRecord]:
        from gateway.shadow.run import ShadowedResult, run_shadowed
        from gateway.shadow.settings import DEFAULT_STORE, ShadowSettings
        from gateway.statement import Statement

        gw = self.core.gw
        settings = gw.shadow_settings or ShadowSettings(
            reference=reference, store=str(Path(gw.config.base_dir) / DEFAULT_STORE))
        # in the background: the primary's answer is shown before the reference is done
        settings = dataclasses.replace(
            settings, reference=reference, sample=1.0, background=True,
            max_compare_bytes=min(settings.max_compare_bytes, SHADOW_MEMORY_BYTES),
            keep_reference_bytes=min(settings.keep_reference_bytes, SHADOW_MEMORY_BYTES))
        result, error, record = run_shadowed(gw.pipeline,
                                             Statement(sql, self.engine, session=session),
                                             settings, defer_reference=True,
                                             primary_shared=True)
        if error is not None:
            if isinstance(error, GatewayError):
                raise error
            raise QueryError(str(error), engine=self.engine) from error
        assert isinstance(result, ShadowedResult)
        return result, record

    def start_reference(self) -> None:
        """Start the last shadowed run's reference (once; never after a cancel). Never
        raises, never blocks."""
        shadowed = self._shadowed
        if shadowed is not None:
            shadowed.start_reference()

    def _read(self, sql: str, result: Result, reference: str | None, started: float,
              on_first_rows: Callable[[ConsoleAnswer], None] | None) -> ConsoleAnswer:
        """Read ``result`` whole in a thread of its own, showing its first rows on time."""
        import pyarrow as pa

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
            finally:
                if self._cancelled.is_set():
                    # release the engine's stream here, in the thread that read it: one
                    # left open is finished by the engine when the process ends (DuckDB
                    # computed the rest of a cancelled answer at exit, for seconds)
                    result.close()
            inbox.put(None)

        self._pump = threading.Thread(target=pump, name=f"tui-read-{self.engine}", daemon=True)
        self._pump.start()
        shown = on_first_rows is None
        show_at = 0.0
        while True:
            # an answer that keeps streaming shows what is in, once, FIRST_ROWS_WAIT after
            # its first batch; one that arrives whole at once is shown once, whole
            try:
                item = inbox.get(timeout=max(0.0, show_at - time.perf_counter())
                                 if batches and not shown else None)
            except queue.Empty:
                shown = True
                assert on_first_rows is not None
                on_first_rows(ConsoleAnswer(sql, self.engine, reference,
                                     pa.Table.from_batches(batches, schema=result.schema),
                                     time.perf_counter() - started, complete=False,
                                     answered_by=result.engine, notes=dict(result.notes)))
                continue
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            if not batches:
                show_at = time.perf_counter() + FIRST_ROWS_WAIT
            batches.append(item)
            self.rows_in += item.num_rows
            if self._cancelled.is_set():
                result.close()
                raise Cancelled("cancelled", engine=self.engine)
        if self._cancelled.is_set():
            raise Cancelled("cancelled", engine=self.engine)
        table = pa.Table.from_batches(batches, schema=result.schema)
        return ConsoleAnswer(sql, self.engine, reference, table, time.perf_counter() - started,
                      answered_by=result.engine, notes=dict(result.notes))

    def cancel(self) -> None:
        """Stop this tab's running statement (from any thread); other tabs' run on. Never
        raises. A shadowed run's reference stops too, also when the primary's answer is
        in and only the verdict is pending."""
        self._cancelled.set()
        if self._session is not None:
            self._session.cancel()
        shadowed = self._shadowed
        if shadowed is not None:
            shadowed.cancel()

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Close the session; a thread still reading an answer is cancelled and given
        ``wait`` seconds to stop first (the engine must not be closed under it). A
        shadowed run still without its verdict is cancelled too: its reference may not
        even have started (the tab starts it once the grid shows the answer)."""
        pump = self._pump
        if pump is not None and pump.is_alive():
            self.cancel()
            pump.join(wait)
        elif self._shadowed is not None:
            self._shadowed.cancel()  # nothing, when its verdict is in
        if self._session is not None:
            self._session.close()


def wait_for_verdict(record: ShadowRecord, timeout: float | None = None) -> bool:
    """Block until the shadow record is final; False when ``timeout`` passed first."""
    return record.wait(timeout)


def reference_answer(record: ShadowRecord) -> pa.Table | None:
    """The reference's whole answer, or None when it failed or was larger than the
    ``[shadow]`` section's ``keep_reference_bytes`` or :data:`SHADOW_MEMORY_BYTES`."""
    return record.reference_answer()
