"""``arrowgate tui --headless -c SQL``: the console's own logic, run without a screen.

The app runs under Textual's headless driver; the statement goes through a tab as if
typed and run, and the panels it ends with (answer, status, verdict and latencies)
are printed as text.
"""

from __future__ import annotations

import asyncio
import sys

from rich.console import Console as RichConsole
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from gateway.tui.app import ArrowgateApp
from gateway.tui.components.query_tab import QueryTab
from gateway.tui.components.status_bar import describe
from gateway.tui.components.verdict_panel import verdict_renderable
from gateway.tui.console import ConsoleAnswer, ConsoleCore
from gateway.tui.visible import visible, visible_plain

#: Rows of the answer printed.
SHOWN_ROWS = 40


def answer_table(answer: ConsoleAnswer, rows: int = SHOWN_ROWS) -> Table:
    table = Table(show_edge=True, header_style="bold")
    for field in answer.table.schema:
        table.add_column(visible(f"{field.name}\n{field.type}", keep="\n"))
    for row in answer.table.slice(0, rows).to_pylist():
        table.add_row(*[Text("NULL") if v is None else visible(str(v), keep="\n")
                        for v in row.values()])
    return table


async def panels(app: ArrowgateApp, sql: str, timeout: float = 3600) -> tuple[list[RenderableType], bool]:
    """Run ``sql`` in the app's active tab: the rendered panels, and False when the
    statement failed or the reference's answer differs."""
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        assert isinstance(tab, QueryTab)
        tab.editor.text = sql
        await pilot.pause()
        tab.action_run_all()
        await pilot.pause()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while tab.running and loop.time() < deadline:
            await asyncio.sleep(0.02)
        await pilot.pause()
        out: list[RenderableType] = []
        answer = tab.answer
        error = tab.grid.query(".error")
        if error:
            out.append(error.first().render())  # type: ignore[arg-type]
            return out, False
        if answer is not None:
            out.append(answer_table(answer))
            if answer.table.num_rows > SHOWN_ROWS:
                out.append(Text(f"{SHOWN_ROWS} of {answer.table.num_rows:,} rows shown",
                                style="dim"))
            out.append(Text(visible_plain(describe(answer))))
            if answer.shadow is not None:
                out.append(verdict_renderable(answer.shadow))
                return out, not answer.shadow.diverged
        return out, True


def run_headless(core: ConsoleCore, sql: str, *, engine: str | None, reference: str | None,
                 width: int = 120) -> bool:
    """Print the panels of ``sql``'s run; False when it failed or diverged."""
    app = ArrowgateApp(core, engine=engine, reference=reference, persist=False)
    rendered, ok = asyncio.run(panels(app, sql))
    printer = RichConsole(file=sys.stdout, width=width, force_terminal=False, no_color=True)
    for panel in rendered:
        printer.print(panel)
    return ok
