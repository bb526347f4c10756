"""The answer as a grid: textual-fastdatatable over the Arrow table, paged lazily.

What the grid shows is safe: values are text, never markup, and a control character
shows as a dimmed escape (gateway.tui.visible). What it copies is the true value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.coordinate import Coordinate
from textual.widgets import Static
from textual_fastdatatable import ArrowBackend, DataTable

from gateway.tui.visible import CONTROLS, has_controls, visible, visible_plain

if TYPE_CHECKING:
    import pyarrow as pa

#: Cells wider than this are cut in the grid (until the column is fitted: ``=``); the
#: cell viewer shows them whole.
MAX_CELL_WIDTH = 50
#: rows searched for control characters when the columns' widths are measured
ESCAPE_SCAN_ROWS = 50_000


def shown(value: Any) -> Any:
    """A cell's value as the grid shows it: a string with control characters becomes
    text with visible escapes (a line break stays one: the grid marks it)."""
    if isinstance(value, str) and has_controls(value):
        return visible(value, keep="\n")
    return value


def type_label(dtype: pa.DataType) -> str:
    """A compact name of an Arrow type for the grid's header (Harlequin-like)."""
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(dtype):
        return "t/f"
    if t.is_integer(dtype):
        return "#"
    if t.is_floating(dtype):
        return "#.#"
    if t.is_decimal(dtype):
        return "#.00"
    if t.is_string(dtype) or t.is_large_string(dtype) or t.is_string_view(dtype):
        return "s"
    if t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_fixed_size_binary(dtype):
        return "0b"
    if t.is_timestamp(dtype):
        return "ts" + ("tz" if dtype.tz else "")
    if t.is_date(dtype):
        return "d"
    if t.is_time(dtype):
        return "t"
    if t.is_duration(dtype) or t.is_interval(dtype):
        return "|-|"
    if t.is_map(dtype):
        return "{k:v}"
    if t.is_struct(dtype):
        return "{}"
    if t.is_list(dtype) or t.is_large_list(dtype) or t.is_fixed_size_list(dtype) \
            or t.is_list_view(dtype):
        return "[]"
    if t.is_null(dtype):
        return "∅"
    if isinstance(dtype, pa.BaseExtensionType):
        return type_label(dtype.storage_type)
    return str(dtype)


def header_labels(schema: pa.Schema) -> list[str | Text]:
    """``name #`` for each column: the name (escaped) and its compact type, dimmed."""
    return [visible(field.name) + Text(f" {type_label(field.type)}", style="dim")
            for field in schema]


