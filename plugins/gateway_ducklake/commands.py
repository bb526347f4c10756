"""The ducklake plugin's commands: ``arrowgate lake check ENGINE`` (the health of a
DuckLake engine's catalog database) and ``arrowgate lakebench`` (the catalog benchmark
across ducklake engines)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gateway.cli.commands import (
    EXIT_OK,
    EXIT_QUERY,
    UsageError,
    add_command,
    examples_epilog,
    formatter,
    print_rows,
)
from gateway.output.writers import write_text_file


def register(sub: Any) -> None:
    register_lake(sub)
    register_lakebench(sub)


def register_lake(sub: Any) -> None:
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
    check = actions.add_parser(
        "check", help="report on the catalog database of one engine", formatter_class=formatter,
        description="Report on the catalog database of one ducklake engine: format version, "
        "tables, snapshots, files waiting for cleanup, inlined data, server settings.",
        epilog=examples_epilog(["arrowgate lake check lake", "arrowgate lake check lake "
                                "--format json", "arrowgate lake check lake --strict"]))
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
        import json  # (every command registers this module's commands: json is 1 ms)

        json.dump(report.to_dict(), sys.stdout, indent=2)
        print()
    else:
        print(f"catalog of {report.engine}: {report.catalog}")
        print_rows(["check", "value", "status", "advice"],
                   [[f.name, f.value, f.status, f.advice] for f in report.findings])
    if report.warnings:
        print(f"{len(report.warnings)} warning(s)", file=sys.stderr)
    return EXIT_QUERY if args.strict and report.warnings else EXIT_OK


def register_lakebench(sub: Any) -> None:
    b = add_command(
        sub, "lakebench", help="compare DuckLake catalogs (PostgreSQL, SQLite, DuckDB, SQL Server)",
        description="Run the catalog benchmark (the shape of the SQL Server catalog's "
                    "bench-scale) on several ducklake engines: create tables, an inlined and a "
                    "Parquet insert into each, flush, compaction, partitioned commits and their "
                    "compaction, many commits into 3 tables, schema changes, reads after them "
                    "and at an old snapshot, re-attach. Every run uses an empty lake of the "
                    "engine's kind (a fresh metadata schema, or a fresh catalog file) and its "
                    "own worker process; engines alternate round by round; each phase shows "
                    "the median with its min-max range and the ratio to the first engine.",
        examples=["arrowgate lakebench --tables 100",
                  "arrowgate lakebench pg lite --tables 500 --rounds 3 --markdown out.md",
                  "arrowgate lakebench --tables 10 --rounds 1 --warmup 0 --json run.json"],
    )
    b.add_argument("engines", nargs="*", metavar="ENGINE",
                   help="ducklake engines to compare, the first is the baseline "
                        "(default: every ducklake engine in the configuration)")
    b.add_argument("--tables", type=int, default=100, metavar="N",
                   help="tables, spread over --schemas schemas (default 100)")
    b.add_argument("--schemas", type=int, default=10, metavar="N", help="schemas (default 10)")
    b.add_argument("--columns", type=int, default=40, metavar="N",
                   help="columns per table besides id (default 40)")
    b.add_argument("--rows", type=int, default=200, metavar="N",
                   help="rows in the Parquet insert into each table (default 200)")
    b.add_argument("--commits", type=int, metavar="N",
                   help="commits into the 3 deep tables (default: --tables)")
    b.add_argument("--schema-changes", type=int, default=100, metavar="N",
                   help="ALTER TABLEs on the evolving table (default 100)")
    b.add_argument("--rounds", type=int, default=5, metavar="N",
                   help="counted rounds per engine (default 5)")
    b.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="uncounted rounds first (default 1)")
    b.add_argument("--workdir", metavar="DIR",
                   help="where catalog files and data go (default: a temp folder, removed)")
    b.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    b.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    b.set_defaults(run=run_lakebench)


def run_lakebench(args: argparse.Namespace) -> int:
    from gateway.config import find_config_path, load_config
    from gateway.plugins import build_plugin_manager, engine_types

    for name in ("tables", "schemas", "columns", "rows", "rounds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.warmup < 0 or args.schema_changes < 0 or (args.commits or 0) < 0:
        raise UsageError("--warmup, --commits and --schema-changes cannot be negative")
    path = find_config_path(args.config)
    config = load_config(path, engine_types(build_plugin_manager()))
    lakes = [n for n, c in config.engines.items() if c.type == "ducklake"]
    chosen = args.engines or lakes
    if not chosen:
        raise UsageError("the configuration has no ducklake engine: add [engines.NAME] "
                         'sections with type = "ducklake" and catalog = "..."')
    for name in chosen:
        if name not in config.engines:
            raise UsageError(f"no engine named {name!r}; ducklake engines: "
                             + (", ".join(lakes) or "none"))
        if name not in lakes:
            raise UsageError(f"engine {name!r} is of type {config.engines[name].type}, "
                             "not ducklake")
    if len(set(chosen)) != len(chosen):
        raise UsageError("an engine is named twice")

    from gateway_ducklake.bench import run_bench
    from gateway_ducklake.phases import Shape

    shape = Shape(tables=args.tables, schemas=args.schemas, columns=args.columns,
                  rows=args.rows, commits=args.commits, schema_changes=args.schema_changes)
    sections = {n: {"type": "ducklake", **_raw_options(config.engines[n].options)}
                for n in chosen}
    report = run_bench(sections, shape, rounds=args.rounds, warmup=args.warmup,
                       workdir=Path(args.workdir) if args.workdir else None,
                       base_dir=config.base_dir,
                       progress=lambda line: print(f"lakebench: {line}", file=sys.stderr,
                                                   flush=True))
    header, body = report.table()
    print(f"lakebench: {shape.tables} tables x {shape.columns} columns, "
          f"{args.rounds} rounds (+{args.warmup} warm-up); seconds, median (min-max)")
    print_rows(header, body)
    if args.markdown:
        write_text_file(args.markdown, report.markdown())
    if args.json:
        import json

        write_text_file(args.json, json.dumps(report.to_dict(), indent=2) + "\n")
    diverged = report.diverged()
    if diverged:
        for phase, engines in diverged.items():
            print(f"lakebench: {phase}: {', '.join(engines)} answered differently from "
                  f"{report.engines[0]}; no time is reported for it", file=sys.stderr)
        return EXIT_QUERY
    return EXIT_OK


def _raw_options(options: dict[str, Any]) -> dict[str, Any]:
    """The engine's options without unset keys (a worker re-checks them)."""
    return {k: v for k, v in options.items() if v is not None}
