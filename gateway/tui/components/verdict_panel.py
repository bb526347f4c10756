"""The shadow verdict: match or the category with its evidence, the differing rows side by
side with the differing cells marked, and both latencies as bars with their ratio.

The panel shows the state of the run under way: ``running``, then ``primary done,
reference running``, then the verdict, or ``reference failed: reason``. It is cleared
when a statement starts. Earlier runs of the tab stay here: ``[`` and ``]`` step
through them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from gateway.tui.visible import visible, visible_plain

if TYPE_CHECKING:
    from gateway.shadow.record import ShadowRecord

MARK = "bold white on dark_red"
ABSENT = "(absent)"
SAME = "="


@dataclass
class SideBySide:
    """The differing rows of both answers, aligned row by row.

    ``marked`` holds ``(row, column)`` of every cell that differs; a row absent from
    one side shows :data:`ABSENT` there, a cell known to be equal shows :data:`SAME`.
    """

    columns: list[str] = field(default_factory=list)
    primary: list[list[str]] = field(default_factory=list)
    reference: list[list[str]] = field(default_factory=list)
    marked: set[tuple[int, str]] = field(default_factory=set)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def side_by_side(evidence: dict[str, Any]) -> SideBySide:
    """Align the comparator's evidence (``differences``, ``missing``, ``extra``) into rows."""
    view = SideBySide()
    differences = evidence.get("differences") or []
    by_key: dict[str, tuple[dict[str, Any], dict[str, tuple[Any, Any]]]] = {}
    for diff in differences:
        key = diff.get("key") or {}
        slot = by_key.setdefault(json.dumps(key, sort_keys=True, default=str), (key, {}))
        slot[1][diff["column"]] = (diff.get("primary"), diff.get("reference"))
    columns: list[str] = []
    for key, changed in by_key.values():
        for name in [*key, *changed]:
            if name not in columns:
                columns.append(name)
    for row in [*(evidence.get("extra") or []), *(evidence.get("missing") or [])]:
        for name in row:
            if name not in columns:
                columns.append(name)
    view.columns = columns
    for key, changed in by_key.values():
        i = len(view.primary)
        prow, rrow = [], []
        for name in columns:
            if name in changed:
                p, r = changed[name]
                prow.append(_cell(p))
                rrow.append(_cell(r))
                view.marked.add((i, name))
            elif name in key:
                prow.append(_cell(key[name]))
                rrow.append(_cell(key[name]))
            else:
                prow.append(SAME)
                rrow.append(SAME)
        view.primary.append(prow)
        view.reference.append(rrow)
    for row, present in [(r, "primary") for r in evidence.get("extra") or []] + \
                        [(r, "reference") for r in evidence.get("missing") or []]:
        i = len(view.primary)
        values = [_cell(row.get(name)) if name in row else SAME for name in columns]
        absent = [ABSENT] + [""] * (len(columns) - 1) if columns else [ABSENT]
        view.primary.append(values if present == "primary" else absent)
        view.reference.append(values if present == "reference" else absent)
        view.marked.update((i, name) for name in columns)
    return view


def _marked(value: str) -> Text:
    text = visible(value)
    text.stylize(MARK)
    return text


def _side_table(title: str, columns: list[str], rows: list[list[str]],
                marked: set[tuple[int, str]]) -> Table:
    table = Table(title=title, title_justify="left", expand=False, show_lines=False,
                  header_style="bold", min_width=len(title))
    for name in columns or [""]:
        table.add_column(visible(name), overflow="fold", max_width=30)
    for i, row in enumerate(rows):
        table.add_row(*[_marked(v) if (i, name) in marked else visible(v)
                        for v, name in zip(row, columns, strict=False)])
    return table


def reference_failure(record: ShadowRecord) -> str | None:
    """Why the reference failed, when it did and the primary answered."""
    evidence = record.evidence or {}
    error = evidence.get("reference_error")
    if record.status != "compared" or not isinstance(error, dict) or \
            evidence.get("primary_error"):
        return None
    return str(error.get("message") or error.get("kind") or "unknown error")


