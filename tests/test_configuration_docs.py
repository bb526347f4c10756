"""docs/configuration.md documents every key an engine section accepts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gateway import engine as engine_module
from gateway.plugins import build_plugin_manager, engine_types

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
#: the engine plugins this repository ships (outside plugins document themselves)
BUILT_IN = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
    "arrowgate"]


def table_keys(section: str) -> set[str]:
    """The backquoted names in the first column of a section's Markdown tables."""
    cells = re.findall(r"^\| ([^|]+) \|", section, re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`([a-z_]+)`", cell)}


def type_section(type_name: str) -> str:
    match = re.search(rf'^### `type = "{type_name}"`\n(.*?)(?=^##)', DOC, re.MULTILINE | re.DOTALL)
    assert match, f'docs/configuration.md has no section ### `type = "{type_name}"`'
    return match.group(1)


def built_in_types(monkeypatch: pytest.MonkeyPatch) -> dict[str, type]:
    monkeypatch.setenv("ARROWGATE_PLUGINS", ",".join(BUILT_IN))
    return engine_types(build_plugin_manager())


def test_every_engine_types_options_are_in_docs_configuration(monkeypatch):
    missing = [f"{name}: {key}" for name, cls in sorted(built_in_types(monkeypatch).items())
               for key in cls.options if key not in table_keys(type_section(name))]
    assert missing == [], "document these keys in docs/configuration.md"


def test_the_options_every_engine_takes_are_in_docs_configuration():
    common = getattr(engine_module, "COMMON_OPTIONS", {})
    section = DOC.split("## `[engines.NAME]`", 1)[1].split("### ", 1)[0]
    assert sorted(set(common) - table_keys(section)) == []


def test_every_serve_option_is_in_docs_configuration():
    from gateway.flight.serve_config import SERVE_OPTIONS

    keys = table_keys(DOC)
    assert [k for k in SERVE_OPTIONS if k not in keys] == []
