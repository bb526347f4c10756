"""The ``arrowgate`` command: argument parsing, dispatch and exit codes.

Each subcommand lives in its own module under ``gateway.commands`` and is
listed in :data:`COMMANDS`; a module exposes ``register(subparsers)``, which
adds its parser and sets ``run`` to a function taking the parsed arguments
and returning an exit code. Command modules import heavy libraries inside
``run``, so ``arrowgate --help`` stays fast.

Exit codes: 0 success; 1 a query failed (or, for the shadow and bench
commands, answers diverged or latency regressed); 2 a usage or configuration
error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from gateway.commands import EPILOG, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, formatter
from gateway.errors import ConfigError, GatewayError

#: The subcommand modules, in the order ``--help`` lists them.
COMMANDS = ["query", "engines", "sources", "lake", "lakebench", "data", "shadow", "bench", "tui"]


def build_parser() -> argparse.ArgumentParser:
    from gateway import __version__

    parser = argparse.ArgumentParser(
        prog="arrowgate",
        description="A multi-engine SQL gateway that returns Apache Arrow.",
        epilog=EPILOG + '\nexample:\n  arrowgate query "SELECT 42 AS answer"',
        formatter_class=formatter,
    )
    parser.add_argument("--config", metavar="FILE", help="the arrowgate.toml to use")
    parser.add_argument("--version", action="version", version=f"arrowgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"gateway.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"arrowgate {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except GatewayError as exc:
        print(f"{exc.kind} error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader (head, less) went away: not an error, and nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def entry() -> NoReturn:
    """The ``arrowgate`` console script: :func:`main`, tuned for a short-lived process.

    Two costs that a one-shot command gets nothing back for are skipped; on a
    one-row ``arrowgate query`` here they were a quarter of its time:

    - the cyclic garbage collector running dozens of times while sqlglot and
      pyarrow import their thousands of classes (22-39 ms): the first
      generation's threshold is raised, so it still runs on long commands;
    - the interpreter's teardown of every imported module (60-100 ms, and
      130-250 ms with numpy loaded), which frees memory the exit frees anyway.
      Exit handlers still run, and output is flushed; while a thread other than
      this one is alive (a background shadow run), the exit is the normal one.
    """
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    code = main()
    if threading.active_count() > 1:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # finalizers, temporary folders, logging: what exit would run
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader left, or the stream is closed
            pass
    os._exit(code)


if __name__ == "__main__":
    entry()
