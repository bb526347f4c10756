"""A shadowed million-row answer in the console (the pilot, real DuckDB engines): the grid
first, then the reference streamed through the core's comparison, with the core's verdict."""

from __future__ import annotations

import re

import pytest
from textual.coordinate import Coordinate

import gateway
from tests.hang_guard import HANG_GUARD
from tests.tui_support import divergent_config, make_app, settle, type_sql

pytestmark = pytest.mark.asyncio

ROWS = 1_000_000
#: ``/`` divides integers on ``old`` only (divergent_config): ``half`` differs, ``doubled`` not
QUERIES = {
    "match": f"SELECT i, i * 2 AS doubled, 'row ' || i AS label FROM range({ROWS}) t(i) "
             "ORDER BY i",
    "values": f"SELECT i, i / 2 AS half, 'row ' || i AS label FROM range({ROWS}) t(i) "
              "ORDER BY i",
}


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


class _GridWhenStarted:
    """The rows the grid held when each statement started, by engine."""

    def __init__(self) -> None:
        self.tab = None
        self.rows: list[tuple[str, int]] = []

    @gateway.hookimpl
    def arrowgate_query_started(self, event):
        grid = None if self.tab is None else self.tab.grid.table
        self.rows.append((event.engine, 0 if grid is None else grid.row_count))


def counted(message: str) -> str:
    """A verdict's message up to its first qualification: the count of rows."""
    return re.split(r"[,;(]", message, maxsplit=1)[0].strip()


def core_verdict(sql: str):  # type: ignore[no-untyped-def]
    """The core's own shadow of ``sql`` (both answers held: under its default budget)."""
    with gateway.connect(divergent_config()) as gw:
        result = gw.execute(sql, engine="new", shadow="old")
        result.to_arrow()
        assert result.shadow.wait(120)
        return result.shadow


@pytest.mark.slow
@pytest.mark.parametrize("expected", sorted(QUERIES))
async def test_a_shadowed_million_rows_get_the_cores_verdict_with_the_reference_never_held(
        expected):
    from gateway.core import Gateway
    from gateway.tui.app import ArrowgateApp
    from gateway.tui.console import SHADOW_MEMORY_BYTES, ConsoleCore, reference_answer

    sql = QUERIES[expected]
    core = core_verdict(sql)
    assert core.category == expected, core.message

    spy = _GridWhenStarted()
    app = ArrowgateApp(ConsoleCore(Gateway(divergent_config(), plugins=[spy])))
    async with app.run_test(size=(160, 50)) as pilot:
        tab = spy.tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        await type_sql(pilot, tab, sql)
        await pilot.press("ctrl+enter")
        await settle(pilot, tab, timeout=300)
        record = tab.verdicts.current
        assert tab.grid.table.row_count == ROWS
        if expected == "values":
            # ctrl+r: the reference's answer, not kept, is run again to be shown
            tab.grid.table.focus()
            await pilot.press("ctrl+r")
            for _ in range(6000):
                await pilot.pause(0.01)
                if tab.showing_reference:
                    break
            assert tab.showing_reference and tab.grid.table.row_count == ROWS
            assert tab.grid.table.get_cell_at(Coordinate(3, 1)) == 1  # 3 / 2 on old
            assert "run again" in str(tab.status.render())
            await pilot.press("ctrl+r")
            await settle(pilot, tab)
            assert not tab.showing_reference
            assert tab.grid.table.get_cell_at(Coordinate(3, 1)) == 1.5
    assert record.status == "compared"
    assert (record.category, record.primary_rows, record.reference_rows) == \
        (core.category, ROWS, ROWS)
    # the same count ("1000000 rows agree", "500000 of 1000000 rows differ"); the streamed
    # comparison may pick other differing rows as examples, each a true difference
    assert counted(record.message) == counted(core.message), (record.message, core.message)
    for diff in record.evidence.get("differences") or []:
        assert diff["column"] == "half" and diff["primary"] == diff["reference"] + 0.5, diff
    # the reference started only once the grid held the primary's whole answer (then
    # again for ctrl+r) ...
    assert spy.rows[:2] == [("new", 0), ("old", ROWS)], spy.rows
    # ... and went through the streaming comparison: never held whole beside the grid
    assert record.evidence["compared"] == "streamed"
    assert record.evidence["held_peak_bytes"] <= SHADOW_MEMORY_BYTES
    assert reference_answer(record) is None


async def test_closing_a_tab_before_its_reference_started_ends_the_record():
    """The answer is in, the grid never showed it (the tab closed, the app quit): the
    reference never starts, and the record ends skipped instead of waiting for it."""
    from gateway.core import Gateway
    from gateway.tui.console import ConsoleCore

    core = ConsoleCore(Gateway(divergent_config()))
    session = core.session("new")
    try:
        answer = session.run("SELECT 42 AS x", "old")
        record = answer.shadow
        assert answer.table.to_pylist() == [{"x": 42}] and record.status == "pending"
        session.close()
        assert record.wait(HANG_GUARD)
        assert record.status == "skipped"
    finally:
        core.close()


async def test_a_shadowing_console_imports_the_shadow_machinery_before_the_first_run(tmp_path):
    """The first shadowed statement waited for the shadow modules and sqlglot's parse of
    its kind before its primary started (about 0.1 s, on the grid's time)."""
    from tests.tui_support import imported_while_idle

    assert imported_while_idle(tmp_path, 'make_app(divergent_config(), reference="old", '
                               'persist=False)', ("gateway.shadow.run", "gateway.sql.kinds"))


async def test_the_configurations_shadow_reference_is_the_tabs():
    config = divergent_config() | {"shadow": {"reference": "old"}}
    app = make_app(config)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.active_tab.picker.reference == "old"
    # --engine and --reference still win
    app = make_app(config, engine="old", reference="new")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.active_tab.picker.reference == "new"


async def test_an_engine_cannot_shadow_itself():
    app = make_app(divergent_config(), reference="old")
    async with app.run_test(size=(140, 40)) as pilot:
        picker = app.active_tab.picker
        picker.pick(engine="old")  # the reference picked as the engine
        await pilot.pause()
        await pilot.pause()
        assert picker.engine == "old" and picker.reference is None
        picker.pick(reference="old")  # the engine picked as the reference
        await pilot.pause()
        await pilot.pause()
        assert picker.reference is None
        picker.pick(reference="new")
        await pilot.pause()
        assert picker.reference == "new"
