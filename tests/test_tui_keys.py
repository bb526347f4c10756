"""Every key is discoverable: the help screen and docs/tui.md list every binding the
footer shows (both made from the bindings), and the engine picker has a key of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui_support import make_app, quickstart_config, run_sql

DOCS = Path(__file__).resolve().parents[1] / "docs" / "tui.md"


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def test_the_docs_keys_table_is_the_one_the_bindings_make():
    from gateway.tui.keys import DOCS_END, DOCS_START, keys_markdown

    text = DOCS.read_text()
    table = text[text.index(DOCS_START) + len(DOCS_START):text.index(DOCS_END)].strip()
    assert table == keys_markdown(), "regenerate it: python -m gateway.tui.keys"


def _help_keys(rows: list[tuple[str, str, str]]) -> set[str]:
    return {key for _, keys, _ in rows for key in keys.split(" / ")}


@pytest.mark.asyncio
async def test_the_help_screen_lists_every_key_the_footer_shows_wherever_the_focus_is():
    from textual.keys import key_to_character

    from gateway.tui.components.help_screen import HelpScreen

    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT 1 AS one")
        tab.verdicts.display = True
        footer: dict[str, str] = {}
        for widget in (tab.editor.area, tab.grid.table, app.query_one("#catalog"),
                       tab.verdicts):
            widget.focus()
            await pilot.pause()
            for key, active in app.screen.active_bindings.items():
                if active.binding.show:
                    footer[key] = active.binding.description
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = _help_keys(app.screen.rows)
    assert {"ctrl+s", "ctrl+o", "f3", "ctrl+enter", "ctrl+t"} <= set(footer)
    missing = {key: does for key, does in footer.items()
               if key not in listed and (key_to_character(key) or key) not in listed}
    assert not missing, f"footer keys the help screen does not list: {missing}"


def test_the_help_screen_files_grid_keys_under_grid():
    from gateway.tui.keys import key_rows

    where = {keys: place for place, keys, _ in key_rows()}
    assert where["enter"] == "grid" and where["="] == "grid" and where["["] == "verdict"
    assert where["ctrl+t"] == "app"


@pytest.mark.asyncio
async def test_ctrl_t_and_the_palette_open_the_engine_picker():
    from textual.widgets import Select

    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        select = tab.picker.query_one("#engine", Select)
        tab.editor.focus()
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert select.expanded and select.has_focus_within
        await pilot.press("escape")
        tab.editor.focus()
        await pilot.pause()
        assert not select.expanded
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Pick engine" in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Pick engine")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert select.expanded
