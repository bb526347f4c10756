"""The console's app: the catalog sidebar, one tab per buffer, and the app-wide keys."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from gateway.errors import GatewayError
from gateway.tui.components.catalog_tree import CatalogTree
from gateway.tui.components.query_tab import QueryTab
from gateway.tui.console import ConsoleCore
from gateway.tui.messages import NameChosen, QuerySubmitted
from gateway.tui.persistence import Buffer, ConsoleStore, HistoryEntry
from gateway.tui.visible import visible_plain

#: Seconds quitting waits for running statements to stop once cancelled.
QUIT_WAIT = 2.0

#: Below NARROW columns the catalog collapses (ctrl+b shows it); below SHORT rows the
#: editor and the results sit side by side.
NARROW = 80
SHORT = 20


class ArrowgateApp(App[None]):
    """``arrowgate tui``: one statement on an engine, shadowed on another, side by side."""

    CSS_PATH = "app.tcss"
    TITLE = "arrowgate"
    #: the screen's classes by size, for app.tcss
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]  # noqa: RUF012 - App declares it an instance variable
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]  # noqa: RUF012 - as above
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", tooltip="buffers are saved; a running statement "
                "is cancelled first"),
        Binding("f1", "help", "Help", tooltip="every key"),
        Binding("ctrl+n", "new_tab", "New tab"),
        Binding("ctrl+w", "close_tab", "Close tab", show=False),
        Binding("ctrl+k", "next_tab", "Next tab", show=False),
        Binding("ctrl+b", "toggle_catalog", "Catalog", tooltip="show or hide it (it starts "
                "collapsed below 80 columns)"),
        Binding("ctrl+t", "pick_engine", "Engine", tooltip="open the tab's engine picker"),
        Binding("f8", "history", "History", tooltip="type to search; enter re-runs the "
                "statement on its engine"),
        Binding("ctrl+e", "export", "Export", tooltip="the path's extension picks CSV, "
                "Parquet, JSON, NDJSON or Arrow, 'clipboard' copies CSV; while the answer "
                "streams, the rows in, marked partial"),
        Binding("f9", "toggle_vim", "Vim keys", show=False),
        Binding("f2", "focus_editor", "Focus editor", show=False),
        Binding("f6", "focus_catalog", "Focus catalog", show=False),
        Binding("f7", "focus_results", "Focus results", show=False),
        Binding("escape,ctrl+c", "cancel", "Cancel query", priority=True, show=False,
                tooltip="the tab's running statement (with none running, both keys keep "
                "their usual meaning)"),
    ]

    def __init__(self, core: ConsoleCore, *, engine: str | None = None,
                 reference: str | None = None, persist: bool = True) -> None:
        """``persist`` False: start from one empty buffer and never save buffers (headless)."""
        super().__init__()
        self.persist = persist
        self.core = core
        self.store = ConsoleStore(core.state_dir)
        self.engine = engine
        #: the reference every tab shadows on: --reference, else the [shadow] section's
        self.reference = reference
        if reference is None and core.gw.shadow_settings is not None:
            self.reference = core.gw.shadow_settings.reference or None
        #: vim-style editing in every tab: ``[tui] vim`` in the config, f9 toggles it
        self.vim = core.settings.vim
        self._tab_ids = itertools.count(1)
        #: the terminal was narrower than NARROW at the last resize
        self._narrow: bool | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield CatalogTree(self.core, id="catalog")
            yield TabbedContent(id="tabs")
        yield Footer()

    async def on_mount(self) -> None:
        buffers = (self.store.load_buffers() if self.persist else []) or [Buffer()]
        for buffer in buffers:
            if self.engine is not None:
                buffer.engine = self.engine
            if self.reference is not None:
                buffer.reference = self.reference
            await self.add_tab(buffer)
        self.set_interval(5.0, self.save_buffers)
        self._fit_catalog(self.size.width)
        self.action_focus_editor()
        shadowed = any(buffer.reference for buffer in buffers)
        self.call_after_refresh(self._prepare, shadowed)

    def on_resize(self, event: events.Resize) -> None:
        self._fit_catalog(event.size.width)

    def _fit_catalog(self, width: int) -> None:
        """Collapse the catalog when the terminal becomes narrow, show it when it becomes
        wide again; in between, ctrl+b decides."""
        narrow = width < NARROW
        if narrow != self._narrow:
            self._narrow = narrow
            self.query_one(CatalogTree).display = not narrow

    @work(thread=True, group="warm")
    def _prepare(self, shadowed: bool = False) -> None:
        """Import, off the event loop and before the first statement, what running one and
        completing a word need: sqlglot (splitting statements: ~0.1 s to import) and Arrow's
        compute functions with the grid's width measures (~0.04 s); and, when a tab shadows
        its statements, the shadow machinery and the statement-kind check it runs before
        the primary starts (which the first shadowed grid otherwise waited for)."""
        import pyarrow as pa

        from gateway.tui.components.results_grid import prepare_backend
        from gateway.tui.sql_text import functions, keywords, statements

        statements("SELECT 1")
        keywords()
        functions()
        prepare_backend(pa.table({"n": [1], "x": [1.5], "s": ["s"]}))
        if shadowed:
            import gateway.shadow.run
            import gateway.verify.compare_stream  # noqa: F401
            from gateway.shadow.settings import ShadowSettings, skip_reason

            skip_reason("SELECT 1", ShadowSettings(reference=""))

    # -- tabs ------------------------------------------------------------------
    @property
    def tabs(self) -> list[QueryTab]:
        return list(self.query(QueryTab))

    @property
    def active_tab(self) -> QueryTab | None:
        pane = self.query_one(TabbedContent).active_pane
        return pane.query_one(QueryTab) if pane is not None else None

    async def add_tab(self, buffer: Buffer) -> QueryTab:
        n = next(self._tab_ids)
        tab = QueryTab(self.core, self.store, buffer, self.completion_names, vim=self.vim,
                       tables=self.table_names)
        tabs = self.query_one(TabbedContent)
        await tabs.add_pane(TabPane(f"query {n}", tab, id=f"tab-{n}"))
        tabs.active = f"tab-{n}"
        return tab

    def completion_names(self) -> list[str]:
        return sorted(self.query_one(CatalogTree).names)

    def table_names(self) -> frozenset[str]:
        """The catalog's table names loaded so far (completion ranks them first after FROM)."""
        return frozenset(self.query_one(CatalogTree).tables)

    async def action_new_tab(self) -> None:
        tab = await self.add_tab(Buffer(engine=self.engine, reference=self.reference))
        tab.editor.focus()

    async def action_close_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        pane = tabs.active_pane
        if pane is None or len(self.tabs) == 1:
            return
        pane.query_one(QueryTab).close()
        await tabs.remove_pane(str(pane.id))
        self.save_buffers()

    def action_next_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        ids = [str(p.id) for p in tabs.query(TabPane)]
        if ids:
            tabs.active = ids[(ids.index(tabs.active) + 1) % len(ids)]

    def save_buffers(self) -> None:
        if not self.persist:
            return
        try:
            self.store.save_buffers([tab.snapshot() for tab in self.tabs])
        except OSError as exc:
            self.notify(f"buffers not saved: {exc}", severity="warning")

    @on(QuerySubmitted)
    def _submitted(self) -> None:
        self.save_buffers()

    async def action_quit(self) -> None:
        """Save the buffers, cancel what runs and give it QUIT_WAIT seconds to stop (a
        statement that ignores its cancel is left to the process's end), then exit."""
        self.save_buffers()
        running = [tab for tab in self.tabs if tab.action_cancel()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUIT_WAIT
        while any(tab.running for tab in running) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        for tab in self.tabs:
            tab.close()
        self.exit()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notice goes through here (widgets' too): as text, never markup, and with
        control characters shown as escapes, since notices quote errors and paths."""
        super().notify(visible_plain(message, keep="\n"), title=visible_plain(title),
                       severity=severity, timeout=timeout, markup=False)

    # -- app-wide actions ------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":  # escape and ctrl+c keep their usual meaning when nothing runs
            tab = self.active_tab
            return tab is not None and tab.running
        return True

    def action_cancel(self) -> None:
        tab = self.active_tab
        if tab is not None:
            tab.action_cancel()

    def action_toggle_vim(self) -> None:
        self.vim = not self.vim
        for tab in self.tabs:
            tab.editor.set_vim(self.vim)
        self.notify("vim keys on: escape for normal mode, i to insert" if self.vim else
                    "vim keys off")

    def action_toggle_catalog(self) -> None:
        catalog = self.query_one(CatalogTree)
        catalog.display = not catalog.display

    def action_pick_engine(self) -> None:
        tab = self.active_tab
        if tab is not None:
            tab.picker.open()

    def action_focus_editor(self) -> None:
        tab = self.active_tab
        if tab is not None:
            tab.editor.focus()

    def action_focus_catalog(self) -> None:
        catalog = self.query_one(CatalogTree)
        catalog.display = True
        catalog.focus()

    def action_focus_results(self) -> None:
        tab = self.active_tab
        if tab is not None and tab.grid.table is not None:
            tab.grid.table.focus()

    def open_popup(self, screen: Screen[Any], then: Callable[[Any], None] | None = None) -> None:
        """Push ``screen``; once it closes (its result handed to ``then``), the editor has
        the focus, whatever had it before: the next key is SQL again."""

        def closed(result: Any) -> None:
            tab = self.active_tab
            if tab is not None:  # first: what ``then`` starts sees the focus where it goes
                tab.editor.focus_now()
            if then is not None:
                then(result)

        self.push_screen(screen, closed)

    def action_help(self) -> None:
        from gateway.tui.components.help_screen import HelpScreen
        from gateway.tui.keys import EDITOR_EXTRAS, binding_rows

        self.open_popup(HelpScreen(binding_rows(type(self)) + EDITOR_EXTRAS))

    def action_history(self) -> None:
        from gateway.tui.components.history_screen import HistoryScreen

        self.open_popup(HistoryScreen(self.store), self._rerun)

    def _rerun(self, entry: HistoryEntry | None) -> None:
        tab = self.active_tab
        if entry is None or tab is None:
            return
        tab.editor.text = entry.sql
        if entry.engine in self.core.engines:
            tab.picker.pick(engine=entry.engine, reference=entry.reference or "")
        tab.post_message(QuerySubmitted(entry.sql))

    @on(NameChosen)
    def _insert_name(self, event: NameChosen) -> None:
        tab = self.active_tab
        if tab is not None:
            tab.editor.insert(event.text)

    # -- export ---------------------------------------------------------------
    def action_export(self) -> None:
        from gateway.tui.components.export_screen import ExportScreen

        tab = self.active_tab
        if tab is None or tab.answer is None:
            self.notify("nothing to export: run a statement first", severity="warning")
            return
        table = tab.answer.table
        # while the answer streams, what is in is exported and said to be partial
        partial = None if tab.answer.complete else (table.num_rows,
                                                    max(tab.rows_in, table.num_rows))

        def export(target: str | None) -> None:
            if target:
                self._export(table, target, partial)

        self.open_popup(ExportScreen(), export)

    @work(thread=True, group="export")
    def _export(self, table: Any, target: str, partial: tuple[int, int] | None) -> None:
        import io

        from gateway.output.writers import write
        from gateway.tui.components.export_screen import (
            CLIPBOARD,
            export_format,
            partial_path,
            refusal,
        )

        fmt = export_format(target)
        assert fmt is not None
        what = f"partial: {partial[0]:,} of at least {partial[1]:,} rows (the answer was " \
            "still streaming)" if partial else f"{table.num_rows:,} rows"
        try:
            if fmt == CLIPBOARD:
                out = io.BytesIO()
                write(table.to_reader(), "csv", out)
                self.call_from_thread(self.copy_to_clipboard, out.getvalue().decode())
                self.call_from_thread(self.notify, f"{what} copied as CSV")
                return
            if partial:
                target = partial_path(target, *partial)
            with open(target, "wb") as fh:
                write(table.to_reader(), fmt, fh)
        except OSError as exc:
            self.call_from_thread(self.notify, f"export failed: {refusal(exc, target)}",
                                  severity="error")
            return
        except (GatewayError, ValueError) as exc:
            self.call_from_thread(self.notify, f"export failed: {exc}", severity="error")
            return
        self.call_from_thread(self.notify, f"{what} written to {target} ({fmt})",
                              severity="warning" if partial else "information")

    # -- command palette --------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, action in (
            ("New tab", "open a new buffer", self.action_new_tab),
            ("Close tab", "close the current buffer", self.action_close_tab),
            ("History", "search and re-run earlier statements", self.action_history),
            ("Export", "write the answer to CSV, Parquet, JSON or Arrow", self.action_export),
            ("Toggle catalog", "show or hide the data catalog", self.action_toggle_catalog),
            ("Pick engine", "the engine this tab runs on, and the one it is shadowed on",
             self.action_pick_engine),
            ("Vim keys", "modal editing (normal, insert, visual) on or off",
             self.action_toggle_vim),
            ("Keys", "every key binding", self.action_help),
        ):
            yield SystemCommand(title, help_text, action)
        tab = self.active_tab
        if tab is not None:
            yield SystemCommand("Run statement", "the selection or the statement under the "
                                "cursor", tab.action_run_statement)
            yield SystemCommand("Run all", "every statement of the buffer", tab.action_run_all)
            yield SystemCommand("Format", "pretty-print the buffer (sqlglot)", tab.action_format)
            yield SystemCommand("Reference answer", "switch the grid to the reference's answer",
                                tab.action_toggle_reference)
