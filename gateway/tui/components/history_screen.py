"""The query history: searchable; enter puts a run's SQL back in the editor and runs it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from gateway.tui.persistence import ConsoleStore, HistoryEntry
from gateway.tui.visible import visible


def entry_label(entry: HistoryEntry) -> Text:
    text = Text()
    text.append(entry.time + "  ", style="dim")
    text.append(visible(f"{entry.engine:<10} "))
    text.stylize("cyan", len(entry.time) + 2)
    outcome = "error" if entry.error else f"{entry.rows:,} rows" if entry.rows is not None else ""
    text.append(f"{entry.elapsed_ms:>10,.1f} ms {outcome:>12}  ")
    if entry.verdict:
        text.append(f"[{entry.verdict} vs {entry.reference}] ",
                    style="green" if entry.verdict == "match" else "red")
    text.append(visible(" ".join(entry.sql.split())[:120]))
    return text


class HistoryScreen(ModalScreen[HistoryEntry | None]):
    """The latest runs first, filtered by what is typed."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, store: ConsoleStore) -> None:
        super().__init__()
        self.store = store
        self.entries: list[HistoryEntry] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="history"):
            yield Input(placeholder="search the history", id="history-search")
            yield OptionList(id="history-list")

    def on_mount(self) -> None:
        self._fill("")

    @on(Input.Changed)
    def _search(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def _fill(self, search: str) -> None:
        self.entries = self.store.history(search)
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(entry_label(e)) for e in self.entries])
        if self.entries:
            options.highlighted = 0

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._choose(self.query_one(OptionList).highlighted)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self._choose(event.option_index)

    def _choose(self, index: int | None) -> None:
        if index is not None and 0 <= index < len(self.entries):
            self.dismiss(self.entries[index])
