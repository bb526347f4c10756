"""What the console's tests share: configs over real engines, an app factory, waiting."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"


def quickstart_config() -> dict[str, Any]:
    """The quickstart's engines (csv falling back to DuckDB) on the bundled data."""
    return {
        "default_engine": "scan",
        "engines": {"scan": {"type": "csv", "fallback": "duck"},
                    "duck": {"type": "duckdb", "settings": {"threads": 1}}},
        "sources": {"trips": {"path": str(DATA / "trips.csv")},
                    "zones": {"path": str(DATA / "zones.csv")}},
    }


def divergent_config() -> dict[str, Any]:
    """Two DuckDB engines a setting apart: ``/`` divides integers on ``old`` only."""
    return {
        "default_engine": "new",
        "engines": {"new": {"type": "duckdb", "settings": {"threads": 1}},
                    "old": {"type": "duckdb",
                            "settings": {"threads": 1, "integer_division": True}}},
    }


def make_app(config: dict[str, Any] | str, **kwargs: Any):  # type: ignore[no-untyped-def]
    from gateway.core import Gateway
    from gateway.tui.app import ArrowgateApp
    from gateway.tui.console import ConsoleCore

    return ArrowgateApp(ConsoleCore(Gateway(config)), **kwargs)


async def settle(pilot: Any, tab: Any, timeout: float = 60.0) -> None:
    """Wait until ``tab`` runs nothing (its answer and verdict shown)."""
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while tab.running:
        if time.monotonic() > deadline:
            pytest.fail("the tab's statement did not finish in time")
        await asyncio.sleep(0.02)
    await pilot.pause()
    await pilot.pause()


async def type_sql(pilot: Any, tab: Any, sql: str) -> None:
    """Put ``sql`` into the tab's editor as if typed (set whole: typing goes through completion)."""
    tab.editor.text = sql
    tab.editor.focus()
    await pilot.pause()


async def run_sql(pilot: Any, tab: Any, sql: str, timeout: float = 60.0) -> None:
    """Type ``sql`` into the tab, run it (ctrl+enter) and wait until it is done."""
    await type_sql(pilot, tab, sql)
    await pilot.press("ctrl+enter")
    await settle(pilot, tab, timeout)


def plain(renderable: Any, width: int = 160) -> str:
    """A Rich renderable as the text it shows."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def styled(renderable: Any, style: str, width: int = 160) -> list[str]:
    """The pieces of text ``renderable`` draws in ``style``."""
    from rich.console import Console
    from rich.style import Style

    wanted = Style.parse(style)
    console = Console(width=width, file=open(os.devnull, "w"))  # noqa: SIM115
    return [seg.text.strip() for seg in console.render(renderable)
            if seg.style is not None and seg.style == wanted and seg.text.strip()]


def screen_text(app: Any) -> str:
    """The words on the app's screen (from its SVG screenshot), spaces normalised."""
    import html
    import re

    pieces = re.findall(r">([^<]*)</text>", app.export_screenshot())
    return " ".join(html.unescape(p).replace("\xa0", " ") for p in pieces)


def imported_while_idle(tmp_path: Path, app: str, modules: tuple[str, ...]) -> bool:
    """Whether a console (``app``: an expression over :func:`make_app` and the configs
    here) imports every one of ``modules`` in the background within 10 s of starting,
    with no statement run: checked in a fresh interpreter, where nothing is imported yet."""
    import subprocess
    import sys

    script = f"""
import asyncio, sys
from tests.tui_support import make_app, divergent_config

async def main():
    app = {app}
    async with app.run_test() as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if all(m in sys.modules for m in {modules!r}):
                print("imported")
                return
        print("not imported")

asyncio.run(main())
"""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "ARROWGATE_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "imported"
