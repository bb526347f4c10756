"""A run's state as the console shows it: quitting while one runs, the verdict panel's
states, and exports taken while an answer streams (the pilot, real engines)."""

from __future__ import annotations

import time

import pytest

from tests.hang_guard import HANG_GUARD
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
        while app.return_code is None and time.monotonic() - started < HANG_GUARD:
            await pilot.pause(0.02)
        assert app.return_code == 0
        assert not app.core.gw.running()  # cancelled, not left running


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


async def test_export_while_streaming_writes_what_is_in_and_says_partial(tmp_path, monkeypatch):
    import pyarrow.csv as pacsv

    from gateway.tui import console

    monkeypatch.setattr(console, "FIRST_ROWS_WAIT", 0.05)
    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await type_sql(pilot, tab, "SELECT i, md5(repeat('x', 1000) || i) AS h "
                                   "FROM range(100000000) t(i)")
        await pilot.press("ctrl+enter")
        for _ in range(3000):
            await pilot.pause(0.01)
            if tab.answer is not None:
                break
        assert not tab.answer.complete
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*"out.csv", "enter")  # in tmp_path (the fixture's cwd): few keys
        for _ in range(3000):  # the export's worker, not the statement's, which runs on
            await pilot.pause(0.01)
            if not any(w.group == "export" and not w.is_finished for w in app.workers):
                break
        await pilot.pause()
        notice = list(app._notifications)[-1].message
        await pilot.press("escape")
        await settle(pilot, tab, timeout=30)
    written = list(tmp_path.glob("out.partial-*-of-at-least-*.csv"))
    assert len(written) == 1 and not (tmp_path / "out.csv").exists(), written
    words = written[0].stem.split("-")  # out.partial, N, of, at, least, M
    rows, at_least = int(words[1]), int(words[-1])
    assert pacsv.read_csv(written[0]).num_rows == rows and at_least >= rows > 0
    assert notice.startswith(f"partial: {rows:,} of at least {at_least:,} rows"), notice
    assert written[0].name in notice


async def test_export_into_a_missing_folder_is_refused_in_one_line(tmp_path):
    app = make_app(quickstart_config())
    target = tmp_path / "no" / "such" / "out.csv"
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        await type_sql(pilot, tab, "SELECT 1 AS one")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab)
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*str(target), "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        notice = list(app._notifications)[-1]
    assert notice.message == (f"export failed: no folder {target.parent}: create it first, "
                              "or pick another path"), notice.message
    assert notice.severity == "error" and "Errno" not in notice.message
    assert not target.parent.exists()
