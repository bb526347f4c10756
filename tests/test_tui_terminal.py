"""``arrowgate tui`` in a real terminal: tmux runs it, the test types and reads the pane.

Skipped, with the reason printed, where tmux is not installed. Each test runs its own
tmux server (``-L``), so no one's sessions are touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD

CONFIG = """
default_engine = "duck"
[engines.duck]
type = "duckdb"
settings = { threads = 1 }
"""

#: streams rows for minutes: the grid fills while it runs
STREAMING = "SELECT i, md5(repeat('x', 1000) || i) AS h FROM range(100000000) t(i)"

#: skipped, saying why, where dev.py cannot install tmux
pytestmark = pytest.mark.tmux


class Pane:
    """One tmux server with one pane running the console."""

    def __init__(self, socket: str, tmp_path: Path):
        self.socket = socket
        self.tmp_path = tmp_path
        self.status_file = tmp_path / "exit-status"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def start(self, width: int = 120, height: int = 36) -> None:
        config = self.tmp_path / "arrowgate.toml"
        config.write_text(CONFIG)
        arrowgate = str(Path(sys.executable).with_name("arrowgate"))
        env = {"ARROWGATE_HOME": str(self.tmp_path / "home"), "TERM": "xterm-256color"}
        # the shell writes the console's exit status as soon as it has it (tmux's own
        # #{pane_dead_status} can lag: it reaps the process when it gets round to it)
        command = " ".join(f"{k}={v}" for k, v in env.items()) + \
            f" {arrowgate} --config {config} tui; echo $? > {self.status_file}"
        conf = self.tmp_path / "tmux.conf"
        conf.write_text(f"set -g default-size {width}x{height}\nset -g remain-on-exit on\n")
        self.tmux("-f", str(conf), "new-session", "-d", "-s", "t", "-x", str(width),
                  "-y", str(height), command)
        self.tmux("select-pane", "-t", "t", "-T", "original title")
        self.wait_for("engine")

    def screen(self, history: bool = False) -> str:
        """What the pane shows; with ``history`` what scrolled off it too."""
        return self.tmux("capture-pane", "-p", "-t", "t", *(["-S", "-"] if history else []))

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "t", "#{pane_title}").strip()

    def exit_status(self) -> str | None:
        """The console's exit status once it has exited, else None."""
        text = self.status_file.read_text() if self.status_file.exists() else ""
        return text.strip() or None

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        pytest.fail(f"{text!r} never appeared; the pane shows:\n{self.screen()}")

    def type_sql(self, sql: str) -> None:
        """Paste ``sql`` (bracketed paste: typed, the editor would close brackets and quotes)."""
        self.tmux("set-buffer", "-b", "sql", sql)
        self.tmux("paste-buffer", "-p", "-b", "sql", "-t", "t")
        time.sleep(0.3)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)


@pytest.fixture
def pane(tmp_path) -> Iterator[Pane]:
    if shutil.which("tmux") is None:
        print("tmux is not installed: the real-terminal tests are skipped")
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    pane = Pane(f"arrowgate-test-{os.getpid()}-{time.monotonic_ns()}", tmp_path)
    try:
        yield pane
    finally:
        subprocess.run(["tmux", "-L", pane.socket, "kill-server"], capture_output=True,
                       timeout=30)


def test_a_hostile_answer_neither_renames_the_pane_nor_wipes_the_screen(pane):
    pane.start()
    pane.type_sql("SELECT chr(27)||']2;PWNED'||chr(7) AS t, chr(27)||'[2J' AS w, 'kept' AS k")
    pane.keys("C-j")
    screen = pane.wait_for("1 row ·")
    assert pane.title() == "original title"
    assert "\\x1b]2;PWNED\\x07" in screen and "\\x1b[2J" in screen, screen
    # the catalog and the editor are still on the screen: nothing wiped it
    assert "▶ duck" in screen and "'kept' AS k" in screen, screen
    time.sleep(0.5)
    assert pane.title() == "original title"
    assert "'kept' AS k" in pane.screen()


def test_ctrl_q_while_a_statement_runs_exits_at_once_without_a_traceback(pane):
    pane.start()
    pane.type_sql(STREAMING)
    pane.keys("C-j")
    pane.wait_for("rows · ")
    started = time.monotonic()
    pane.keys("C-q")
    while time.monotonic() - started < HANG_GUARD and pane.exit_status() is None:
        time.sleep(0.05)
    after = pane.screen(history=True)
    assert pane.exit_status() == "0", (pane.exit_status(), after)
    assert "Traceback" not in after and "Error" not in after, after
