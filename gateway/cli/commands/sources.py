"""``arrowgate sources``: the named data sources every engine can query."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.cli.commands import EXIT_OK, EXIT_QUERY, add_command, open_gateway, print_rows


def register(sub: Any) -> None:
    s = add_command(
        sub, "sources", help="list the configured data sources (--check: can each be read)",
        description="List the named sources (files, globs, folders) mounted into every engine. "
        "--check also reads each\nsource's first row on every engine and reports, per engine, "
        "ok or why it cannot (exit 1 when\nany cannot); an engine that does not mount "
        "sources (adbc, odbc) shows '-'.",
        examples=["arrowgate --config examples/quickstart/arrowgate.toml sources",
                  "arrowgate --config examples/quickstart/arrowgate.toml sources --check"],
    )
    s.add_argument("--check", action="store_true",
                   help="read every source on every engine and report its state")
    s.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gateway.config import find_config_path, load_config
    from gateway.plugins import build_plugin_manager, engine_types

    config = load_config(find_config_path(args.config), engine_types(build_plugin_manager()))
    if not config.sources:
        print("no sources: add [sources.NAME] sections with path = ... to the config",
              file=sys.stderr)
        return EXIT_OK
    rows = [[s.name, s.format, s.path, str(len(s.files()))] for s in config.sources.values()]
    if not args.check:
        print_rows(["source", "format", "path", "files"], rows)
        return EXIT_OK
    failed = False
    with open_gateway(args) as gw:
        engines = list(config.engines)
        for row, name in zip(rows, config.sources, strict=True):
            for engine in engines:
                state = source_state(gw, engine, name)
                failed = failed or state not in ("ok", "-")
                row.append(state)
    print_rows(["source", "format", "path", "files", *engines], rows)
    return EXIT_QUERY if failed else EXIT_OK


def source_state(gw: Any, engine: str, source: str) -> str:
    """``ok`` when ``engine`` reads the source's first row, ``-`` when it does not mount
    sources, else the first line of why it cannot."""
    from gateway.config import quote_identifier
    from gateway.errors import GatewayError

    try:
        gw.execute(f"SELECT * FROM {quote_identifier(source)} LIMIT 1", engine=engine,
                   shadow=False).to_arrow()
    except GatewayError as exc:
        if exc.kind == "unknown_object":
            return "-"
        return f"error: {exc.message.splitlines()[0]}"
    return "ok"
