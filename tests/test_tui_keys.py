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
    from gateway.tui.keys_table import DOCS_END, DOCS_START, keys_markdown

    text = DOCS.read_text()
    table = text[text.index(DOCS_START) + len(DOCS_START):text.index(DOCS_END)].strip()
    assert table == keys_markdown(), "regenerate it: python -m gateway.tui.keys_table"


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
    from gateway.tui.keys_table import key_rows

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


async def _load_catalog(pilot, app) -> None:  # type: ignore[no-untyped-def]
    """Open the scan engine's schema and the trips table, so their names complete."""
    tree = app.query_one("#catalog")
    node = tree.root.children[0]
    for want in ("main", "trips", None):
        node.expand()
        for _ in range(500):
            await pilot.pause(0.02)
            if node.children and node.children[0].data is not None:
                break
        if want is not None:
            node = next(c for c in node.children if c.data is not None and
                        want in c.label.plain)


def test_a_table_name_is_where_from_or_join_puts_it():
    from gateway.tui.sql_text import wants_table

    assert wants_table("SELECT * FROM ")
    assert wants_table("SELECT * FROM trips JOIN ")
    assert wants_table("SELECT * FROM trips, ")
    assert not wants_table("SELECT ")
    assert not wants_table("SELECT * FROM trips WHERE ")


@pytest.mark.asyncio
async def test_completion_ranks_tables_above_columns_after_from():
    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        await _load_catalog(pilot, app)
        assert {"trips", "trip_id", "trip_distance"} <= set(app.completion_names())
        for sql, first in (("SELECT * FROM t", "trips"), ("SELECT t", "trip_distance")):
            tab.editor.text = sql
            tab.editor.focus()
            tab.editor.selection = ((0, len(sql)), (0, len(sql)))
            await pilot.pause()
            await pilot.press("r")
            for _ in range(100):
                await pilot.pause(0.02)
                if tab.editor.completion_list.option_count:
                    break
            shown = [str(tab.editor.completion_list.get_option_at_index(i).prompt)
                     for i in range(3)]
            assert shown[0].startswith(first), (sql, shown)
            await pilot.press("escape")
