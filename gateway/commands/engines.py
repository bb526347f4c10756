"""``arrowgate engines``: the configured engines, without starting them; ``engines install``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from gateway.commands import EXIT_OK, UsageError, add_command, print_rows

_INSTALL_SPEC = re.compile(r"\A(?P<type>[a-z_]+)==(?P<version>\S+)\Z")


def register(sub: Any) -> None:
    e = add_command(
        sub, "engines", help="list the configured engines, or install a DuckDB release",
        description="List the configured engines: name, type, version, how and where it runs, "
        "the extensions it can load, capabilities and options (secrets masked). Listing "
        "neither starts an engine nor imports its driver.\n\n"
        "`arrowgate engines install duckdb==VERSION` installs a DuckDB release and the "
        "extensions built for it (ducklake, postgres_scanner, sqlite_scanner where they "
        "exist) into the arrowgate cache ($ARROWGATE_HOME, else the XDG cache folder); an "
        "engine with version = \"VERSION\" also installs it on first use.",
        examples=["arrowgate engines", "arrowgate engines --types",
                  "arrowgate engines install duckdb==1.5.5",
                  "arrowgate engines install duckdb==1.4.4 --extensions ducklake"],
    )
    e.add_argument("--types", action="store_true",
                   help="list the installed engine plugins instead (loads none of them)")
    actions = e.add_subparsers(dest="action", metavar="ACTION")
    inst = actions.add_parser("install", help="install a DuckDB release into the cache",
                              description="Install a DuckDB release (pip install --target) and "
                              "its extension packages into the arrowgate cache.")
    inst.add_argument("spec", metavar="duckdb==VERSION", help="what to install, e.g. duckdb==1.5.5")
    inst.add_argument("--extensions", metavar="NAMES",
                      help="comma list of extensions (default: every one that exists for "
                      "that version); 'none' for none")
    e.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "action", None) == "install":
        return install(args)
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


def install(args: argparse.Namespace) -> int:
    match = _INSTALL_SPEC.match(args.spec.strip())
    if match is None or match.group("type") != "duckdb":
        raise UsageError(f"cannot install {args.spec!r}: write duckdb==VERSION, "
                         "e.g. duckdb==1.5.5")
    from gateway_duckdb.install import available_extensions, ensure_installed

    version = match.group("version")
    if args.extensions is None:
        extensions = available_extensions(version)
    elif args.extensions.strip().lower() == "none":
        extensions = []
    else:
        extensions = [e.strip() for e in args.extensions.split(",") if e.strip()]
    inst = ensure_installed(version, extensions, progress=sys.stderr.isatty())
    print_rows(["version", "where", "library", "extensions"],
               [[inst.version, str(inst.root), inst.library.name,
                 ", ".join(inst.extensions) or "none"]])
    return EXIT_OK
