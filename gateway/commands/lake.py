"""``arrowgate lake check ENGINE``: the health of a DuckLake engine's catalog database."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gateway.commands import EXIT_OK, EXIT_QUERY, UsageError, add_command, print_rows


def register(sub: Any) -> None:
    lake = add_command(
        sub, "lake", help="inspect a DuckLake engine's catalog",
        description="Commands for ducklake engines. `check` connects to the catalog database "
                    "itself (PostgreSQL through ADBC, SQL Server through pyodbc, SQLite) and "
                    "reports the catalog's format version, tables, snapshots, files waiting for "
                    "cleanup, inlined data not yet flushed, and the server settings that matter "
                    "for a catalog.",
        examples=["arrowgate lake check lake", "arrowgate lake check lake --format json",
                  "arrowgate lake check lake --strict   # exit 1 on any warning"],
    )
    actions = lake.add_subparsers(dest="lake_command", metavar="ACTION")
    check = actions.add_parser("check", help="report on the catalog database of one engine")
    check.add_argument("engine", metavar="ENGINE", help="a configured engine of type ducklake")
    check.add_argument("--format", choices=("table", "json"), default="table",
                       help="output format (default: table)")
    check.add_argument("--strict", action="store_true",
                       help="exit 1 when any finding is a warning")
    check.add_argument("--odbc-driver", metavar="NAME",
                       help="the ODBC driver for a SQL Server catalog "
                            "(default: ODBC Driver 18 for SQL Server)")
    check.set_defaults(run=run_check)
    lake.set_defaults(run=_no_action)


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("name an action: arrowgate lake check ENGINE")


def run_check(args: argparse.Namespace) -> int:
    from gateway.config import find_config_path, load_config
    from gateway.plugins import build_plugin_manager, engine_types

    types = engine_types(build_plugin_manager())
    config = load_config(find_config_path(args.config), types)
    cfg = config.engines.get(args.engine)
    if cfg is None:
        raise UsageError(f"no engine named {args.engine!r}; configured: "
                         + ", ".join(config.engines))
    if cfg.type != "ducklake":
        lakes = [n for n, c in config.engines.items() if c.type == "ducklake"]
        raise UsageError(f"engine {args.engine!r} is of type {cfg.type}, not ducklake; "
                         + ("ducklake engines: " + ", ".join(lakes) if lakes
                            else "the configuration has no ducklake engine"))
    from gateway_ducklake.catalog import CatalogSpec
    from gateway_ducklake.health import check_catalog

    spec = CatalogSpec.parse(cfg.options["catalog"], key=f"engines.{cfg.name}.catalog",
                             base_dir=config.base_dir)
    report = check_catalog(spec, cfg.name, schema=cfg.options.get("metadata_schema"),
                           duckdb_version=types[cfg.type].describe_version(cfg.options),
                           odbc_driver=args.odbc_driver)
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2)
        print()
    else:
        print(f"catalog of {report.engine}: {report.catalog}")
        print_rows(["check", "value", "status", "advice"],
                   [[f.name, f.value, f.status, f.advice] for f in report.findings])
    if report.warnings:
        print(f"{len(report.warnings)} warning(s)", file=sys.stderr)
    return EXIT_QUERY if args.strict and report.warnings else EXIT_OK
