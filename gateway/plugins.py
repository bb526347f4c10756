"""The plugin manager: finds plugins through entry points and collects engine types.

Every allowed entry-point plugin is imported and registered at start (the
modules are light by contract: :mod:`gateway.hookspecs`), so each hook,
``arrowgate_register_commands`` and the query observers included, reaches
every plugin, and ``check_pending`` catches a misnamed hook on every run.

What costs is an engine class's module and what it imports: for a csv
``arrowgate query``, the other four built-ins' are 12 modules and 17 ms by
``-X importtime`` (2026-12-01; docs/benchmarks.md, "Start-up"). So a
built-in plugin's ``arrowgate_engine_types`` is called only when its type is
looked up, or when every type is listed. A built-in's entry-point name is
the one type it registers (``csv``, ``duckdb``, ``ducklake``, ``adbc``,
``odbc``); an outside plugin's may differ, so outside plugins are asked for
their types at once, as are plugins handed to :func:`build_plugin_manager`,
and a type one of them registers under a built-in's name is still reported
as registered twice.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import pluggy

from gateway import hookspecs
from gateway.engine import Engine
from gateway.entry_points import entry_points
from gateway.errors import ConfigError

ENTRY_POINT_GROUP = "arrowgate"
#: The built-in engine plugins: entry-point name (the engine type) and module.
BUILT_IN = {name: f"gateway_{name}" for name in ("csv", "duckdb", "ducklake", "adbc", "odbc",
                                                   "spark")}
#: The commands each built-in plugin's ``arrowgate_register_commands`` adds or extends
#: (tests/test_plugin_commands.py holds them to what it does): a core command's parser
#: alone (:func:`gateway.cli.main.build_parser`) asks only those that extend that command.
BUILT_IN_COMMANDS = {"duckdb": ("engines",), "ducklake": ("lake", "lakebench")}
#: arrowgate's own layers that register through the same group, as plugins do, so that the
#: core does not import them (docs/architecture.md): always loaded, whatever
#: ``ARROWGATE_PLUGINS`` says (it limits engines and outside plugins), and registered as
#: ``arrowgate.NAME``, so that an outside plugin of the same entry-point name loads too
OWN_LAYERS = {"shadow": "gateway.shadow.plugin"}
hookimpl = pluggy.HookimplMarker("arrowgate")


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, knowing which plugins are asked for engine types only on demand."""

    def __init__(self) -> None:
        super().__init__("arrowgate")
        #: built-in plugins, each registering one engine type under its own name
        self.on_demand: set[str] = set()


def plugin_filter() -> set[str] | None:
    """The plugin names ``ARROWGATE_PLUGINS`` allows, or None for all."""
    raw = os.environ.get("ARROWGATE_PLUGINS")
    if raw is None or not raw.strip():
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def build_plugin_manager(extra_plugins: Iterable[ModuleType | object] = ()) -> PluginManager:
    """A plugin manager with every allowed entry-point plugin and ``extra_plugins`` loaded.

    Raises:
        ConfigError: a plugin failed to import, or a hookimpl names no hook.
    """
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    allowed = plugin_filter()
    found = set()
    for ep in entry_points(ENTRY_POINT_GROUP):
        found.add(ep.name)
        own = OWN_LAYERS.get(ep.name) == ep.value
        # (registered under a name of its own: an outside plugin named "shadow" loads beside it)
        name = f"arrowgate.{ep.name}" if own else ep.name
        if allowed is not None and ep.name not in allowed and not own:
            continue
        if pm.get_plugin(name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise ConfigError(f"plugin {ep.name!r} ({ep.value}) failed to import: {exc}",
                              hint="reinstall it, or leave it out with ARROWGATE_PLUGINS") from exc
        pm.register(plugin, name=name)
        if BUILT_IN.get(ep.name) == ep.value:  # (ep.dist would parse every METADATA file)
            pm.on_demand.add(ep.name)
    if allowed is not None and (missing := allowed - found):
        raise ConfigError("ARROWGATE_PLUGINS names plugins that are not installed: "
                          + ", ".join(sorted(missing)),
                          hint="installed: " + (", ".join(sorted(found)) or "none"))
    for plugin in extra_plugins:
        if not pm.is_registered(plugin):
            pm.register(plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise ConfigError(f"a plugin implements a hook that does not exist: {exc}") from exc
    return pm


def engine_types(pm: pluggy.PluginManager) -> Mapping[str, type[Engine]]:
    """Every registered engine class by type name, collected as they are looked up.

    Listing the names (iterating, ``len``) asks every plugin; looking one up
    asks the built-in plugin of that name and no other built-in.

    Raises:
        ConfigError: two plugins register the same type name, or a plugin
            returns something that is not an Engine subclass (raised by the
            look-up or listing that asks that plugin; outside plugins and
            those passed in are asked here).
    """
    return EngineTypes(pm)


class EngineTypes(Mapping[str, type[Engine]]):
    """The engine classes of a plugin manager's plugins; see :func:`engine_types`."""

    def __init__(self, pm: pluggy.PluginManager):
        self._pm = pm
        self._types: dict[str, type[Engine]] = {}
        self._later = set(getattr(pm, "on_demand", ()))
        self._asked: set[str] = set()
        self._lock = threading.RLock()  # Flight sessions look types up from their own threads
        self._ask(lambda name: name not in self._later)

    def __getitem__(self, type_name: str) -> type[Engine]:
        with self._lock:
            if type_name in self._later:
                self._ask(lambda name: name == type_name)
            return self._types[type_name]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            self._ask(lambda name: True)
            return iter(list(self._types))

    def __len__(self) -> int:
        with self._lock:
            self._ask(lambda name: True)
            return len(self._types)

    def _ask(self, wanted: Callable[[str], bool]) -> None:
        """Call ``arrowgate_engine_types`` on the plugins not yet asked whose name is ``wanted``.

        Plugins registered later are asked first, as pluggy calls them.
        """
        for impl in reversed(self._pm.hook.arrowgate_engine_types.get_hookimpls()):
            if not wanted(impl.plugin_name) or impl.plugin_name in self._asked:
                continue
            self._asked.add(impl.plugin_name)
            self._later.discard(impl.plugin_name)
            try:
                answer: Any = impl.function()
            except Exception as exc:
                raise ConfigError(f"plugin {impl.plugin_name!r} failed to register its engine "
                                  f"types: {type(exc).__name__}: {exc}",
                                  hint="reinstall it, or leave it out with ARROWGATE_PLUGINS"
                                  ) from exc
            for cls in answer or ():
                if not (isinstance(cls, type) and issubclass(cls, Engine) and cls.type_name):
                    raise ConfigError(f"a plugin registered {cls!r}, which is not an Engine "
                                      "subclass with a type_name")
                other = self._types.get(cls.type_name)
                if other is not None and other is not cls:
                    raise ConfigError(f"engine type {cls.type_name!r} is registered twice: "
                                      f"{_qualname(other)} and {_qualname(cls)}",
                                      hint="uninstall one, or limit plugins with "
                                      "ARROWGATE_PLUGINS")
                self._types[cls.type_name] = cls


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"
