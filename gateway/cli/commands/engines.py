"""``arrowgate engines``: the configured engines, without starting them.

Plugins add actions to it (the duckdb plugin's ``engines install``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.cli.commands import EXIT_OK, add_command, print_rows


def register(sub: Any) -> None:
    e = add_command(
        sub, "engines", help="list the configured engines, or install a DuckDB release",
        description="List the configured engines: name, type, version, how and where it runs, "
        "the extensions it can load, capabilities and options (secrets masked). Listing "
        "neither starts an engine nor imports its driver.",
        examples=["arrowgate engines", "arrowgate engines --types"],
    )
    e.add_argument("--types", action="store_true",
                   help="list the installed engine plugins instead (loads none of them)")
    e.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.types:
        from importlib.metadata import entry_points

        from gateway.plugins import ENTRY_POINT_GROUP

        rows = [[ep.name, ep.value, ep.dist.name if ep.dist else ""]
                for ep in entry_points(group=ENTRY_POINT_GROUP)]
        print_rows(["plugin", "module", "distribution"], rows)
        return EXIT_OK
    from gateway.config import find_config_path, load_config
    from gateway.plugins import build_plugin_manager, engine_types

    types = engine_types(build_plugin_manager())
    config = load_config(find_config_path(args.config), types)
    rows = []
    for name, cfg in config.engines.items():
        cls = types[cfg.type]
        options = ", ".join(f"{k}={v}" for k, v in cfg.printable_options().items()
                            if v not in (None, {}, [], False, ":memory:", "in_process"))
        # engine types that can say where they run (DuckDB releases, builds, CLIs) do so
        describe = getattr(cls, "describe_location", None)
        location = describe(cfg.options) if callable(describe) else {}
        rows.append([name + (" *" if name == config.default_engine else ""), cfg.type,
                     cls.describe_version(cfg.options) or "", location.get("runs", ""),
                     location.get("where", ""), location.get("extensions", ""),
                     ",".join(cls.capabilities(cfg.options)), options])
    print_rows(["engine", "type", "version", "runs", "where", "extensions", "capabilities",
                "options"], rows)
    print("* default engine", file=sys.stderr)
    return EXIT_OK
