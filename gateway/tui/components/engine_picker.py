"""The engine and the shadow reference of one tab."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Label, Select

NO_REFERENCE = "(none)"


class EnginePicker(Horizontal):
    """Two selects: the engine that answers, and the one that shadows it (or none)."""

    class Closed(Message):
        """A select's list closed, with a pick or without: the editor takes the focus back."""

    def __init__(self, engines: list[str], engine: str, reference: str | None) -> None:
        super().__init__()
        self.engines = engines
        self._engine = engine
        self._reference = reference

    def compose(self) -> ComposeResult:
        yield Label("engine", classes="picker-label")
        yield Select([(e, e) for e in self.engines], value=self._engine, allow_blank=False,
                     id="engine", compact=True)
        yield Label("shadow on", classes="picker-label")
        yield Select([(NO_REFERENCE, NO_REFERENCE)] + [(e, e) for e in self.engines],
                     value=self._reference or NO_REFERENCE, allow_blank=False, id="reference",
                     compact=True)

    def on_mount(self) -> None:
        for select in self.query(Select):
            self.watch(select, "expanded", self._expanded, init=False)

    def _expanded(self, expanded: bool) -> None:
        if not expanded:
            self.post_message(self.Closed())

    @property
    def engine(self) -> str:
        return str(self.query_one("#engine", Select).value)

    @property
    def reference(self) -> str | None:
        value = self.query_one("#reference", Select).value
        return None if value == NO_REFERENCE else str(value)

    @on(Select.Changed)
    def _not_itself(self, event: Select.Changed) -> None:
        """An engine shadowed on itself compares an answer with itself: the reference goes
        back to none when it is picked as the engine, or the engine as the reference."""
        if self.reference is not None and self.reference == self.engine:
            self.query_one("#reference", Select).value = NO_REFERENCE
            self.notify(f"{self.engine} cannot shadow itself: pick another engine as the "
                        "reference", severity="warning")

    def open(self) -> None:
        """Focus the engine select with its list open (ctrl+t)."""
        select = self.query_one("#engine", Select)
        select.focus()
        select.expanded = True

    def pick(self, engine: str | None = None, reference: str | None = None) -> None:
        if engine is not None:
            self.query_one("#engine", Select).value = engine
        if reference is not None:
            self.query_one("#reference", Select).value = reference or NO_REFERENCE
