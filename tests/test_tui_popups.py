"""The console's popups and pickers through the pilot (issue 38): the SQL editor has the
focus back once each one closes, the export dialog fits a narrow terminal, and a hint names
the configured engine, not its type."""

from __future__ import annotations

import pytest

from tests.tui_support import make_app, quickstart_config, run_sql, screen_text

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _in_editor(app, tab) -> bool:
    """The focus is in the tab's SQL editor (its text area)."""
    return app.focused is not None and tab.editor in app.focused.ancestors_with_self


async def _from_the_grid(pilot, app) -> None:
    """Focus the answer's grid (f7), so that going back to what had the focus is not enough."""
    await pilot.press("f7")
    await pilot.pause()
    assert app.focused is app.active_tab.grid.table


@pytest.mark.parametrize("key", ["f1", "f8", "ctrl+e"])
async def test_the_editor_has_the_focus_back_when_a_popup_closes(key):
    app = make_app(quickstart_config(), persist=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT cab_type, count(*) AS n FROM trips GROUP BY 1")
        await _from_the_grid(pilot, app)
        await pilot.press(key)  # help, history, export
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert _in_editor(app, tab)


async def test_the_editor_has_the_focus_back_after_an_export_and_a_history_rerun(tmp_path):
    app = make_app(quickstart_config(), persist=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT 1 AS one")
        await _from_the_grid(pilot, app)
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*str(tmp_path / "one.csv"), "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (tmp_path / "one.csv").read_text().splitlines() == ["one", "1"]
        assert _in_editor(app, tab)
        await _from_the_grid(pilot, app)
        await pilot.press("f8")
        await pilot.pause()
        await pilot.press("enter")  # re-run the statement picked
        await pilot.pause()
        await pilot.pause()
        assert _in_editor(app, tab), (app.focused, app.screen)


@pytest.mark.parametrize("select", ["engine", "reference"])
@pytest.mark.parametrize("how", ["pick", "escape"])
async def test_the_editor_has_the_focus_back_when_a_picker_closes(select, how):
    app = make_app(quickstart_config(), persist=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await pilot.pause()
        if select == "engine":
            await pilot.press("ctrl+t")  # opens the engine picker
        else:
            await pilot.click(f"#{select}")  # the shadow picker, as a mouse opens it
        await pilot.pause()
        assert not _in_editor(app, tab)
        if how == "pick":  # duck: the second engine, or (for the reference) after (none), scan
            await pilot.press(*["down"] * (1 if select == "engine" else 2), "enter")
        else:
            await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert _in_editor(app, tab)
        picked = (tab.picker.engine, tab.picker.reference)
        if how == "escape":
            assert picked == ("scan", None)
        else:
            assert picked == (("duck", None) if select == "engine" else ("scan", "duck"))


async def test_the_export_dialog_shows_its_whole_prompt_on_a_narrow_terminal():
    # 70 columns wide, it was cut on a terminal of 60: "...picks the forma", ".ndj"
    app = make_app(quickstart_config(), persist=False)
    async with app.run_test(size=(56, 24)) as pilot:
        await run_sql(pilot, app.active_tab, "SELECT 1 AS one")
        await pilot.press("ctrl+e")
        await pilot.pause()
        dialog = app.screen.query_one("#export")
        assert dialog.region.x >= 0 and dialog.region.right <= app.size.width
        shown = screen_text(app)
        for word in ("extension", "picks", "format:", ".parquet", ".jsonl", "'clipboard'",
                     "(CSV)"):
            assert word in shown, (word, shown)


async def test_a_refusal_names_the_configured_engine_that_can_run_it_not_its_type():
    config = quickstart_config()
    del config["engines"]["scan"]["fallback"]
    app = make_app(config, persist=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT count(*) AS n FROM trips JOIN zones "
                                  "ON trips.pickup_zone = zones.zone")
        shown = str(tab.grid.query_one(".error").render())
        assert "hint: engines that can run it: duck" in shown, shown
        assert "duckdb" not in shown, shown
