"""The results grid: types in the header, copying cells and ranges, fitting a column, and
focus that stays in the grid when its answer is replaced (the pilot, real engines)."""

from __future__ import annotations

import pytest
from textual.coordinate import Coordinate

from tests.tui_support import (
    divergent_config,
    make_app,
    quickstart_config,
    run_sql,
    screen_text,
    settle,
    type_sql,
)

pytestmark = pytest.mark.asyncio

TYPED = ("SELECT 1 AS n, 1.5 AS x, 'a' AS s, DATE '2024-01-02' AS d, [1, 2] AS l, "
         "MAP {'k': 1} AS m, {'a': 1} AS st, true AS b, TIMESTAMP '2024-01-02 03:04' AS ts")


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


async def test_the_header_shows_each_columns_type_compactly():
    app = make_app(quickstart_config())
    async with app.run_test(size=(200, 30)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, TYPED)
        labels = [c.label.plain for c in tab.grid.table.ordered_columns]
        assert labels == ["n #", "x #.00", "s s", "d d", "l []", "m {k:v}", "st {}", "b t/f",
                          "ts ts"], labels
        assert "m{k:v}" in "".join(screen_text(app).split())


async def test_ctrl_c_copies_the_cell_or_the_range_and_y_does_in_vim_mode():
    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, "SELECT i, 'v' || i AS v, NULL AS z FROM range(5) t(i)")
        grid = tab.grid.table
        grid.focus()
        await pilot.press("down", "right")
        await pilot.press("ctrl+c")
        assert app.clipboard == "v1"
        await pilot.press("shift+down", "shift+right")
        await pilot.press("ctrl+c")
        assert app.clipboard == "v1\t\nv2\t"
        await pilot.press("shift+left", "shift+left")
        await pilot.press("ctrl+c")
        assert app.clipboard == "1\tv1\n2\tv2"
        # y is an ordinary key with vim keys off, and copies with them on
        await pilot.press("left")
        app.copy_to_clipboard("")
        await pilot.press("y")
        assert app.clipboard == ""
        await pilot.press("f9")
        await pilot.press("y")
        assert app.clipboard == "2"


async def test_equals_fits_the_column_to_its_widest_value_and_back():
    from gateway.tui.components.results_grid import MAX_CELL_WIDTH

    app = make_app(quickstart_config())
    async with app.run_test(size=(200, 30)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, "SELECT 1 AS a, repeat('w', 120) AS long_text")
        grid = tab.grid.table
        grid.focus()
        await pilot.press("right")
        column = grid.ordered_columns[1]
        assert column.render_width <= MAX_CELL_WIDTH + 2
        await pilot.press("equals_sign")
        await pilot.pause()
        assert grid.ordered_columns[1].render_width >= 120
        assert "w" * 120 in screen_text(app)
        await pilot.press("equals_sign")
        await pilot.pause()
        assert grid.ordered_columns[1].render_width <= MAX_CELL_WIDTH + 2


@pytest.mark.slow
async def test_focus_stays_in_the_grid_when_the_answer_is_replaced(monkeypatch):
    from gateway.tui import console
    from gateway.tui.components.cell_viewer import CellViewer

    monkeypatch.setattr(console, "FIRST_ROWS_WAIT", 0.05)
    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        sql = "SELECT i, md5(repeat('x', 1000) || i) AS h, 1 / 2 AS half FROM range(600000) t(i)"
        await type_sql(pilot, tab, sql)
        await pilot.press("ctrl+enter")
        for _ in range(3000):  # the first rows are in: the user moves to the grid
            await pilot.pause(0.01)
            if tab.grid.table is not None:
                break
        tab.grid.table.focus()
        await pilot.press("down")
        await settle(pilot, tab, timeout=300)
        assert tab.answer.complete
        assert app.focused is tab.grid.table  # the whole answer replaced the grid
        assert tab.grid.table.cursor_coordinate == Coordinate(1, 0)
        # the reference's answer replaces it again (too large to have been kept beside
        # the grid, it is run again for the purpose)
        await pilot.press("ctrl+r")
        for _ in range(3000):
            await pilot.pause(0.01)
            if tab.showing_reference:
                break
        assert tab.showing_reference and app.focused is tab.grid.table
        await pilot.press("enter")  # the cell viewer, never a newline in the SQL
        await pilot.pause()
        assert isinstance(app.screen, CellViewer)
        await pilot.press("escape")
        assert tab.editor.text == sql


async def test_a_small_terminal_collapses_the_catalog_and_puts_the_results_beside_the_sql():
    app = make_app(quickstart_config())
    async with app.run_test(size=(40, 12)) as pilot:
        tab = app.active_tab
        catalog = app.query_one("#catalog")
        assert not catalog.display
        await run_sql(pilot, tab, "SELECT cab_type, count(*) AS n FROM trips GROUP BY 1 "
                                  "ORDER BY n DESC")
        editor, results = tab.editor.region, tab.grid.region
        assert editor.y == results.y and results.x >= editor.right - 1, (editor, results)
        assert results.height >= 4 and editor.width >= 15
        assert "yellow" in screen_text(app)  # the answer's rows are on the screen
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert catalog.display
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        editor, results = tab.editor.region, tab.grid.region
        assert results.y >= editor.bottom  # tall again: the results under the SQL
        await pilot.resize_terminal(60, 40)
        await pilot.pause()
        assert not catalog.display  # narrow again: collapsed
