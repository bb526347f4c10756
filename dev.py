#!/usr/bin/env python3
"""Set up and run arrowgate from a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo   # install into .venv, run the quickstart on the bundled data
    python3 dev.py test   # install into .venv, run ruff, mypy, import-linter and pytest

The virtual environment is made once in .venv and refreshed when
pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".arrowgate-installed"
# the csv engine's C modules are compiled by the install: a change to them reinstalls too
INPUTS = ["pyproject.toml", "setup.py", "examples/plugin_minimal/pyproject.toml",
          "plugins/gateway_csv/_scanner.c", "plugins/gateway_csv/_mapfile.h",
          "plugins/gateway_csv/_dialect.c"]


def run(*cmd: str | Path) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if done.returncode != 0:
        sys.exit(done.returncode)


def install() -> None:
    digest = hashlib.sha256(b"".join((ROOT / p).read_bytes() for p in INPUTS
                                     if (ROOT / p).exists())).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs on any python3
        sys.exit(f"arrowgate needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]", "-e", "examples/plugin_minimal")
    STAMP.write_text(digest)


def demo() -> None:
    config = ["--config", "examples/quickstart/arrowgate.toml"]
    # One query on arrowgate's CSV scanner, shadowed by DuckDB: the answer, then
    # the verdict and the latency ratio.
    run(BIN / "arrowgate", *config, "query", "--shadow", "duck",
        "-f", "examples/quickstart/demo.sql")
    # A small corpus the same way, as a pipeline would run it.
    run(BIN / "arrowgate", *config, "shadow", "--primary", "scan", "--reference", "duck",
        "examples/quickstart/queries.sql")


def test(extra: list[str]) -> None:
    run(BIN / "ruff", "check", "gateway", "plugins", "tests", "examples", "bench", "dev.py")
    run(BIN / "mypy")
    run(BIN / "lint-imports")
    workers = ["-n", "2"] if not any(a.startswith("-n") for a in extra) else []
    run(PY, "-m", "pytest", *workers, *extra)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("demo", "test", "install"):
        sys.exit(__doc__)
    install()
    if sys.argv[1] == "demo":
        demo()
    elif sys.argv[1] == "test":
        test(sys.argv[2:])


if __name__ == "__main__":
    main()
