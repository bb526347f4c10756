"""The console through Textual's pilot, against real engines (DuckDB and the csv scanner)."""

from __future__ import annotations

import pytest
from textual.coordinate import Coordinate

from tests.tui_support import (
    divergent_config,
    make_app,
    plain,
    quickstart_config,
    run_sql,
    screen_text,
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
        await run_sql(pilot, tab, "SELECT count(*) AS n FROM trips JOIN zones "
                                  "ON trips.pickup_zone = zones.zone")
        status = str(tab.status.render())
        assert "duck (fallback from scan" in status, status


async def test_an_error_shows_inline_with_the_engine_and_the_app_goes_on():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, "SELECT * FROM no_such_table")
        shown = str(tab.grid.query_one(".error").render())
        assert "Catalog Error on duck: Table with name no_such_table" in shown
        await run_sql(pilot, tab, "SELECT '[bold]not markup[/' AS x")
        assert tab.grid.table.get_cell_at(Coordinate(0, 0)) == "[bold]not markup[/"


async def test_shadow_on_a_planted_divergence_shows_the_verdict_and_marks_cells():
    from gateway.tui.components.verdict_panel import MARK, side_by_side

    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        await run_sql(pilot, tab, "SELECT i, i / 2 AS half FROM range(4) t(i) ORDER BY i")
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
        # ctrl+r shows the reference's whole answer, and again the primary's
        tab.grid.table.focus()
        await pilot.press("ctrl+r")
        await settle(pilot, tab)
        assert tab.showing_reference
        assert tab.grid.table.get_cell_at(Coordinate(1, 1)) == 0
        await pilot.press("ctrl+r")
        await settle(pilot, tab)
        assert tab.grid.table.get_cell_at(Coordinate(1, 1)) == 0.5


async def test_shadow_match_and_earlier_verdicts_stay_browsable():
    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        for sql in ("SELECT 7 AS seven", "SELECT 1 / 2 AS half"):
            await run_sql(pilot, tab, sql)
        panel = tab.verdicts
        assert [r.category for r in panel.records] == ["match", "values"]
        panel.focus()
        await pilot.press("left_square_bracket")
        assert panel.current.category == "match"
        assert "run 1/2" in plain(panel.shown)
        await pilot.press("right_square_bracket")
        assert panel.current.category == "values"


@pytest.mark.slow
async def test_a_shadowed_answer_streams_its_first_rows_before_the_verdict(monkeypatch):
    from gateway.tui import console
    from gateway.tui.messages import ResultsFetched, VerdictReady

    # first rows are shown 0.3 s after the first batch; 300,000 rows streamed whole
    # within that on a quiet machine, so the test failed there: shorter wait, more rows
    monkeypatch.setattr(console, "FIRST_ROWS_WAIT", 0.05)

    app = make_app(divergent_config())
    seen: list[tuple[str, int, bool]] = []

    def hook(message: object) -> None:
        if isinstance(message, ResultsFetched):
            seen.append(("rows", message.answer.table.num_rows, message.answer.complete))
        elif isinstance(message, VerdictReady):
            seen.append(("verdict", 0, True))

    async with app.run_test(size=(160, 50), message_hook=hook) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        # md5 of a long string per row: the primary hands over batches for a while
        await type_sql(pilot, tab, "SELECT i, md5(repeat('x', 1000) || i) AS h, 1 / 2 AS half "
                                   "FROM range(1000000) t(i)")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab, timeout=300)
        assert tab.verdicts.current.category == "values"
    assert seen[0][0] == "rows" and seen[0][2] is False and 0 < seen[0][1] < 1_000_000, seen
    assert seen[-2:] == [("rows", 1_000_000, True), ("verdict", 0, True)], seen


