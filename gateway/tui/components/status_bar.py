"""One line under the results: rows, elapsed time and the engine that answered."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gateway.tui.console import Answer


def describe(answer: Answer) -> str:
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


class StatusBar(Static):
    """What the last run of the tab did, or that one is running."""

    def show_answer(self, answer: Answer) -> None:
        self.update(Text(describe(answer)))

    def show_running(self, engine: str, reference: str | None) -> None:
        also = f", shadowed on {reference}" if reference else ""
        self.update(Text(f"running on {engine}{also}… (escape cancels)"))

    def show_text(self, text: str) -> None:
        self.update(Text(text))
