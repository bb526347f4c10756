"""Shared helpers for the DuckDB version tests: one install cache per test session.

Installing a release takes seconds, so every test (and every xdist worker)
shares one ``ARROWGATE_HOME`` under pytest's base temp folder; the install
lock makes concurrent workers wait for each other instead of installing twice.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

#: The releases the suite runs on through ADBC (2.0.0: the installed module is 2.0.1).
V144, V155, V20 = "1.4.4", "1.5.5", "2.0.0"


def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ARROWGATE_HOME for the whole run, shared by xdist workers."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    home = base / "arrowgate-home"
    home.mkdir(parents=True, exist_ok=True)
    return home


def use_shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = shared_home(tmp_path_factory)
    os.environ["ARROWGATE_HOME"] = str(home)
    return home


def cli_binary() -> str:
    """The real DuckDB binary shipped by the duckdb-cli package (a dev dependency)."""
    spec = find_spec("duckdb_cli")
    if spec is None or spec.origin is None:
        raise RuntimeError("the duckdb-cli package is missing: pip install -e '.[dev]'")
    return str(Path(spec.origin).parent / "duckdb")


def release_section(section: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    """A conformance engine's section with the shared cache set and ``cli = "duckdb-cli"``
    replaced by the real binary's path."""
    use_shared_home(request.getfixturevalue("tmp_path_factory"))
    section = dict(section)
    if section.get("cli") == "duckdb-cli":
        section["cli"] = cli_binary()
    return section


def open_engine(section: dict[str, Any], sources: dict[str, Any] | None = None,
                engine_class: type | None = None) -> Any:
    """A connected DuckDB engine built from a config section, checked like a config file.

    It bypasses the plugin manager, so these tests need no other plugin installed.
    """
    from gateway.config import load_config
    from gateway_duckdb.engine import DuckDBEngine

    cls = engine_class or DuckDBEngine
    config = load_config({"engines": {"e": {"type": cls.type_name, **section}},
                          "sources": sources or {}}, {cls.type_name: cls})
    engine = cls("e", config.engines["e"].options, config.sources)
    try:
        engine.connect()
    except BaseException:
        engine.close()
        raise
    return engine


def rows(engine: Any, sql: str, parameters: Any = None) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = engine.execute(sql, parameters).reader.read_all().to_pylist()
    return result