async def test_cancelling_a_shadowed_tab_stops_the_reference_while_the_verdict_is_pending():
    app = make_app(divergent_config())
    async with app.run_test(size=(160, 50)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="new", reference="old")
        # 1 / 2 is 0.5 on new, so it counts nothing; 0 on old, which counts for minutes
        await type_sql(pilot, tab, "SELECT count(*) FILTER (WHERE i % 7 = 0) AS n, 1 / 2 AS half "
                                   "FROM range(CAST(1e11 * (1 - (1 / 2) * 2) AS BIGINT)) t(i)")
        await pilot.press("ctrl+enter")
        for _ in range(1000):
            await pilot.pause(0.02)
            if tab.answer is not None and tab.answer.complete:
                break
        # the primary's answer is shown while the reference still runs
        assert tab.grid.table.get_cell_at(Coordinate(0, 1)) == 0.5
        record = tab.verdicts.current
        assert record is not None and record.status == "pending"
        assert "primary done, reference running" in plain(tab.verdicts.shown)
        assert tab.running
        await pilot.press("escape")
        await settle(pilot, tab, timeout=20)  # not the shadow timeout of 30 s
        assert record.status == "skipped"
        assert "cancelled the query before the reference answered" in plain(tab.verdicts.shown)
        assert not any(q.engine == "old" for q in app.core.gw.running())
        assert tab.grid.table.get_cell_at(Coordinate(0, 1)) == 0.5  # the answer stays


async def test_cancel_a_long_query_while_another_tab_completes():
    """Both tabs on one engine: each has its own session, so cancelling one stops only it."""
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        first = app.active_tab
        first.picker.pick(engine="duck")
        await type_sql(pilot, first, "SELECT count(*) FROM range(10000000000000) a")
        await pilot.press("ctrl+enter")
        await pilot.pause(0.3)
        assert first.running
        await app.action_new_tab()
        second = app.active_tab
        assert second is not first
        second.picker.pick(engine="duck")
        await run_sql(pilot, second, "SELECT count(*) AS n FROM trips")
        assert second.answer.table.to_pylist() == [{"n": 400}]
        assert first.running  # the other tab's statement goes on
        app.query_one("#tabs").active = "tab-1"
        for _ in range(500):  # the switch lands after a refresh or more, not at once
            await pilot.pause()
            if app.active_tab is first:
                break
        assert app.active_tab is first and first.running
        await pilot.press("escape")
        await settle(pilot, first, timeout=20)
        assert "cancelled" in str(first.status.render()) or \
            "cancel" in str(first.grid.query_one(".error").render()).lower()
        # escape with nothing running is the editor's again, and the tab still runs queries
        await run_sql(pilot, first, "SELECT 5 AS five")
        assert first.answer.table.to_pylist() == [{"five": 5}]


@pytest.mark.parametrize("suffix", ["csv", "parquet", "json"])
async def test_export_writes_a_file_that_reads_back(tmp_path, suffix):
    import json

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    app = make_app(quickstart_config())
    target = tmp_path / f"out.{suffix}"
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT cab_type, count(*) AS n FROM trips "
                                  "GROUP BY 1 ORDER BY n DESC")
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*str(target), "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    expected = [{"cab_type": "yellow", "n": 254}, {"cab_type": "green", "n": 113},
                {"cab_type": "fhv", "n": 33}]
    if suffix == "parquet":
        assert pq.read_table(target).to_pylist() == expected
    elif suffix == "csv":
        assert pacsv.read_csv(target).to_pylist() == expected
    else:
        assert json.loads(target.read_text()) == expected


async def test_export_to_the_clipboard_copies_the_answer_as_csv():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT cab_type, count(*) AS n FROM trips "
                                  "GROUP BY 1 ORDER BY n DESC")
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*"clipboard", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.clipboard.splitlines() == ["cab_type,n", "yellow,254", "green,113",
                                              "fhv,33"]  # quoted only as needed


@pytest.mark.slow
async def test_the_command_palette_runs_the_consoles_commands():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"New tab", "Close tab", "History", "Export", "Toggle catalog", "Keys",
                "Run statement", "Run all", "Format", "Reference answer"} <= titles

        async def palette(command: str) -> None:
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*command)
            await pilot.pause(0.5)  # the palette searches in the background
            await pilot.press("enter")
            await pilot.pause()

        tab = app.active_tab
        await type_sql(pilot, tab, "select count(*) n from trips")
        await palette("Format")
        assert tab.editor.text.startswith("SELECT\n  COUNT(*) AS n\nFROM trips")
        await palette("Run statement")
        await settle(pilot, tab)
        assert tab.answer.table.to_pylist() == [{"n": 400}]
        await palette("New tab")
        assert len(app.tabs) == 2 and app.active_tab is not tab
        await palette("Close tab")
        assert app.tabs == [tab]
        catalog = app.query_one("#catalog")
        await palette("Toggle catalog")
        assert not catalog.display


