"""A run's state as the console shows it: quitting while one runs, the verdict panel's
states, and exports taken while an answer streams (the pilot, real engines)."""

from __future__ import annotations

import time

import pytest

from tests.tui_support import divergent_config, make_app, plain, quickstart_config, settle, type_sql

pytestmark = pytest.mark.asyncio

#: a statement that runs for minutes on DuckDB unless cancelled
ENDLESS = "SELECT count(*) FROM range(10000000000000) a"


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


async def test_ctrl_q_while_a_statement_runs_cancels_it_and_exits_cleanly():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await type_sql(pilot, tab, ENDLESS)
        await pilot.press("ctrl+enter")
        await pilot.pause(0.5)
        assert tab.running
        started = time.monotonic()
        await pilot.press("ctrl+q")
        for _ in range(300):
            if app.return_code is not None:
                break
            await pilot.pause(0.02)
        quit_took = time.monotonic() - started
        assert app.return_code == 0
        assert not app.core.gw.running()
    # cancelled at once, and at most QUIT_WAIT (2 s) waited for it; a loaded machine's slack
    assert quit_took < 3.0, quit_took


async def test_the_verdict_panel_shows_this_runs_state_not_the_last_verdict(monkeypatch):
    from gateway.tui import console
    from gateway.tui.messages import ResultsFetched

    monkeypatch.setattr(console, "FIRST_ROWS_WAIT", 0.05)
    app = make_app(divergent_config())
    streaming: list[str] = []  # what the panel showed when the first rows came in

    def hook(message: object) -> None:
        if isinstance(message, ResultsFetched) and not message.answer.complete:
            streaming.append(plain(app.active_tab.verdicts.shown))

    async with app.run_test(size=(160, 50), message_hook=hook) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        await type_sql(pilot, tab, "SELECT 7 AS seven")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        assert "✓ match" in plain(tab.verdicts.shown)
        # md5 of a long string per row: the primary streams for a while
        await type_sql(pilot, tab, "SELECT i, md5(repeat('x', 1000) || i) AS h "
                                   "FROM range(600000) t(i)")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab, timeout=300)
        assert streaming, "the answer did not stream"
        assert "shadow old: running" in streaming[0] and "match" not in streaming[0], streaming
        assert "✓ match" in plain(tab.verdicts.shown)
        # a failing statement clears the panel: no verdict of an earlier run stays
        await type_sql(pilot, tab, "SELECT * FROM no_such_table")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        assert tab.grid.query(".error")
        assert not tab.verdicts.display
        assert "match" not in plain(tab.verdicts.shown)


async def test_a_failed_reference_says_why_and_draws_no_latency_bar():
    from tests.tui_support import DATA

    app = make_app({"default_engine": "duck",
                    "engines": {"scan": {"type": "csv"}, "duck": {"type": "duckdb"}},
                    "sources": {"trips": {"path": str(DATA / "trips.csv")}}})
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck", reference="scan")
        await type_sql(pilot, tab, "SELECT i FROM range(3) t(i)")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        shown = plain(tab.verdicts.shown)
        assert "reference failed (scan):" in shown and "does not run the table function" in shown
        assert "█" not in shown and " ms" not in shown, shown
        assert "latency: none, the reference failed" in shown
