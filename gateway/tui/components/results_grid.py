"""The answer as a grid: textual-fastdatatable over the Arrow table, paged lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container
from textual.widgets import Static
from textual_fastdatatable import ArrowBackend, DataTable

if TYPE_CHECKING:
    import pyarrow as pa

#: Cells wider than this are cut in the grid; the cell viewer shows them whole.
MAX_CELL_WIDTH = 50


def prepare_backend(table: pa.Table) -> ArrowBackend:
    """The grid's backend, with column widths measured (slow on big answers: call it in a worker).

    Values are shown as text, never as markup, so what a query returns cannot restyle
    or break the grid.
    """
    backend = ArrowBackend(table)
    backend.render_markup = False
    backend.column_content_widths  # noqa: B018 - measured here, off the event loop
    return backend


class ResultsGrid(Container):
    """Holds one DataTable at a time; a new answer replaces it."""

    def compose(self) -> ComposeResult:
        yield Static("Run a statement (ctrl+enter) to see its answer here.", classes="placeholder")

    @property
    def table(self) -> DataTable | None:
        found = self.query(DataTable)
        return found.first() if found else None

    async def show(self, backend: ArrowBackend) -> DataTable:
        """Replace what the grid shows by ``backend``'s rows."""
        grid = DataTable(backend=backend, max_column_content_width=MAX_CELL_WIDTH,
                         render_markup=False, null_rep="[dim]∅[/]", cursor_type="cell")
        await self.remove_children()
        await self.mount(grid)
        return grid

    async def show_error(self, text: Text) -> None:
        """An error in place of the answer."""
        await self.remove_children()
        await self.mount(Static(text, classes="error"))
