"""Asks where to export the answer; the file's extension picks the format.

An answer still streaming is exported as far as it has arrived, and says so: the
notice and the file's name carry ``partial: N of at least M rows``. A missing folder
is refused, in one line, never created (a typo would otherwise scatter folders).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from gateway.output import writers as output

#: extension -> gateway.output.writers format
EXTENSIONS = {**output.EXTENSIONS, ".jsonl": "ndjson"}
CLIPBOARD = "clipboard"


def partial_path(target: str, rows: int, at_least: int) -> str:
    """``out.csv`` -> ``out.partial-100-of-at-least-5000.csv``."""
    path = Path(target)
    return str(path.with_name(f"{path.stem}.partial-{rows}-of-at-least-{at_least}"
                              f"{path.suffix}"))


def refusal(exc: OSError, target: str) -> str:
    """An export's OSError as one line saying what to do, not an errno."""
    folder = Path(target).parent
    if not folder.is_dir():
        return f"no folder {folder}: create it first, or pick another path"
    return f"{exc.strerror or exc} ({exc.filename or target})"


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
            # two lines: one was wider than the dialog, which cut it ("...or 'clip")
            yield Label("Export the answer to a file; its extension picks the format:\n"
                        + " ".join(EXTENSIONS) + "\nor 'clipboard' (CSV)", id="export-prompt")
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