async def test_saving_buffers_while_a_tab_is_taken_down_keeps_what_it_knew():
    """The app saves buffers every 5 s; the timer can fire while the app is closing."""
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await type_sql(pilot, tab, "SELECT 1")
        await pilot.press("ctrl+enter")  # a run saves the buffers, and the tab its buffer
        await settle(pilot, tab)
        await tab.remove_children()
        app.save_buffers()
    assert [b.text for b in app.store.load_buffers()] == ["SELECT 1"]


async def test_buffers_and_history_survive_a_restart():
    config = quickstart_config()
    app = make_app(config)
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await run_sql(pilot, tab, "SELECT 41 + 1 AS answer")
        # a run saves the buffers at once, not only on quit
        assert [b.text for b in app.store.load_buffers()] == ["SELECT 41 + 1 AS answer"]
        await pilot.press("ctrl+n")
        await pilot.pause()
        second = app.active_tab
        second.picker.pick(engine="duck", reference="scan")
        await type_sql(pilot, second, "-- a draft\nSELECT 2")
        await pilot.press("ctrl+q")
    again = make_app(config)
    async with again.run_test(size=(140, 40)) as pilot:
        tabs = again.tabs
        assert [t.editor.text for t in tabs] == ["SELECT 41 + 1 AS answer", "-- a draft\nSELECT 2"]
        assert (tabs[1].picker.engine, tabs[1].picker.reference) == ("duck", "scan")
        await pilot.press("f8")
        await pilot.pause()
        await pilot.press(*"41 +")
        await pilot.pause()
        history = again.screen
        assert [e.sql for e in history.entries] == ["SELECT 41 + 1 AS answer"]
        assert history.entries[0].rows == 1 and history.entries[0].engine == "scan"
        await pilot.press("enter")  # re-runs it in the current tab
        tab = again.active_tab
        await settle(pilot, tab)
        assert tab.answer.table.to_pylist() == [{"answer": 42}]
        assert tab.editor.text == "SELECT 41 + 1 AS answer"


@pytest.fixture(scope="module")
def many_tables(tmp_path_factory):
    """A DuckDB file with 10,000 tables (made once for the module: it takes seconds)."""
    import duckdb

    path = tmp_path_factory.mktemp("catalog") / "many.duckdb"
    con = duckdb.connect(str(path))
    con.execute("BEGIN;" + "".join(f"CREATE TABLE t{i:05d} (a INTEGER, b VARCHAR);"
                                   for i in range(10_000)) + "COMMIT")
    con.close()
    return path


async def test_the_catalog_tree_opens_10000_tables_without_blocking_input(many_tables):
    """Keys keep reaching the editor while the tree loads (on a loaded machine a key may
    wait, so the test counts keys handled during the load instead of timing them)."""
    import time

    config = {"engines": {"many": {"type": "duckdb", "database": str(many_tables),
                                   "read_only": True}}}
    app = make_app(config)
    async with app.run_test(size=(140, 40)) as pilot:
        tree = app.query_one("#catalog")
        engine_node = tree.root.children[0]
        engine_node.expand()
        tab = app.active_tab
        tab.editor.focus()
        deadline = time.monotonic() + 600
        schema_node = None
        typed = ""
        while time.monotonic() < deadline:
            await pilot.press("x")
            typed += "x"
            # engine > catalog "many" > schema "main" > 10,000 tables, each level opened
            # as soon as the one above it is in
            node = engine_node
            for name in ("many", "main"):
                found = [c for c in node.children if c.data is not None and str(c.label) == name]
                if not found:
                    node = None
                    break
                node = found[0]
                if not node.is_expanded:
                    node.expand()
            if node is not None:
                schema_node = node
                if len(schema_node.children) == 10_000:
                    break
            await pilot.pause(0.05)
        assert schema_node is not None and len(schema_node.children) == 10_000
        assert len(typed) >= 3  # a key was handled while each of the three levels loaded
        assert tab.editor.text == typed  # and none was lost
        assert str(schema_node.children[-1].label) == "t09999"
        tree.focus()
        tree.move_cursor(schema_node.children[0])
        await pilot.press("i")
        await pilot.pause()
        assert tab.editor.text == typed + "main.t00000"


