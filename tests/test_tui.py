"""The console through Textual's pilot, against real engines (DuckDB and the csv scanner)."""

from __future__ import annotations

import pytest
from textual.coordinate import Coordinate

from tests.tui_support import (
    divergent_config,
    make_app,
    plain,
    quickstart_config,
    settle,
    styled,
    type_sql,
)

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    """Buffers, history and shadow records go to this test's folder."""
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


async def test_typed_query_runs_and_fills_the_grid():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.editor.focus()
        await pilot.press(*"SELECT count(*) AS n FROM trips")
        await pilot.press("escape")  # close the completion list, if one is open
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        grid = tab.grid.table
        assert grid is not None
        assert grid.row_count == 1
        assert grid.get_cell_at(Coordinate(0, 0)) == 400
        assert "1 row" in str(tab.status.render())
        assert "scan" in str(tab.status.render())


async def test_the_statement_under_the_cursor_runs_alone():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await type_sql(pilot, tab, "SELECT 1 AS a;\nSELECT 2 AS b, 3 AS c;\nSELECT 4 AS d")
        tab.editor.selection = ((1, 3), (1, 3))
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        assert tab.answer.table.to_pylist() == [{"b": 2, "c": 3}]
        await pilot.press("ctrl+shift+enter")
        await settle(pilot, tab)
        assert tab.answer.table.to_pylist() == [{"d": 4}]


async def test_a_fallback_shows_in_the_status_bar():
    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        await type_sql(pilot, tab, "SELECT count(*) AS n FROM trips JOIN zones "
                                   "ON trips.pickup_zone = zones.zone")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        status = str(tab.status.render())
        assert "duck (fallback from scan" in status, status


async def test_an_error_shows_inline_with_the_engine_and_the_app_goes_on():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await type_sql(pilot, tab, "SELECT * FROM no_such_table")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        shown = str(tab.grid.query_one(".error").render())
        assert "query error on duck" in shown and "no_such_table" in shown
        await type_sql(pilot, tab, "SELECT '[bold]not markup[/' AS x")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        assert tab.grid.table.get_cell_at(Coordinate(0, 0)) == "[bold]not markup[/"


async def test_shadow_on_a_planted_divergence_shows_the_verdict_and_marks_cells():
    from gateway.tui.components.verdict_panel import MARK, side_by_side

    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        await type_sql(pilot, tab, "SELECT i, i / 2 AS half FROM range(4) t(i) ORDER BY i")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        # the primary's answer is in the grid
        assert tab.grid.table.row_count == 4
        assert tab.grid.table.get_cell_at(Coordinate(1, 1)) == 0.5
        record = tab.verdicts.current
        assert record is not None and record.status == "compared"
        assert record.category == "values", record.message
        assert tab.verdicts.display
        text = plain(tab.verdicts.shown)
        assert "✗ values" in text
        assert "new took" in text and "x old's time" in text
        view = side_by_side(record.evidence)
        assert view.columns[:2] == ["i", "half"]
        row = view.primary.index(["1", "0.5"])
        assert view.reference[row] == ["1", "0.0"]
        assert (row, "half") in view.marked and (row, "i") not in view.marked
        # both sides show the differing cells marked: 0.5 and 1.5 against 0.0 and 1.0
        marked = styled(tab.verdicts.shown, MARK)
        assert {"0.5", "1.5", "0.0", "1.0"} <= set(marked), marked


async def test_shadow_match_and_earlier_verdicts_stay_browsable():
    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        for sql in ("SELECT 7 AS seven", "SELECT 1 / 2 AS half"):
            await type_sql(pilot, tab, sql)
            await pilot.press("ctrl+enter")
            await settle(pilot, tab)
        panel = tab.verdicts
        assert [r.category for r in panel.records] == ["match", "values"]
        panel.focus()
        await pilot.press("left_square_bracket")
        assert panel.current.category == "match"
        assert "run 1/2" in plain(panel.shown)
        await pilot.press("right_square_bracket")
        assert panel.current.category == "values"
