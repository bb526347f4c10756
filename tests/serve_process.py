"""``arrowgate serve`` in a process of its own, as users run it, for the tests that drive it.

The service logs a line per query to stderr: a thread reads it as it comes, so
a long run never blocks the service on a full pipe, and the test can read the
log afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import ROOT

#: seconds the service gets to say it listens (a hang guard: it takes about 1 s)
START_GUARD = 60


class Served:
    """A running ``arrowgate serve``: its process, its address and what it logged."""

    def __init__(self, proc: subprocess.Popen[str], location: str, log: list[str]):
        self.proc = proc
        self.location = location
        self.log = log

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mb(self) -> float:
        """The service's resident memory now, in MiB."""
        pages = int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))


@contextmanager
def served(folder: Path, config: str, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """``arrowgate serve --port 0`` with ``config`` as its arrowgate.toml, in ``folder``."""
    (folder / "arrowgate.toml").write_text(config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--port", "0"], cwd=folder,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert proc.stderr is not None
    log: list[str] = []
    listening = threading.Event()
    found: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            match = re.search(r"listening on (\S+)", line)
            if match and not found:
                found.append(match.group(1))
                listening.set()
        listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        listening.wait(START_GUARD)
        assert found, "the service did not start:\n" + "".join(log)
        yield Served(proc, found[0], log)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
