"""Plugin discovery: entry points, ARROWGATE_PLUGINS, check_pending, conflicts."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time

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


ENGINE_MODULES = ["gateway_adbc.engine", "gateway_csv.engine", "gateway_duckdb.engine",
                  "gateway_ducklake.engine", "gateway_odbc.engine"]


def _engine_modules_after(code: str) -> list[list[str]]:
    """Run ``code`` in a fresh process; each ``seen()`` it calls prints the engine modules."""
    prelude = ("import sys\n"
               f"def seen(): print([m for m in {ENGINE_MODULES!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                          check=True)
    return [ast.literal_eval(line) for line in done.stdout.splitlines() if line.startswith("[")]


def test_a_configuration_imports_only_the_engine_types_it_uses():
    code = ("import gateway\n"
            f"config = {{'engines': {{'scan': {{'type': 'csv'}}}}, "
            f"'sources': {{'trips': {{'path': {str(DATA / 'trips.csv')!r}}}}}}}\n"
            "with gateway.connect(config) as gw:\n"
            "    gw.execute('SELECT count(*) FROM trips').to_arrow()\n"
            "    seen()\n"
            "    assert gw.engine_types['sqlite'].type_name == 'sqlite'\n"
            "    seen()\n"
            "    assert len(gw.engine_types) >= 6\n"
            "    seen()\n")
    first, outside, everything = _engine_modules_after(code)
    assert first == outside == ["gateway_csv.engine"]
    assert everything == ENGINE_MODULES


def test_an_arrowgate_query_imports_only_the_engine_types_it_uses(tmp_path):
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'[engines.duck]\ntype = "duckdb"\n\n[sources.trips]\n'
                      f'path = "{DATA / "trips.csv"}"\n')
    code = ("from gateway.cli.main import main\n"
            f"assert main(['--config', {str(config)!r}, 'query', 'SELECT count(*) FROM trips']) == 0\n"
            "seen()\n")
    assert _engine_modules_after(code) == [["gateway_duckdb.engine"]]


def test_each_built_in_plugin_registers_the_type_of_its_own_name():
    """What lets a look-up ask one built-in only (gateway.plugins)."""
    from gateway.plugins import build_plugin_manager

    pm = build_plugin_manager()
    assert pm.on_demand == {"adbc", "csv", "duckdb", "ducklake", "odbc", "spark"}
    for name in pm.on_demand:
        assert [cls.type_name for cls in pm.subset_hook_caller(
            "arrowgate_engine_types", remove_plugins=[p for n, p in pm.list_name_plugin()
                                                      if n != name])()[0]] == [name]


def test_an_outside_plugin_taking_a_built_in_type_name_is_still_a_clash():
    class Other(Engine):
        type_name = "csv"

    class Clash:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [Other]

    with pytest.raises(gateway.ConfigError, match="'csv' is registered twice"):
        gateway.connect({"engines": {"scan": {"type": "csv"}}}, plugins=[Clash()])


def test_a_type_looked_up_from_two_threads_at_once_is_found_by_both():
    """Flight sessions look engine types up from their own threads."""
    from gateway import hookspecs
    from gateway.plugins import PluginManager, engine_types

    class Slow(Engine):
        type_name = "slow"

    class SlowPlugin:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            time.sleep(0.2)  # the first look-up is still asking when the second comes
            return [Slow]

    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    pm.register(SlowPlugin(), name="slow")
    pm.on_demand.add("slow")
    types = engine_types(pm)
    found = []
    threads = [threading.Thread(target=lambda: found.append(types.get("slow"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == [Slow, Slow]
