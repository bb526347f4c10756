"""Reading the SQL corpora: ``-- name: NAME`` then one statement ending in ``;``.

The same files feed the conformance tests, the shadow examples and the benchmarks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

QUERIES = Path(__file__).parent / "queries"
DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$")


@dataclass(frozen=True)
class Case:
    name: str
    sql: str
    file: str

    def __str__(self) -> str:
        return self.name


def read_cases(path: Path) -> list[Case]:
    cases: list[Case] = []
    name: str | None = None
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _NAME.match(line.strip())
        if match:
            name, lines = match.group(1), []
            continue
        if name is None or line.strip().startswith("--"):
            continue
        lines.append(line)
        if line.rstrip().endswith(";"):
            sql = "\n".join(lines).strip().rstrip(";").strip()
            cases.append(Case(name, sql, path.name))
            name, lines = None, []
    if name is not None:
        raise ValueError(f"{path}: case {name!r} does not end with ';'")
    return cases


def all_cases() -> list[Case]:
    cases = [c for f in sorted(QUERIES.glob("*.sql")) for c in read_cases(f)]
    names = [c.name for c in cases]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"case names used twice: {sorted(duplicated)}")
    return cases


#: The sources every engine under test mounts.
SOURCES = {
    "trips": {"path": str(DATA / "trips.csv")},
    "zones": {"path": str(DATA / "zones.csv")},
}
