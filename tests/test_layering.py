"""The core never imports a front end: no pyarrow.flight outside gateway/flight.

(import-linter checks textual; it cannot name a subpackage of an outside package.)
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "gateway"
FRONT_ENDS = ("flight", "tui")


def core_modules():
    for path in CORE.rglob("*.py"):
        rel = path.relative_to(CORE)
        if rel.parts[0] not in FRONT_ENDS:
            yield path


def test_core_does_not_import_pyarrow_flight():
    offenders = []
    for path in core_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n == "pyarrow.flight" or n.startswith("pyarrow.flight.") for n in names):
                offenders.append(f"{path.relative_to(CORE.parent)}:{node.lineno}")
    assert offenders == []
