"""One buffer (tab): its engine picker, SQL editor, results, verdicts and status line.

Each tab has its own sessions (one per engine it used), so its statements and their
cancellation never touch another tab's. Engine calls run in this tab's worker thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import Select
from textual_fastdatatable import DataTable

from gateway.errors import Cancelled, GatewayError, QueryError, error_label
from gateway.tui.components.editor import SqlEditor
from gateway.tui.components.engine_picker import EnginePicker
from gateway.tui.components.results_grid import (
    ResultsGrid,
    ResultsTable,
    error_text,
    prepare_backend,
)
from gateway.tui.components.status_bar import StatusBar
from gateway.tui.components.verdict_panel import VerdictPanel, reference_failure
from gateway.tui.components.vim import VimTextArea
from gateway.tui.console import ConsoleAnswer, reference_answer, wait_for_verdict
from gateway.tui.messages import (
    QueryFailed,
    QuerySubmitted,
    ReferenceFetched,
    ResultsFetched,
    VerdictReady,
)
from gateway.tui.persistence import Buffer, ConsoleStore, HistoryEntry
from gateway.tui.sql_text import format_sql, statements

if TYPE_CHECKING:
    from gateway.tui.console import ConsoleCore, TabSession


class QueryTab(Vertical):
    """The editor and what its statements answered."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+enter,ctrl+j,f5", "run_statement", "Run", tooltip="the selection, "
                "else the statement under the cursor"),
        Binding("ctrl+shift+enter,shift+f5", "run_all", "Run all"),
        Binding("f4", "format", "Format", show=False, tooltip="pretty-print the buffer "
                "(sqlglot, the engine's dialect); a buffer that does not parse is left alone"),
        Binding("ctrl+r", "toggle_reference", "Reference answer", show=False,
                tooltip="switch the grid to the reference's answer and back"),
    ]

    running: reactive[bool] = reactive(False)

    def __init__(self, core: ConsoleCore, store: ConsoleStore, buffer: Buffer,
                 names: Callable[[], list[str]], *, vim: bool = False,
                 tables: Callable[[], frozenset[str]] = frozenset) -> None:
        super().__init__(classes="query-tab")
        self.vim = vim
        self.core = core
        self.store = store
        self.buffer = buffer
        self.names = names
        self.tables = tables
        self.sessions: dict[str, TabSession] = {}
        self.answer: ConsoleAnswer | None = None
        self.showing_reference = False
        self._started = 0.0
        self._waiting = False
        self._active: TabSession | None = None
        #: set once the grid has painted the running statement's whole answer
        self._painted = threading.Event()
        #: set when the tab is taken down: answers arriving later are dropped
        self.closed = False

    def compose(self) -> ComposeResult:
        engines = self.core.engines
        engine = self.buffer.engine if self.buffer.engine in engines else \
            self.core.default_engine
        reference = self.buffer.reference if self.buffer.reference in engines else None
        yield EnginePicker(engines, engine, reference)
        with Container(id="work"):  # the editor above the results; side by side when short
            yield SqlEditor(self.buffer.text, self.names, vim=self.vim, tables=self.tables,
                            id="editor")
            yield ResultsGrid(id="results")
        yield VerdictPanel(id="verdict")
        yield StatusBar(id="status")

    def on_mount(self) -> None:
        self.query_one(VerdictPanel).display = False
        self.set_interval(0.2, self._tick)
        self._warm(self.picker.engine)

    @work(thread=True, group="warm")
    def _warm(self, engine: str) -> None:
        self.core.warm(engine)

    # -- what the tab holds --------------------------------------------------
    @property
    def editor(self) -> SqlEditor:
        return self.query_one(SqlEditor)

    @property
    def grid(self) -> ResultsGrid:
        return self.query_one(ResultsGrid)

    @property
    def verdicts(self) -> VerdictPanel:
        return self.query_one(VerdictPanel)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def picker(self) -> EnginePicker:
        return self.query_one(EnginePicker)

    def snapshot(self) -> Buffer:
        """The buffer as it should persist; while the tab is taken down (the app's 5 s
        save can fire then), the buffer as last taken."""
        try:
            editor, picker = self.editor, self.picker
        except NoMatches:
            return self.buffer
        self.buffer = Buffer(text=editor.text, engine=picker.engine, reference=picker.reference)
        return self.buffer

    @on(VimTextArea.ModeChanged)
    def _mode_changed(self, event: VimTextArea.ModeChanged) -> None:
        event.stop()
        self.status.mode = event.mode

    @on(EnginePicker.Closed)
    def _picker_closed(self, event: EnginePicker.Closed) -> None:
        event.stop()
        self.editor.focus()

    @on(Select.Changed)
    def _engine_changed(self, event: Select.Changed) -> None:
        self.buffer = self.snapshot()
        if isinstance(event.value, str) and event.value in self.core.engines:
            self._warm(event.value)

    # -- running ---------------------------------------------------------------
    def action_run_statement(self) -> None:
        sql = self.editor.current_statement()
        if sql:
            self.post_message(QuerySubmitted(sql))

    def action_run_all(self) -> None:
        sql = self.editor.text
        if sql.strip():
            self.post_message(QuerySubmitted(sql))

    def action_format(self) -> None:
        editor = self.editor
        formatted = format_sql(editor.text, self.core.dialect(self.picker.engine))
        if formatted != editor.text:
            editor.text = formatted

    @on(QuerySubmitted)
    def _submitted(self, event: QuerySubmitted) -> None:
        if self.running:
            self.notify("a statement is still running in this tab (escape cancels it)",
                        severity="warning")
            return
        engine, reference = self.picker.engine, self.picker.reference
        if reference == engine:
            reference = None
        parts = [s.text for s in statements(event.sql)] or [event.sql]
        self.running = True
        self._started = time.perf_counter()
        self._waiting = True
        self._painted.clear()
        self.status.show_running(engine, reference)
        self.verdicts.start(reference)
        self._execute(parts, engine, reference)

    def session(self, engine: str) -> TabSession:
        if engine not in self.sessions:
            self.sessions[engine] = self.core.session(engine)
        return self.sessions[engine]

    @work(thread=True, exclusive=True, group="query")
    def _execute(self, parts: list[str], engine: str, reference: str | None) -> None:
        session = self._active = self.session(engine)
        for i, sql in enumerate(parts):
            last = i == len(parts) - 1
            # only the last statement's answer is shown, so only it is shadowed
            ref = reference if last else None
            started = time.perf_counter()

            def first_rows(answer: ConsoleAnswer) -> None:
                self.post_message(ResultsFetched(answer, prepare_backend(answer.table)))

            try:
                answer = session.run(sql, ref, on_first_rows=first_rows if last else None)
            except GatewayError as exc:
                self.post_message(QueryFailed(sql, engine, exc, time.perf_counter() - started))
                return
            except Exception as exc:  # the app must survive whatever a statement does
                error = QueryError(f"{type(exc).__name__}: {exc}", engine=engine)
                self.post_message(QueryFailed(sql, engine, error, time.perf_counter() - started))
                return
            if last:
                self.post_message(ResultsFetched(answer, prepare_backend(answer.table)))
            else:
                self._remember(answer.sql, engine, answer.elapsed, answer.table.num_rows)
        if answer.shadow is not None:
            # the reference starts once the grid has painted the answer, so it never slows
            # the grid; an app or tab gone before that cancels it
            while not self._painted.wait(0.1):
                if self.closed or not self.app.is_running:
                    session.cancel()
                    break
            else:
                session.start_reference()
            wait_for_verdict(answer.shadow)
            self.post_message(VerdictReady(answer))

    @property
    def rows_in(self) -> int:
        """Rows of the running (or last) answer read so far."""
        return self._active.rows_in if self._active is not None else 0

    def action_cancel(self) -> bool:
        """Cancel this tab's running statement; False when none runs."""
        if not self.running or self._active is None:
            return False
        self.status.show_text("cancelling…")
        self._active.cancel()
        return True

    # -- showing -------------------------------------------------------------
    @on(ResultsFetched)
    async def _fetched(self, event: ResultsFetched) -> None:
        event.stop()
        if self.closed or not self.is_attached:
            return
        answer = event.answer
        self._waiting = False
        self.answer = answer
        self.showing_reference = False
        await self.grid.show(event.backend)
        self.status.show_answer(answer)
        if not answer.complete:
            return
        self.running = answer.shadow is not None  # until VerdictReady
        if answer.shadow is not None:
            self.verdicts.add(answer.shadow)
            self.call_after_refresh(self._painted.set)  # the worker starts the reference
        else:
            self.verdicts.display = False
            self._remember(answer.sql, answer.engine, answer.elapsed, answer.table.num_rows)

    @on(VerdictReady)
    def _verdict(self, event: VerdictReady) -> None:
        event.stop()
        self.running = False
        if self.closed or not self.is_attached:
            return
        self.verdicts.refresh_record()
        answer = event.answer
        record = answer.shadow
        assert record is not None
        verdict = record.category if record.status == "compared" else record.status
        self._remember(answer.sql, answer.engine, answer.elapsed, answer.table.num_rows,
                       reference=answer.reference, verdict=verdict)

    @on(QueryFailed)
    async def _failed(self, event: QueryFailed) -> None:
        event.stop()
        if self.closed or not self.is_attached:
            self.running = self._waiting = False
            return
        error = event.error
        text = Text()
        label, said = error_label(error)
        text.append(label, style="bold red")
        text.append(f" on {error.engine or event.engine}: ", style="red")
        text.append(error_text(error.message.removeprefix(said)))
        if error.hint:
            text.append("\nhint: ", style="bold")
            text.append(error_text(error.hint))
        self.verdicts.clear()
        await self.grid.show_error(text)
        # not running only now: quitting waits for this, and then takes the tab down
        self.running = self._waiting = False
        self.status.show_text("cancelled" if isinstance(error, Cancelled) else
                              f"failed after {event.elapsed * 1000:,.1f} ms on {event.engine}")
        self._remember(event.sql, event.engine, event.elapsed, None, error=str(error))

    def _remember(self, sql: str, engine: str, elapsed: float, rows: int | None,
                  **more: Any) -> None:
        try:
            self.store.append_history(HistoryEntry(sql=sql, engine=engine,
                                                   elapsed_ms=round(elapsed * 1000, 3),
                                                   rows=rows, **more))
        except OSError as exc:
            self.notify(f"history not saved: {exc}", severity="warning")

    def _tick(self) -> None:
        if self.running and self._waiting:
            engine = self.picker.engine
            seconds = time.perf_counter() - self._started
            self.status.show_text(f"running on {engine}… {seconds:,.1f} s (escape cancels)")

    async def action_toggle_reference(self) -> None:
        """Switch the grid between the primary's answer and the reference's."""
        record = self.verdicts.current
        if self.answer is None or record is None:
            self.notify("no shadowed run in this tab yet")
            return
        if self.showing_reference:
            await self.grid.show(prepare_backend(self.answer.table))
            self.status.show_answer(self.answer)
            self.showing_reference = False
            return
        table = reference_answer(record)
        if table is not None:
            await self.grid.show(prepare_backend(table))
            self.status.show_text(f"{table.num_rows:,} rows · the reference's answer "
                                  f"({record.reference}) · ctrl+r shows the primary's")
            self.showing_reference = True
            return
        if record.status != "compared" or reference_failure(record) is not None:
            self.notify("the reference gave no answer to show: it failed, or the run was "
                        "cancelled", severity="warning")
            return
        if self.running:
            self.notify("a statement is still running in this tab", severity="warning")
            return
        # too large to keep beside the grid: the reference runs the statement again
        self.status.show_text(f"running the statement on {record.reference} again to show "
                              "its answer (too large to keep)…")
        self._fetch_reference(self.answer.sql, record.reference)

    @work(thread=True, exclusive=True, group="reference")
    def _fetch_reference(self, sql: str, engine: str) -> None:
        try:
            answer = self.session(engine).run(sql)
        except GatewayError as exc:
            self.post_message(ReferenceFetched(sql, engine, None, exc))
            return
        self.post_message(ReferenceFetched(sql, engine, prepare_backend(answer.table)))

    @on(ReferenceFetched)
    async def _reference_fetched(self, event: ReferenceFetched) -> None:
        event.stop()
        if self.closed or not self.is_attached or self.running or self.answer is None \
                or self.answer.sql != event.sql:
            return  # another statement ran meanwhile
        if event.error is not None or event.backend is None:
            self.notify(f"the reference failed when run again: {event.error}", severity="warning")
            self.status.show_answer(self.answer)
            return
        await self.grid.show(event.backend)
        self.status.show_text(f"{event.backend.row_count:,} rows · the reference's answer "
                              f"({event.engine}, run again: too large to keep beside the "
                              "grid) · ctrl+r shows the primary's")
        self.showing_reference = True

    @on(DataTable.CellSelected)
    def _cell_selected(self, event: DataTable.CellSelected) -> None:
        from gateway.tui.components.cell_viewer import CellViewer

        event.stop()
        grid = event.data_table
        value = grid.true_value(event.coordinate) if isinstance(grid, ResultsTable) else \
            event.value
        self.app.push_screen(CellViewer(value))

    def close(self) -> None:
        self.closed = True
        for session in self.sessions.values():
            session.close()
