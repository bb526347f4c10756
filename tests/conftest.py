"""Fixtures shared by the whole suite."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
QUICKSTART = ROOT / "examples" / "quickstart" / "arrowgate.toml"

# The csv engine's sniff cache (gateway_csv.sniff_cache) is off for the suite, and for
# the commands it starts: a test that changes the sniffer (a constant, a function)
# must not read layouts an earlier test kept. tests/test_csv_sniff_cache.py turns it on.
os.environ["ARROWGATE_SNIFF_CACHE"] = "off"

#: The throwaway PostgreSQL cluster (``postgres``) and the local Spark Connect server
#: (``spark``) for any test that needs one.
pytest_plugins = ["tests.pg", "tests.spark"]


def _dev_module():
    """dev.py, which knows the system packages the tests need (one list for dev.py and CI)."""
    spec = importlib.util.spec_from_file_location("arrowgate_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests whose system packages are missing, with the line that says what to do."""
    reasons = _dev_module().skip_reasons()
    for item in items:
        for marker, reason in reasons.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
                break
    # the tests marked slow (tens of seconds each, by design) first: pytest-xdist hands out
    # the tests in collection order, and one of them handed out last ends the run alone
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> Iterator[None]:
    """No user config or plugin filter leaks into a test."""
    monkeypatch.delenv("ARROWGATE_CONFIG", raising=False)
    monkeypatch.delenv("ARROWGATE_PLUGINS", raising=False)
    yield


@dataclass
class CliRun:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsysbinary, monkeypatch, tmp_path):
    """Run ``arrowgate ARGS...`` in process, from an empty folder; returns code, stdout, stderr."""
    from gateway.cli.main import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> CliRun:
        code = main(list(args))
        captured = capsysbinary.readouterr()
        return CliRun(code, captured.out.decode(), captured.err.decode())

    return run


def run_arrowgate(*args: str, input: str | None = None, cwd: Path | None = None,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed ``arrowgate`` command in a process of its own."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("ARROWGATE_CONFIG", "ARROWGATE_PLUGINS")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], input=input,
                          capture_output=True, text=True, cwd=cwd or ROOT, env=full_env,
                          timeout=120)
