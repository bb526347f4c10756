"""Plugin discovery: entry points, ARROWGATE_PLUGINS, check_pending, conflicts."""

from __future__ import annotations

import pytest

import gateway
from gateway.engine import Engine
from tests.conftest import DATA


def test_builtin_and_outside_plugins_load_through_entry_points():
    with gateway.connect() as gw:
        names = {name for name, _ in gw.pm.list_name_plugin()}
        assert {"duckdb", "sqlite"} <= names  # sqlite is examples/plugin_minimal
        assert gw.engine_types["sqlite"].__module__ == "arrowgate_sqlite"


def test_outside_plugin_answers_queries():
    config = {"engines": {"lite": {"type": "sqlite"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        table = gw.execute("SELECT count(*) AS n FROM trips WHERE cab_type = ?",
                           parameters=["green"]).to_arrow()
    assert table.to_pylist() == [{"n": 113}]


def test_arrowgate_plugins_limits_what_loads(monkeypatch):
    monkeypatch.setenv("ARROWGATE_PLUGINS", "duckdb")
    with pytest.raises(gateway.ConfigError) as info:
        gateway.connect({"engines": {"lite": {"type": "sqlite"}}})
    assert "unknown engine type 'sqlite'" in str(info.value)
    assert "installed engine types: duckdb" in str(info.value)


def test_arrowgate_plugins_naming_a_missing_plugin(monkeypatch):
    monkeypatch.setenv("ARROWGATE_PLUGINS", "duckdb, nonexistent")
    with pytest.raises(gateway.ConfigError, match="not installed: nonexistent"):
        gateway.connect()


def test_check_pending_rejects_a_misnamed_hook():
    class Typo:
        @gateway.hookimpl
        def arrowgate_engine_typez(self):
            return []

    with pytest.raises(gateway.ConfigError, match="arrowgate_engine_typez"):
        gateway.connect(plugins=[Typo()])


def test_two_plugins_registering_one_type_name():
    class Other(Engine):
        type_name = "duckdb"

    class Clash:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [Other]

    with pytest.raises(gateway.ConfigError, match="registered twice"):
        gateway.connect(plugins=[Clash()])


def test_a_plugin_returning_a_non_engine():
    class Wrong:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [dict]

    with pytest.raises(gateway.ConfigError, match="not an Engine subclass"):
        gateway.connect(plugins=[Wrong()])


def test_a_plugin_that_fails_while_registering_is_named(cli):
    class Broken:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            raise ImportError("No module named 'missing_driver'")

    with pytest.raises(gateway.ConfigError) as info:
        gateway.connect(plugins=[Broken()])
    assert "failed to register its engine types" in str(info.value)
    assert "missing_driver" in str(info.value)
