"""``arrowgate tui``: the terminal SQL console (needs the ``tui`` extra)."""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.commands import EXIT_OK, EXIT_QUERY, UsageError, add_command


def register(sub: Any) -> None:
    t = add_command(
        sub, "tui", help="a terminal SQL console: one query on two engines, side by side",
        description="Open the terminal SQL console. Each tab runs its statements on an engine "
                    "and, with a reference picked, shadows them there and shows the verdict "
                    "and both latencies. Needs the tui extra: pip install textual "
                    "textual-fastdatatable textual-textarea.",
        examples=[
            "arrowgate --config examples/quickstart/arrowgate.toml tui",
            "arrowgate tui --engine scan --reference duck",
            'arrowgate tui --headless --reference duck -c "SELECT count(*) FROM trips"',
        ],
    )
    t.add_argument("--engine", metavar="NAME", help="the engine new tabs run on")
    t.add_argument("--reference", metavar="NAME", help="the engine new tabs shadow on")
    t.add_argument("--headless", action="store_true",
                   help="run -c's SQL through the console without a screen and print its "
                   "panels; exit 1 when it fails or the reference's answer differs")
    t.add_argument("-c", "--command", dest="sql", metavar="SQL",
                   help="the SQL to run (with --headless)")
    t.add_argument("--width", type=int, default=120, metavar="N",
                   help="columns of the printed panels (with --headless; default 120)")
    t.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.headless and not args.sql:
        raise UsageError("--headless needs the SQL to run: -c \"SELECT ...\"")
    if args.sql and not args.headless:
        raise UsageError("-c runs only with --headless")
    from gateway.cli.startup import restore_collector

    restore_collector()
    try:
        from gateway.tui.app import ArrowgateApp
    except ImportError as exc:
        from gateway.errors import install_extra

        raise UsageError(f"the console needs the tui extra ({exc.name} is missing): "
                         + install_extra("tui")) from None
    from gateway.tui.console import ConsoleCore

    core = ConsoleCore.open(args.config)
    try:
        for name in (args.engine, args.reference):
            if name is not None:
                core.gw.engine_config(name)
        if args.headless:
            from gateway.tui.headless import run_headless

            ok = run_headless(core, args.sql, engine=args.engine,
                              reference=args.reference, width=args.width)
            return EXIT_OK if ok else EXIT_QUERY
        ArrowgateApp(core, engine=args.engine, reference=args.reference).run()
    finally:
        core.close()
    return EXIT_OK
