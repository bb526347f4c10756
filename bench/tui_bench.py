"""The console against Harlequin, both driven headless through Textual's pilot.

    .venv/bin/python bench/tui_bench.py --harlequin-python /path/to/venv/bin/python --shadow

Harlequin lives in a virtual environment of its own (it pins other versions of the
widget libraries): ``python3 -m venv V && V/bin/pip install harlequin==2.17.0``.

One DuckDB file (``bench/data/tui.duckdb``, table ``t``: 1M rows of an integer, its
double and a label) serves both. Every round starts each console in a fresh process,
tools alternating with the order rotated, one warm-up round first, and measures:

- launch to ready: process start to the editor focused and accepting keys;
- run to first rows: ctrl+j on ``SELECT * FROM t ORDER BY i`` to the first rows in the grid;
- 1M-row grid ready: the same run to the grid holding all 1,000,000 rows;
- keystroke latency (p50, p99) with that grid loaded, and while a long query runs: a
  key sent to the app until its character is in the editor (one key every 20 ms).

Answers come first: a round counts only when the grid holds 1,000,000 rows and its last
row is the one DuckDB returns. Peak RSS is each process's high-water mark.

``--shadow`` adds a third console, ``arrowgate-shadow``: the same, every statement
shadowed on a second DuckDB engine over the same file. Its round also counts only when
the verdict is ``match``; the table ends with its cost against the unshadowed console
(the grid's time and peak RSS, targets 1.3x and 1.2x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
ROWS = 1_000_000
QUERY = "SELECT * FROM t ORDER BY i"
LONG_QUERY = "SELECT sum(a.i * b.i) FROM range(100000) a(i), range(100000) b(i)"
LAST_LABEL = f"row {ROWS - 1}"
KEYS = 60
SIZE = (140, 40)


def make_database(path: Path) -> None:
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute(f"CREATE OR REPLACE TABLE t AS SELECT i, i * 2 AS doubled, 'row ' || i AS label "
                f"FROM range({ROWS}) r(i)")
    con.close()


# -- the child: one console, one process ---------------------------------------------------
class Console:
    """What the driver needs from a console: build it, find its editor and its grid."""

    def __init__(self, database: Path):
        self.database = database

    def app(self) -> Any:
        raise NotImplementedError

    def ready(self, app: Any) -> bool:
        raise NotImplementedError

    def set_sql(self, app: Any, sql: str) -> None:
        raise NotImplementedError

    def text(self, app: Any) -> str:
        raise NotImplementedError

    def focus_editor(self, app: Any) -> None:
        raise NotImplementedError

    def query_running(self, app: Any) -> bool:
        raise NotImplementedError

    def verdict(self, app: Any) -> str | None:
        """The shadow verdict of the last run; "match" where nothing is shadowed."""
        return "match"

    def grid_rows(self, app: Any) -> int:
        raise NotImplementedError

    def last_label(self, app: Any) -> Any:
        raise NotImplementedError


class Arrowgate(Console):
    def app(self) -> Any:
        from gateway.core import Gateway
        from gateway.tui.app import ArrowgateApp
        from gateway.tui.console import ConsoleCore

        config = {"engines": {"duck": {"type": "duckdb", "database": str(self.database),
                                       "read_only": True}}}
        return ArrowgateApp(ConsoleCore(Gateway(config)), persist=False)

    def ready(self, app: Any) -> bool:
        tab = app.active_tab
        return tab is not None and app.focused is not None and \
            app.focused is tab.editor.text_input

    def set_sql(self, app: Any, sql: str) -> None:
        app.active_tab.editor.text = sql

    def text(self, app: Any) -> str:
        return str(app.active_tab.editor.text)

    def focus_editor(self, app: Any) -> None:
        app.active_tab.editor.focus()

    def query_running(self, app: Any) -> bool:
        return bool(app.active_tab.running)

    def _grid(self, app: Any) -> Any:
        return app.active_tab.grid.table

    def grid_rows(self, app: Any) -> int:
        grid = self._grid(app)
        return 0 if grid is None else grid.row_count

    def last_label(self, app: Any) -> Any:
        from textual.coordinate import Coordinate

        return self._grid(app).get_cell_at(Coordinate(ROWS - 1, 2))


class ArrowgateShadow(Arrowgate):
    """Arrowgate with every statement shadowed on a second DuckDB engine."""

    def app(self) -> Any:
        from gateway.core import Gateway
        from gateway.tui.app import ArrowgateApp
        from gateway.tui.console import ConsoleCore

        engine = {"type": "duckdb", "database": str(self.database), "read_only": True}
        config = {"default_engine": "duck", "engines": {"duck": engine, "ref": dict(engine)}}
        return ArrowgateApp(ConsoleCore(Gateway(config)), reference="ref", persist=False)

    def verdict(self, app: Any) -> str | None:
        record = app.active_tab.verdicts.current
        return None if record is None else record.category


class Harlequin(Console):
    def app(self) -> Any:
        from harlequin.app import Harlequin as HarlequinApp
        from harlequin_duckdb.adapter import DuckDbAdapter

        adapter = DuckDbAdapter((str(self.database),), read_only=True)
        return HarlequinApp(adapter=adapter, connection_hash="bench", record_history=False,
                            viewer_max_rows=ROWS)

    def ready(self, app: Any) -> bool:
        return app.editor is not None and app.focused is not None and \
            app.focused is app.editor.text_input

    def set_sql(self, app: Any, sql: str) -> None:
        app.editor.text = sql

    def text(self, app: Any) -> str:
        return str(app.editor.text)

    def focus_editor(self, app: Any) -> None:
        app.editor.focus()

    def query_running(self, app: Any) -> bool:
        from textual.worker import WorkerState

        return any(w.group == "query_runners" and w.state == WorkerState.RUNNING
                   for w in app.workers)

    def _grid(self, app: Any) -> Any:
        return app.results_viewer.get_visible_table()

    def grid_rows(self, app: Any) -> int:
        grid = self._grid(app)
        return 0 if grid is None else grid.row_count

    def last_label(self, app: Any) -> Any:
        from textual.coordinate import Coordinate

        return self._grid(app).get_cell_at(Coordinate(ROWS - 1, 2))


async def until(condition: Any, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the console did not get there in time")
        await asyncio.sleep(0.005)
    return time.monotonic()


def send_key(app: Any, key: str, char: str | None) -> None:
    """A key as the terminal driver delivers it (the pilot's press() then waits until the
    whole process is idle, which a running query never is)."""
    from textual import events

    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


async def keystrokes(app: Any, text: Any, n: int) -> tuple[list[float], float]:
    """Milliseconds from a key reaching the app to its character being in the editor, for
    ``n`` keys; and the process's CPU seconds per wall second meanwhile (what a running
    query takes)."""
    out = []
    cpu, wall = time.process_time(), time.monotonic()
    for _ in range(n):
        before = len(text())
        started = time.monotonic()
        send_key(app, "x", "x")
        await until(lambda before=before: len(text()) > before, timeout=60)  # type: ignore[misc]
        out.append((time.monotonic() - started) * 1000)
        await asyncio.sleep(0.02)  # a typist's pace, and time to paint
    return out, (time.process_time() - cpu) / (time.monotonic() - wall)


async def drive(console: Console, emit: Any) -> None:
    app = console.app()
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: console.ready(app))
        emit("ready")
        console.set_sql(app, QUERY)
        await pilot.pause()
        started = time.monotonic()
        send_key(app, "ctrl+j", None)
        first = await until(lambda: console.grid_rows(app) > 0)
        full = await until(lambda: console.grid_rows(app) == ROWS)
        await pilot.pause()
        label = console.last_label(app)
        await until(lambda: not console.query_running(app))  # a shadowed run's verdict
        verdict = console.verdict(app)
        console.focus_editor(app)
        await pilot.pause()
        loaded, _ = await keystrokes(app, lambda: console.text(app), KEYS)
        console.set_sql(app, LONG_QUERY)
        await pilot.pause()
        send_key(app, "ctrl+j", None)
        await asyncio.sleep(0.5)
        console.focus_editor(app)
        ran = console.query_running(app)
        running, busy = await keystrokes(app, lambda: console.text(app), KEYS)
        ran = ran and console.query_running(app)
        emit("done", first_rows_ms=(first - started) * 1000, grid_ms=(full - started) * 1000,
             answer_ok=label == LAST_LABEL and verdict == "match", keys_loaded_ms=loaded, keys_running_ms=running,
             cpu_while_running=busy, query_ran_throughout=ran,
             peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def child(tool: str, database: Path) -> None:
    def emit(event: str, **data: Any) -> None:
        print(json.dumps({"event": event, **data}), flush=True)

    console = {"arrowgate": Arrowgate, "arrowgate-shadow": ArrowgateShadow,
               "harlequin": Harlequin}[tool](database)
    asyncio.run(drive(console, emit))
    os._exit(0)  # a long query may still run in a worker thread: do not wait for it


# -- the parent: rounds, alternation, tables ------------------------------------------------
def one_run(tool: str, python: str, database: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["ARROWGATE_HOME"] = tempfile.mkdtemp(prefix="tui-bench-")
    env["HOME"] = env["ARROWGATE_HOME"]  # neither console reads the user's own config
    started = time.monotonic()
    proc = subprocess.Popen([python, __file__, "--child", tool, "--database", str(database)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)
    out: dict[str, Any] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "ready":
            out["launch_ms"] = (time.monotonic() - started) * 1000
        else:
            out.update(event)
    proc.wait()
    if "first_rows_ms" not in out:
        raise RuntimeError(f"{tool} failed: {proc.stderr.read() if proc.stderr else ''}")
    return out


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    tools = list(runs)
    rows = [("launch to ready (ms)", "launch_ms"), ("run to first rows (ms)", "first_rows_ms"),
            ("run to 1M-row grid ready (ms)", "grid_ms")]
    lines = ["| measure | " + " | ".join(f"{t} median (min-max)" for t in tools)
             + " | arrowgate / harlequin (median) |", "|---" * (len(tools) + 2) + "|"]

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"

    for label, key in rows:
        per = {t: [r[key] for r in runs[t]] for t in tools}
        ratio = statistics.median(per["arrowgate"]) / statistics.median(per["harlequin"]) \
            if "harlequin" in per else float("nan")
        lines.append(f"| {label} | " + " | ".join(cell(per[t]) for t in tools)
                     + f" | {ratio:.2f}x |")
    for label, key in (("keystroke, 1M rows loaded (ms)", "keys_loaded_ms"),
                       ("keystroke, query running (ms)", "keys_running_ms")):
        parts = []
        for t in tools:
            keys = [k for r in runs[t] for k in r[key]]
            parts.append(f"p50 {p(keys, 0.5):,.1f}, p99 {p(keys, 0.99):,.1f}")
        lines.append(f"| {label} | " + " | ".join(parts) + " | |")
    peaks = {t: [r["peak_mb"] for r in runs[t]] for t in tools}
    lines.append("| peak RSS (MB) | " + " | ".join(cell(peaks[t]) for t in tools) + " | |")
    if "arrowgate-shadow" in runs:
        grid = {t: statistics.median(r["grid_ms"] for r in runs[t])
                for t in ("arrowgate", "arrowgate-shadow")}
        peak = {t: statistics.median(peaks[t]) for t in ("arrowgate", "arrowgate-shadow")}
        lines.append("")
        lines.append(f"shadow cost (arrowgate-shadow / arrowgate, medians): 1M-row grid "
                     f"{grid['arrowgate-shadow'] / grid['arrowgate']:.2f}x (target 1.3x), "
                     f"peak RSS {peak['arrowgate-shadow'] / peak['arrowgate']:.2f}x "
                     f"(target 1.2x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harlequin-python", help="the python of a venv with harlequin 2.17")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database", type=Path, default=DATA / "tui.duckdb")
    parser.add_argument("--shadow", action="store_true",
                        help="add arrowgate with every statement shadowed on a second DuckDB")
    parser.add_argument("--child", choices=("arrowgate", "arrowgate-shadow", "harlequin"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.database)
        return
    if not args.database.exists():
        make_database(args.database)
    tools = {"arrowgate": sys.executable}
    if args.shadow:
        tools["arrowgate-shadow"] = sys.executable
    if args.harlequin_python:
        tools["harlequin"] = args.harlequin_python
    print(f"load average at start: {os.getloadavg()}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    order = list(tools)
    for round_no in range(args.rounds + 1):  # round 0 is the warm-up
        for tool in order:
            result = one_run(tool, tools[tool], args.database)
            if not result["answer_ok"]:
                raise SystemExit(f"{tool}: the grid's last row is not {LAST_LABEL!r}, or the "
                                 "shadow verdict is not a match")
            if not result["query_ran_throughout"]:
                raise SystemExit(f"{tool}: the long query was not running while keys were timed")
            print(f"round {round_no} {tool}: launch {result['launch_ms']:,.0f} ms, first rows "
                  f"{result['first_rows_ms']:,.0f} ms, grid {result['grid_ms']:,.0f} ms, "
                  f"peak {result['peak_mb']:,.0f} MB, CPU while the long query ran "
                  f"{result['cpu_while_running']:.2f} s/s", flush=True)
            if round_no:
                runs[tool].append(result)
        order = order[1:] + order[:1]
    print(f"load average at end: {os.getloadavg()}")
    print(table(runs))


if __name__ == "__main__":
    main()
