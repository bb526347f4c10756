"""``arrowgate engines install duckdb==VERSION``: the duckdb plugin's action on ``engines``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.cli.commands import EXIT_OK, UsageError, add_action, print_rows
from gateway.cli.startup import LazyPattern

_INSTALL_SPEC = LazyPattern(r"\A(?P<type>[a-z_]+)==(?P<version>\S+)\Z")


def register(sub: Any) -> None:
    inst = add_action(
        sub, "engines", "install", help="install a DuckDB release into the cache",
        description="Install a DuckDB release (pip install --target) and its extension "
        "packages into the arrowgate cache.",
        summary="`arrowgate engines install duckdb==VERSION` installs a DuckDB release and the "
        "extensions built for it (ducklake, postgres_scanner, sqlite_scanner where they "
        "exist) into the arrowgate cache ($ARROWGATE_HOME, else the XDG cache folder); an "
        "engine with version = \"VERSION\" also installs it on first use.",
        examples=["arrowgate engines install duckdb==1.5.5",
                  "arrowgate engines install duckdb==1.4.4 --extensions ducklake"],
    )
    inst.add_argument("spec", metavar="duckdb==VERSION", help="what to install, e.g. duckdb==1.5.5")
    inst.add_argument("--extensions", metavar="NAMES",
                      help="comma list of extensions (default: every one that exists for "
                      "that version); 'none' for none")
    inst.set_defaults(run=install)


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
