"""Subcommands of ``arrowgate``, one module each, and what they share."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.core import Gateway

EXIT_OK, EXIT_QUERY, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EPILOG = """\
exit codes: 0 ok, 1 query failed or output not written, 2 usage or
configuration error, 130 interrupted

The configuration is read from --config, else $ARROWGATE_CONFIG, else
./arrowgate.toml; without any, one in-memory DuckDB engine named "duckdb".
"""


class UsageError(Exception):
    """A mistake in the command line itself (exit 2)."""


def formatter(prog: str) -> argparse.HelpFormatter:
    # argparse makes a formatter for every argument added, and without a width each
    # imports shutil (with bz2, lzma and fnmatch: 3-4 ms of a one-row `arrowgate query`)
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32,
                                                width=terminal_columns() - 2)


class Parser(argparse.ArgumentParser):
    """argparse's parser, formatting with :func:`formatter` unless told otherwise; its
    subcommands' parsers are Parsers too (``add_subparsers`` makes its own class)."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", formatter)
        super().__init__(*args, **kwargs)


def terminal_columns(fallback: int = 80) -> int:
    """``shutil.get_terminal_size().columns``: $COLUMNS, else the terminal's, else ``fallback``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


def examples_epilog(examples: list[str]) -> str:
    """``example:`` or ``examples:``, then one indented line each (for an ``epilog``)."""
    return ("example" + ("s" if len(examples) > 1 else "") + ":\n"
            + "\n".join(f"  {e}" for e in examples))


def add_command(sub: Any, name: str, *, help: str, description: str,
                examples: list[str]) -> argparse.ArgumentParser:
    """Add one subcommand with the shared epilog and its examples."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, formatter_class=formatter,
        epilog=EPILOG + "\n" + examples_epilog(examples),
    )
    return parser


def add_action(sub: Any, command: str, name: str, *, help: str, description: str,
               summary: str, examples: list[str]) -> argparse.ArgumentParser:
    """Add an action (``arrowgate COMMAND NAME``) to a command another module added.

    This is how a plugin extends a core command (the duckdb plugin adds
    ``engines install``). ``summary``, a paragraph, joins the command's own
    description, and ``examples`` its examples; the action's ``--help`` shows
    them too.

    Raises:
        KeyError: no command is named ``command``.
    """
    parent: argparse.ArgumentParser = sub.choices[command]
    actions = next((a for a in parent._actions if isinstance(a, argparse._SubParsersAction)),
                   None) or parent.add_subparsers(dest="action", metavar="ACTION")
    parent.description = f"{parent.description}\n\n{summary}"
    parent.epilog = ((parent.epilog or "").replace("\nexample:\n", "\nexamples:\n")
                     + "".join(f"\n  {e}" for e in examples))
    child: argparse.ArgumentParser = actions.add_parser(
        name, help=help, description=description, formatter_class=formatter,
        epilog=examples_epilog(examples))
    return child


def open_gateway(args: argparse.Namespace) -> Gateway:
    """The gateway for ``--config`` (or ``$ARROWGATE_CONFIG``, ``./arrowgate.toml``, default),
    with the plugin manager :func:`gateway.cli.main.build_parser` built, when it did."""
    from gateway.config import find_config_path
    from gateway.core import Gateway

    return Gateway(find_config_path(args.config),
                   plugin_manager=getattr(args, "plugin_manager", None))


def print_rows(header: list[str], rows: list[list[str]]) -> None:
    """Print an aligned plain-text listing."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
