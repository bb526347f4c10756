"""``arrowgate sources``: the named data sources every engine can query."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.commands import EXIT_OK, add_command, print_rows


def register(sub: Any) -> None:
    s = add_command(
        sub, "sources", help="list the configured data sources",
        description="List the named sources (files, globs, folders) mounted into every engine.",
        examples=["arrowgate --config examples/quickstart/arrowgate.toml sources"],
    )
    s.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gateway.config import find_config_path, load_config
    from gateway.plugins import build_plugin_manager, engine_types

    config = load_config(find_config_path(args.config), engine_types(build_plugin_manager()))
    rows = [[s.name, s.format, s.path, str(len(s.files()))] for s in config.sources.values()]
    print_rows(["source", "format", "path", "files"], rows)
    if not rows:
        print("no sources: add [sources.NAME] sections with path = ... to the config",
              file=sys.stderr)
    return EXIT_OK
