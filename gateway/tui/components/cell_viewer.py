"""A cell's whole value: long text wrapped, JSON (or nested Arrow values) indented.

Control characters show as dimmed escapes (gateway.tui.visible); JSON is written with
its own escapes (``\u001b``), so a value never reaches the terminal raw.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gateway.tui.visible import visible


def pretty(value: Any) -> Text | Syntax:
    """JSON (a JSON string, a list or a struct) indented and highlighted; anything else as text."""
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            return visible(value, keep="\n\t")
        if not isinstance(data, (dict, list)):
            return visible(value, keep="\n\t")
    if isinstance(data, (dict, list)):
        return Syntax(json.dumps(data, indent=2, default=str), "json", word_wrap=True,
                      theme="ansi_dark")
    return Text("NULL") if value is None else visible(str(value), keep="\n\t")


class CellViewer(ModalScreen[None]):
    """Shows one value; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="cell-viewer"):
            yield Static(pretty(self.value), id="cell-value")