class ShownBackend(ArrowBackend):
    """The Arrow backend, handing the grid cells as :func:`shown` makes them; the true
    values stay in the table (:meth:`true_cell`)."""

    def get_row_at(self, index: int) -> Sequence[Any]:
        return [shown(v) for v in super().get_row_at(index)]

    def get_cell_at(self, row_index: int, column_index: int) -> Any:
        return shown(super().get_cell_at(row_index, column_index))

    def get_column_at(self, column_index: int) -> list[Any]:
        return [shown(v) for v in super().get_column_at(column_index)]

    def true_cell(self, row_index: int, column_index: int) -> Any:
        """The value as the engine returned it."""
        return super().get_cell_at(row_index, column_index)

    @property
    def column_content_widths(self) -> list[int]:
        """Measured as shown: an escape is wider than the character it stands for.

        Only the first :data:`ESCAPE_SCAN_ROWS` rows are searched for control
        characters: the regex over every row cost 31 ms per 1M-row string column,
        which made a wide answer's grid 60% slower to appear. A cell further down
        that holds escapes may be cut at its column's width; its text is escaped
        all the same (:func:`shown`).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self._column_content_widths:
            widths = list(super().column_content_widths)
            for i, column in enumerate(self.data.columns):
                if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                    continue
                column = column.slice(0, ESCAPE_SCAN_ROWS)
                hits = pc.match_substring_regex(column, CONTROLS.pattern)
                if not pc.any(hits).as_py():
                    continue
                for value in column.filter(hits).to_pylist():
                    first = value.split("\n", 1)[0]
                    widths[i] = max(widths[i], len(visible_plain(first)))
            self._column_content_widths = widths
        return self._column_content_widths


def prepare_backend(table: pa.Table) -> ShownBackend:
    """The grid's backend, with column widths measured (slow on big answers: call it in a worker).

    Values are shown as text, never as markup, so what a query returns cannot restyle
    or break the grid.
    """
    backend = ShownBackend(table)
    backend.render_markup = False
    backend.column_content_widths  # noqa: B018 - measured here, off the event loop
    return backend


def as_tsv(rows: list[list[Any]]) -> str:
    """Cells as tab-separated lines, the true values (NULL as an empty cell)."""
    return "\n".join("\t".join("" if v is None else str(v) for v in row) for row in rows)


class ResultsTable(DataTable):
    """The grid: copies cells and ranges, and fits a column to its widest value."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "view_cell", "Cell viewer", show=False,
                tooltip="the whole value: long text wrapped, JSON indented"),
        Binding("ctrl+c", "copy_cells", "Copy cells", show=False,
                tooltip="the cell, or the range shift+arrows selected"),
        Binding("y", "yank_cells", "Copy cells (vim keys)", show=False),
        Binding("equals_sign", "fit_column", "Fit column", show=False,
                tooltip="the column under the cursor as wide as its widest value, and back"),
    ]

    def __init__(self, backend: ShownBackend) -> None:
        super().__init__(backend=backend, max_column_content_width=MAX_CELL_WIDTH,
                         render_markup=False, null_rep="[dim]∅[/]", cursor_type="range",
                         column_labels=header_labels(backend.data.schema))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "yank_cells":  # y is vim's: with vim keys off it is an ordinary key
            return bool(getattr(self.app, "vim", False))
        return True

    def selected_cells(self) -> list[list[Any]]:
        """The true values of the selected range, or of the cell under the cursor."""
        backend = self.backend
        assert isinstance(backend, ShownBackend)
        if self.row_count == 0:
            return []
        cursor = self.cursor_coordinate
        anchor = self.selection_anchor_coordinate or cursor
        rows = range(min(cursor.row, anchor.row), max(cursor.row, anchor.row) + 1)
        columns = range(min(cursor.column, anchor.column), max(cursor.column, anchor.column) + 1)
        return [[backend.true_cell(r, c) for c in columns] for r in rows]

    def action_copy_cells(self) -> None:
        cells = self.selected_cells()
        if not cells:
            return
        self.app.copy_to_clipboard(as_tsv(cells))
        count = len(cells) * len(cells[0])
        self.notify("1 cell copied" if count == 1 else
                    f"{len(cells)} x {len(cells[0])} cells copied (tab-separated)")

    def action_view_cell(self) -> None:
        """Asks for the cell viewer (the range cursor posts no CellSelected of its own)."""
        if self.row_count:
            cursor = self.cursor_coordinate
            self.post_message(DataTable.CellSelected(self, self.get_cell_at(cursor),
                                                     coordinate=cursor))

    def action_yank_cells(self) -> None:
        self.action_copy_cells()

    def action_fit_column(self) -> None:
        if self.row_count == 0 and not self.ordered_columns:
            return
        column = self.ordered_columns[self.cursor_column]
        column.max_content_width = None if column.max_content_width is not None else \
            MAX_CELL_WIDTH
        self._update_count += 1
        self._require_update_dimensions = True
        self.refresh()

    def true_value(self, coordinate: Coordinate) -> Any:
        backend = self.backend
        assert isinstance(backend, ShownBackend)
        return backend.true_cell(coordinate.row, coordinate.column)


class ResultsGrid(Container):
    """Holds one grid at a time; a new answer replaces it, focus staying where it was."""

    def compose(self) -> ComposeResult:
        yield Static("Run a statement (ctrl+enter) to see its answer here.", classes="placeholder")

    @property
    def table(self) -> ResultsTable | None:
        found = self.query(ResultsTable)
        return found.first() if found else None

    def _had_focus(self) -> bool:
        focused = self.screen.focused if self.is_attached else None
        return focused is not None and self in focused.ancestors_with_self

    async def show(self, backend: ShownBackend) -> ResultsTable:
        """Replace what the grid shows by ``backend``'s rows; a grid that had the focus
        hands it to the new one (with the cursor on the same cell when it is there)."""
        old = self.table
        focus = self._had_focus()
        cursor = old.cursor_coordinate if old is not None else None
        grid = ResultsTable(backend)
        with self.app.batch_update():
            await self.remove_children()
            if not self.is_attached:  # the app closed meanwhile (quit while running)
                return grid
            await self.mount(grid)
            if focus:
                grid.focus(scroll_visible=False)
        if cursor is not None and grid.is_valid_coordinate(cursor):
            grid.cursor_coordinate = cursor
        return grid

    async def show_error(self, text: Text) -> None:
        """An error in place of the answer."""
        await self.remove_children()
        if self.is_attached:  # else the app closed meanwhile (quit while running)
            await self.mount(Static(text, classes="error"))


def error_text(message: str) -> Text:
    """An error's message as shown: escapes for control characters, line breaks kept."""
    return visible(message, keep="\n")