async def test_a_million_row_answer_scrolls_to_the_last_row():
    from gateway.tui.messages import ResultsFetched

    app = make_app(quickstart_config())
    seen: list[tuple[int, bool]] = []

    def hook(message: object) -> None:
        if isinstance(message, ResultsFetched):
            seen.append((message.answer.table.num_rows, message.answer.complete))

    async with app.run_test(size=(140, 40), message_hook=hook) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await type_sql(pilot, tab, "SELECT i, i * 2 AS doubled, 'row ' || i AS label "
                                   "FROM range(1000000) t(i) ORDER BY i")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab, timeout=120)
        grid = tab.grid.table
        assert grid.row_count == 1_000_000
        grid.focus()
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert grid.cursor_coordinate.row == 999_999
        assert grid.get_cell_at(grid.cursor_coordinate) == "row 999999"
        assert grid.scroll_y > 0
        assert "row 999999" in screen_text(app)
        assert "1,000,000 rows" in str(tab.status.render())
    assert seen[-1] == (1_000_000, True)


async def test_typing_repaints_the_editor_not_the_grid(monkeypatch):
    """A key that lengthens a line used to lay out and repaint the whole screen, the grid
    included: tens of milliseconds a key with a large answer on screen."""
    from textual_fastdatatable import DataTable

    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, "SELECT i, 'row ' || i AS label FROM range(100000) t(i)")
        tab.editor.focus()
        await pilot.press("end")
        await pilot.pause()
        painted: list[int] = []
        paint = DataTable.render_lines
        monkeypatch.setattr(DataTable, "render_lines",
                            lambda self, crop: painted.append(1) or paint(self, crop))
        for _ in range(10):
            await pilot.press("1")  # no completion list opens over the grid
        await pilot.pause()
        assert tab.editor.text.endswith("t(i)1111111111")
        assert not painted


async def test_what_the_first_statement_needs_is_imported_before_it_runs(tmp_path):
    """Splitting statements needs sqlglot (about 0.1 s to import) and the grid Arrow's
    compute functions: the app imports them in the background, not at the first run."""
    from tests.tui_support import imported_while_idle

    assert imported_while_idle(tmp_path, 'make_app({"engines": {"duck": {"type": "duckdb"}}}, '
                               'persist=False)', ("sqlglot.tokens", "pyarrow.compute"))


async def test_an_answer_that_keeps_streaming_shows_its_first_rows_early():
    from gateway.tui.messages import ResultsFetched

    app = make_app(quickstart_config())
    seen: list[tuple[int, bool]] = []

    def hook(message: object) -> None:
        if isinstance(message, ResultsFetched):
            seen.append((message.answer.table.num_rows, message.answer.complete))

    async with app.run_test(size=(140, 40), message_hook=hook) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        # md5 of a long string per row: DuckDB hands over batches as it makes them, for seconds
        await type_sql(pilot, tab, "SELECT i, md5(repeat('x', 1000) || i) AS h "
                                   "FROM range(600000) t(i)")
        await pilot.press("ctrl+enter")
        await settle(pilot, tab, timeout=300)
    assert seen[0][1] is False and 0 < seen[0][0] < 600_000, seen
    assert seen[-1] == (600_000, True)


async def test_enter_on_a_cell_shows_its_whole_value_as_json():
    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, """SELECT '{"a": [1, 2], "b": "long text"}' AS doc""")
        tab.grid.table.focus()
        await pilot.press("enter")
        await pilot.pause()
        from gateway.tui.components.cell_viewer import CellViewer

        assert isinstance(app.screen, CellViewer)
        assert "long text" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, CellViewer)


async def test_format_help_and_completion():
    from gateway.tui.components.help_screen import HelpScreen
    from gateway.tui.sql_text import complete

    app = make_app(quickstart_config())
    async with app.run_test(size=(140, 40)) as pilot:
        tab = app.active_tab
        await type_sql(pilot, tab, "select cab_type,count(*) n from trips group by 1")
        await pilot.press("f4")
        assert tab.editor.text.startswith("SELECT\n  cab_type,\n  COUNT(*) AS n\nFROM trips")
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shot = screen_text(app)
        assert "ctrl+enter" in shot and "Run all" in shot
        await pilot.press("escape")
        names = app.completion_names()
        assert "scan" in names and "duck" in names
    words = [c[1] for c in complete("tri", ["trips", "zones"])]
    assert words[0] == "trips"
    assert "SELECT" in [c[1] for c in complete("sel", [])]
    assert "count" in [c[1] for c in complete("coun", [])]