def latency_bars(record: ShadowRecord, width: int = 40) -> RenderableType:
    """Both latencies as bars, the ratio, and how far to trust it."""
    p, r = record.primary_ms, record.reference_ms
    if reference_failure(record) is not None:
        return Text("latency: none, the reference failed", style="dim")
    if p is None or r is None:
        return Text("latency: the reference did not finish", style="dim")
    top = max(p, r) or 1.0
    label = max(len(record.primary), len(record.reference))
    lines = Text()
    for name, ms, style in ((record.primary, p, "cyan"), (record.reference, r, "magenta")):
        bar = "█" * max(1, round(width * ms / top))
        lines.append(f"{name:<{label}}  ")
        lines.append(bar.ljust(width), style=style)
        lines.append(f"  {ms:,.1f} ms\n")
    ratio = record.ratio
    if ratio is not None:
        lines.append(f"{record.primary} took {ratio:.2f}x {record.reference}'s time", style="bold")
    lines.append("\nnoise: both ran at once on shared cores, so one ratio is a rough signal; "
                 "arrowgate bench measures speed by the project's method", style="dim")
    return lines


def verdict_renderable(record: ShadowRecord, position: str = "") -> RenderableType:
    """The whole panel for one record."""
    head = Text(position + " " if position else "", style="dim")
    if record.status == "pending":
        head.append(f"shadow {record.reference}: primary done, reference running…",
                    style="yellow")
        return head
    if record.status == "skipped":
        head.append(f"shadow {record.reference}: skipped (")
        head.append(visible(str(record.skip_reason)))
        head.append(")")
        head.stylize("yellow")
        return head
    failure = reference_failure(record)
    if failure is not None:
        head.append(f"✗ reference failed ({record.reference}): ", style="bold red")
        head.append(visible(failure))
        return Group(head, latency_bars(record))
    ok = record.category in ("match", "nondeterministic")
    unchecked = record.category == "order_unchecked"  # no divergence, no match either
    mark, style = ("✓ ", "green") if ok else ("? ", "yellow") if unchecked else ("✗ ", "bold red")
    head.append(mark, style=style)
    head.append(f"{record.category}", style="bold " + style if ok or unchecked else style)
    head.append(": ")
    head.append(visible(record.message))
    if record.answered_by:
        head.append(f"  [{record.primary} fell back to {record.answered_by}]", style="yellow")
    parts: list[RenderableType] = [head]
    view = side_by_side(record.evidence)
    if view.primary:
        grid = Table.grid(padding=(0, 2))
        grid.add_row(
            _side_table(f"primary: {record.primary}", view.columns, view.primary, view.marked),
            _side_table(f"reference: {record.reference}", view.columns, view.reference,
                        view.marked))
        parts.append(grid)
    parts.append(latency_bars(record))
    return Group(*parts)


class VerdictPanel(VerticalScroll, can_focus=True):
    """The verdicts of this tab's shadowed runs, latest shown first."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "older", "Older verdict"),
        Binding("right_square_bracket", "newer", "Newer verdict"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.records: list[ShadowRecord] = []
        self.index = -1
        #: what the panel shows now
        self.shown: RenderableType = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="verdict-body")

    @property
    def current(self) -> ShadowRecord | None:
        return self.records[self.index] if self.records else None

    def start(self, reference: str | None) -> None:
        """A statement starts: the panel forgets the last verdict and says the run is on
        (hidden when the run is not shadowed)."""
        self.index = len(self.records) - 1
        self.display = reference is not None
        self._show(Text(f"shadow {visible_plain(reference or '')}: running…", style="yellow"))

    def clear(self) -> None:
        """The statement failed or was cancelled before its answer was in."""
        self.display = False
        self._show("")

    def _show(self, renderable: RenderableType) -> None:
        self.shown = renderable
        self.query_one("#verdict-body", Static).update(renderable)

    def add(self, record: ShadowRecord) -> None:
        """Show a new run's record (pending or final)."""
        self.records.append(record)
        self.index = len(self.records) - 1
        self.refresh_record()

    def refresh_record(self) -> None:
        record = self.current
        if record is None:
            return
        position = f"run {self.index + 1}/{len(self.records)}" if len(self.records) > 1 else ""
        self._show(verdict_renderable(record, position))
        self.display = True

    def action_older(self) -> None:
        if self.index > 0:
            self.index -= 1
            self.refresh_record()

    def action_newer(self) -> None:
        if self.index < len(self.records) - 1:
            self.index += 1
            self.refresh_record()
