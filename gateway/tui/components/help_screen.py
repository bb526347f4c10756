"""The key bindings, gathered from the app, the tab, the editor and the grid."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

#: Bindings that live inside widgets we did not write, named for the help screen.
EDITOR_KEYS = [
    ("typing a word", "completion: keywords, functions, engines, tables, columns (tab or enter takes one)"),
    ("ctrl+a", "select all"), ("ctrl+z / ctrl+y", "undo / redo"),
    ("ctrl+f", "find in the buffer"), ("ctrl+g", "go to line"),
    ("ctrl+_", "comment or uncomment the line"),
    ("enter (in the grid)", "open the cell viewer"),
    ("[ / ] (in the verdict)", "older / newer shadow verdict"),
]


def binding_rows(groups: list[tuple[str, list[Binding]]]) -> list[tuple[str, str, str]]:
    rows = []
    for where, bindings in groups:
        for b in bindings:
            if b.description:
                rows.append((where, b.key.replace(",", " / "), b.description))
    return rows


class HelpScreen(ModalScreen[None]):
    """Every binding, one a line; escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        table = Table(title="arrowgate tui: keys", expand=True)
        table.add_column("where", style="dim")
        table.add_column("key", style="bold cyan")
        table.add_column("does")
        for row in binding_rows(self.groups):
            table.add_row(*row)
        for key, does in EDITOR_KEYS:
            table.add_row("editor", key, does)
        with VerticalScroll(id="help"):
            yield Static(table)
