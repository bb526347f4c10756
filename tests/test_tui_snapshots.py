"""SVG snapshots of the console's main screens (pytest-textual-snapshot).

Accept a deliberate change with ``pytest tests/test_tui_snapshots.py --snapshot-update``
and look at the SVGs under ``tests/__snapshots__/`` before committing them. What varies
between runs (latencies, the cursor's blink) is pinned, so the pictures are stable.
"""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import TextArea

from tests.tui_support import divergent_config, make_app, quickstart_config, settle

SIZE = (130, 36)


@pytest.fixture(autouse=True)
def _stable(tmp_path, monkeypatch):
    """No user state, no blinking cursor."""
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TextArea, "_restart_blink", lambda self: self._pause_blink(visible=True))


def run(sql: str, engine: str, reference: str | None = None):  # type: ignore[no-untyped-def]
    """A run_before that runs ``sql`` and pins the times it shows."""

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app = pilot.app
        tab = app.active_tab
        tab.picker.pick(engine=engine, reference=reference or "")
        tab.editor.text = sql
        await pilot.pause()
        tab.action_run_statement()
        await settle(pilot, tab)
        answer = dataclasses.replace(tab.answer, elapsed=0.0125)
        tab.status.show_answer(answer)
        record = tab.verdicts.current
        if record is not None:
            record.primary_ms, record.reference_ms = 12.5, 25.0
            tab.verdicts.refresh_record()
        tab.editor.focus()
        await pilot.pause()

    return before


def test_editor_with_results(snap_compare):
    app = make_app(quickstart_config())
    assert snap_compare(app, terminal_size=SIZE, run_before=run(
        "SELECT cab_type, count(*) AS n, round(avg(fare_amount), 2) AS fare\n"
        "FROM trips GROUP BY 1 ORDER BY n DESC", "scan"))


def test_shadow_verdict_with_a_divergence(snap_compare):
    app = make_app(divergent_config())
    assert snap_compare(app, terminal_size=SIZE, run_before=run(
        "SELECT i, i / 2 AS half FROM range(4) t(i) ORDER BY i", "new", "old"))


def test_catalog(snap_compare):
    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        tree = pilot.app.query_one("#catalog")
        scan = tree.root.children[0]
        scan.expand()
        for _ in range(500):
            await pilot.pause(0.02)
            if scan.children and scan.children[0].data is not None:
                break
        schema = scan.children[0]
        schema.expand()
        for _ in range(500):
            await pilot.pause(0.02)
            if schema.children and schema.children[0].data is not None:
                break
        tree.focus()
        await pilot.pause()

    app = make_app(quickstart_config())
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_help(snap_compare):
    app = make_app(quickstart_config())
    assert snap_compare(app, terminal_size=SIZE, press=["f1"])


@pytest.mark.parametrize("size", [(40, 12), (80, 24), (250, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_layout_at_each_terminal_size(snap_compare, size):
    """Below 80 columns the catalog is collapsed; below 20 rows editor and results sit
    side by side, so a 40x12 terminal still shows the SQL and the answer's rows."""
    app = make_app(quickstart_config())
    assert snap_compare(app, terminal_size=size, run_before=run(
        "SELECT cab_type, count(*) AS n FROM trips GROUP BY 1 ORDER BY n DESC", "scan"))
