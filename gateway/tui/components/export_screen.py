"""Asks where to export the answer; the file's extension picks the format."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

#: extension -> gateway.output format
EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".ndjson": "ndjson",
              ".jsonl": "ndjson", ".arrow": "arrow", ".arrows": "arrow"}
CLIPBOARD = "clipboard"


def export_format(target: str) -> str | None:
    """The output format for a path (by extension), ``clipboard``, or None when unknown."""
    if target.strip().lower() == CLIPBOARD:
        return CLIPBOARD
    return EXTENSIONS.get(Path(target).suffix.lower())


class ExportScreen(ModalScreen[str | None]):
    """A path input; enter exports, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="export"):
            yield Label("Export the answer to (.csv .parquet .json .ndjson .arrow, or "
                        "'clipboard' for CSV):")
            yield Input(placeholder="answer.parquet", id="export-path")
            yield Label("", id="export-error", classes="error")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        target = event.value.strip()
        if export_format(target) is None:
            self.query_one("#export-error", Label).update(
                "unknown extension: use " + ", ".join(EXTENSIONS) + " or 'clipboard'")
            return
        self.dismiss(target)
