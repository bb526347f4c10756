"""Values, names and messages that hold control characters cannot drive the terminal:
the pilot (what each panel shows) and a real terminal through tmux."""

from __future__ import annotations

import pytest
from textual.coordinate import Coordinate

from tests.tui_support import make_app, plain, quickstart_config, run_sql, screen_text, styled

#: renames the terminal's window, clears the screen, reverses what follows, a C1 CSI
HOSTILE_SQL = ("SELECT chr(27) || ']2;PWNED' || chr(7) AS title, chr(27) || '[2J' AS wipe, "
               "'a' || chr(8238) || 'b' AS bidi, 'c' || chr(155) || '31m' AS c1, "
               "'x' || chr(127) AS del")
HOSTILE = {"title": "\x1b]2;PWNED\x07", "wipe": "\x1b[2J", "bidi": "a\u202eb",
           "c1": "c\x9b31m", "del": "x\x7f"}
SHOWN = {"title": "\\x1b]2;PWNED\\x07", "wipe": "\\x1b[2J", "bidi": "a\\u202eb",
         "c1": "c\\x9b31m", "del": "x\\x7f"}


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def no_controls(text: str) -> bool:
    from gateway.tui.visible import has_controls

    return not has_controls(text.replace("\n", ""))


def test_visible_escapes_every_control_class_in_a_dimmed_style():
    from gateway.tui.visible import visible, visible_plain

    for raw, shown in zip(HOSTILE.values(), SHOWN.values(), strict=True):
        assert visible(raw).plain == shown
        assert visible_plain(raw) == shown
    text = visible("a\x1bb\u2066c\x00")
    assert styled(text, "dim") == ["\\x1b", "\\u2066", "\\x00"]
    assert visible("line\nnext", keep="\n").plain == "line\nnext"
    assert visible("tab\there").plain == "tab\\x09here"


@pytest.mark.asyncio
async def test_the_grid_and_the_cell_viewer_show_escapes_and_copy_and_export_the_true_bytes(
        tmp_path):
    from gateway.tui.components.cell_viewer import CellViewer

    app = make_app(quickstart_config())
    target = tmp_path / "hostile.csv"
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, HOSTILE_SQL)
        assert tab.answer.table.to_pylist() == [HOSTILE]  # the answer itself is untouched
        grid = tab.grid.table
        for column, shown in enumerate(SHOWN.values()):
            cell = grid.get_cell_at(Coordinate(0, column))
            assert cell.plain == shown
            assert "\\x" in "".join(styled(cell, "dim")) or "\\u" in "".join(styled(cell, "dim"))
        screen = screen_text(app)
        assert no_controls(screen)
        for shown in SHOWN.values():  # a style's edge splits the screen's words: no spaces
            assert shown in "".join(screen.split()), (shown, screen)
        # the cell viewer shows the escapes too
        grid.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CellViewer)
        viewer = screen_text(app)
        assert SHOWN["title"] in "".join(viewer.split()) and no_controls(viewer)
        await pilot.press("escape")
        # ctrl+c on the cell copies the true value
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == HOSTILE["title"]
        # and the export writes the true bytes
        await pilot.press("ctrl+e")
        await pilot.pause()
        await pilot.press(*str(target), "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    import pyarrow.csv as pacsv

    assert pacsv.read_csv(target).to_pylist() == [HOSTILE]


@pytest.mark.asyncio
async def test_errors_notices_history_and_the_status_line_show_escapes():
    from gateway.tui.components.history_screen import entry_label

    app = make_app(quickstart_config())
    async with app.run_test(size=(160, 40)) as pilot:
        tab = app.active_tab
        tab.picker.pick(engine="duck")
        await run_sql(pilot, tab, 'SELECT * FROM "bad\x1b[2Jname\x07"')
        error = plain(tab.grid.query_one(".error").render())
        assert "bad\\x1b[2Jname\\x07" in error and no_controls(error), error
        app.notify("export failed: [bold]x\x1b]2;PWNED\x07")
        await pilot.pause()
        # the toast is not drawn under the pilot: what it was given is (text, not markup)
        notice = list(app._notifications)[-1]
        assert notice.message == "export failed: [bold]x\\x1b]2;PWNED\\x07"
        assert notice.markup is False
        entry = app.store.history()[0]
        label = entry_label(entry).plain
        assert "bad\\x1b[2Jname\\x07" in label and no_controls(label)
        tab.status.show_text("rows from \x1b[2J")
        assert str(tab.status.render()).endswith("rows from \\x1b[2J")


@pytest.mark.asyncio
async def test_the_catalog_shows_hostile_table_and_column_names_as_escapes(tmp_path):
    import duckdb

    path = tmp_path / "hostile.duckdb"
    con = duckdb.connect(str(path))
    con.execute('CREATE TABLE "t\x1b[2J" ("c\x1b]2;PWNED\x07" INTEGER)')
    con.close()
    app = make_app({"engines": {"evil": {"type": "duckdb", "database": str(path),
                                         "read_only": True}}})
    async with app.run_test(size=(160, 40)) as pilot:
        tree = app.query_one("#catalog")
        node = tree.root.children[0]
        labels: list[str] = []
        for level in ("catalog", "schema", "table", "column"):
            node.expand()
            for _ in range(500):
                await pilot.pause(0.02)
                if node.children and node.children[0].data is not None:
                    break
            wanted = [c for c in node.children if c.data is not None and
                      (c.label.plain in ("hostile", "main") or
                       c.data.name in ("t\x1b[2J", "c\x1b]2;PWNED\x07"))]
            assert wanted, (level, [str(c.label) for c in node.children])
            node = wanted[0]
            labels.append(node.label.plain)
        assert "t\\x1b[2J" in labels[2] and "c\\x1b]2;PWNED\\x07" in labels[3], labels
        assert all(no_controls(label) for label in labels)
