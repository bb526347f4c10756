"""Every key binding, gathered from the bindings themselves (gateway.tui.keys)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    """Every binding, one a line, filed where it works; escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        #: ``(where, keys, what it does)``, as shown (:mod:`gateway.tui.keys`)
        self.rows = rows

    def compose(self) -> ComposeResult:
        table = Table(title="arrowgate tui: keys", expand=True)
        table.add_column("where", style="dim")
        table.add_column("key", style="bold cyan")
        table.add_column("does")
        for row in self.rows:
            table.add_row(*(Text(cell) for cell in row))
        with VerticalScroll(id="help"):
            yield Static(table)
