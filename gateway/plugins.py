"""The plugin manager: finds plugins through entry points and collects engine types."""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pluggy

from gateway import hookspecs
from gateway.engine import Engine
from gateway.errors import ConfigError

ENTRY_POINT_GROUP = "arrowgate"
hookimpl = pluggy.HookimplMarker("arrowgate")


def plugin_filter() -> set[str] | None:
    """The plugin names ``ARROWGATE_PLUGINS`` allows, or None for all."""
    raw = os.environ.get("ARROWGATE_PLUGINS")
    if raw is None or not raw.strip():
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def build_plugin_manager(extra_plugins: Iterable[ModuleType | object] = ()) -> pluggy.PluginManager:
    """A plugin manager with every allowed entry-point plugin and ``extra_plugins`` loaded.

    Raises:
        ConfigError: a plugin failed to import, or a hookimpl names no hook.
    """
    pm = pluggy.PluginManager("arrowgate")
    pm.add_hookspecs(hookspecs)
    allowed = plugin_filter()
    found = set()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.add(ep.name)
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise ConfigError(f"plugin {ep.name!r} ({ep.value}) failed to import: {exc}",
                              hint="reinstall it, or leave it out with ARROWGATE_PLUGINS") from exc
        pm.register(plugin, name=ep.name)
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


def engine_types(pm: pluggy.PluginManager) -> dict[str, type[Engine]]:
    """Every registered engine class by type name.

    Raises:
        ConfigError: two plugins register the same type name, or a plugin
            returns something that is not an Engine subclass.
    """
    types: dict[str, type[Engine]] = {}
    for impl in reversed(pm.hook.arrowgate_engine_types.get_hookimpls()):
        try:
            answer: Any = impl.function()
        except Exception as exc:
            raise ConfigError(f"plugin {impl.plugin_name!r} failed to register its engine types: "
                              f"{type(exc).__name__}: {exc}",
                              hint="reinstall it, or leave it out with ARROWGATE_PLUGINS") from exc
        for cls in answer or ():
            if not (isinstance(cls, type) and issubclass(cls, Engine) and cls.type_name):
                raise ConfigError(f"a plugin registered {cls!r}, which is not an Engine "
                                  "subclass with a type_name")
            other = types.get(cls.type_name)
            if other is not None and other is not cls:
                raise ConfigError(f"engine type {cls.type_name!r} is registered twice: "
                                  f"{_qualname(other)} and {_qualname(cls)}",
                                  hint="uninstall one, or limit plugins with ARROWGATE_PLUGINS")
            types[cls.type_name] = cls
    return types


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"
