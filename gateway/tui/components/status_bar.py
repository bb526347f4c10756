"""One line under the results: rows, elapsed time and the engine that answered."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gateway.tui.console import ConsoleAnswer
from gateway.tui.visible import visible


def describe(answer: ConsoleAnswer) -> str:
    """``1,000 rows · 12.5 ms · duck`` plus a fallback and a streaming note."""
    rows = answer.table.num_rows
    noun = "row" if rows == 1 else "rows"
    engine = answer.answered_by or answer.engine
    if engine != answer.engine:
        engine = f"{engine} (fallback from {answer.engine}: {answer.fallback or 'refused'})"
    text = f"{rows:,} {noun} · {answer.elapsed * 1000:,.1f} ms · {engine}"
    if not answer.complete:
        text += " · more rows streaming…"
    if answer.notes.get("skipped_rows"):
        text += f" · {answer.notes['skipped_rows']} malformed rows skipped"
    return text


class StatusBar(Widget):
    """What the last run of the tab did, or that one is running.

    One line of fixed height: a change repaints this line only, never the layout (a
    layout pass costs a tenth of a second with a 1M-row grid on screen, and the
    running timer changes the line five times a second).
    """

    text: reactive[str] = reactive("", layout=False)
    #: the editor's vim mode (``normal``, ``insert``, ``visual``), "" with vim keys off
    mode: reactive[str] = reactive("", layout=False)

    def render(self) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        if self.mode:
            line.append(f"-- {self.mode.upper()} --", style="bold reverse")
            line.append(" ")
        line.append(visible(self.text))
        return line

    def show_answer(self, answer: ConsoleAnswer) -> None:
        self.text = describe(answer)

    def show_running(self, engine: str, reference: str | None) -> None:
        also = f", shadowed on {reference}" if reference else ""
        self.text = f"running on {engine}{also}… (escape cancels)"

    def show_text(self, text: str) -> None:
        self.text = text
