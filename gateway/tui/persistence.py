"""What the console keeps across restarts: the buffers (tabs) and the query history.

Both live in one folder per configuration (``ConsoleCore.state_dir``): ``buffers.json``
is rewritten whole, ``history.jsonl`` is appended to, one run a line.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Buffer:
    """One tab: its text and the engines picked for it."""

    text: str = ""
    engine: str | None = None
    reference: str | None = None


@dataclass
class HistoryEntry:
    """One run: what ran where, how long it took, what came back."""

    sql: str
    engine: str
    elapsed_ms: float
    rows: int | None
    verdict: str | None = None
    reference: str | None = None
    error: str | None = None
    time: str = ""

    def __post_init__(self) -> None:
        if not self.time:
            self.time = time.strftime("%Y-%m-%d %H:%M:%S")


class ConsoleStore:
    """The state folder; reading tolerates a missing or damaged file (it starts empty)."""

    def __init__(self, folder: Path):
        self.folder = folder

    @property
    def buffers_path(self) -> Path:
        return self.folder / "buffers.json"

    @property
    def history_path(self) -> Path:
        return self.folder / "history.jsonl"

    def load_buffers(self) -> list[Buffer]:
        try:
            raw = json.loads(self.buffers_path.read_text(encoding="utf-8"))
            return [Buffer(**{k: b.get(k) for k in ("text", "engine", "reference")})
                    for b in raw["buffers"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def save_buffers(self, buffers: list[Buffer]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.buffers_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"buffers": [asdict(b) for b in buffers]}, indent=1),
                       encoding="utf-8")
        os.replace(tmp, self.buffers_path)

    def append_history(self, entry: HistoryEntry) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.history_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(entry)) + "\n")

    def history(self, search: str = "", limit: int = 500) -> list[HistoryEntry]:
        """The latest runs first; ``search`` keeps those whose SQL contains it (any case)."""
        try:
            lines = self.history_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out: list[HistoryEntry] = []
        needle = search.lower()
        for line in reversed(lines):
            try:
                entry = HistoryEntry(**json.loads(line))
            except (ValueError, TypeError):
                continue
            if needle in entry.sql.lower():
                out.append(entry)
                if len(out) >= limit:
                    break
        return out
