"""``arrowgate query``: run one statement and print its answer."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from gateway.commands import EXIT_OK, UsageError, add_command, open_gateway
from gateway.errors import not_utf8
from gateway.output import BINARY_FORMATS, FORMATS
from gateway.startup import LazyPattern


def register(sub: Any) -> None:
    q = add_command(
        sub, "query", help="run one SQL statement and print its answer",
        description="Run one SQL statement on an engine and print the answer.",
        examples=[
            'arrowgate query "SELECT 42 AS answer"',
            "arrowgate query --format csv -f report.sql > report.csv",
            'echo "SELECT count(*) FROM trips" | arrowgate query --engine duck',
            'arrowgate query --format parquet --output out.parquet "SELECT * FROM trips"',
            'arrowgate query --shadow duck_old "SELECT count(*) FROM trips"',
            'arrowgate query -e pg "SELECT * FROM trips WHERE id = ? AND zip = ?" -p 42 '
            '-p zip:text=02139',
        ],
    )
    q.add_argument("sql", nargs="?",
                   help="the SQL; read from -f FILE, or stdin when absent or '-'")
    q.add_argument("-f", "--file", metavar="FILE", help="read the SQL from FILE ('-': stdin)")
    q.add_argument("-e", "--engine", metavar="NAME",
                   help="the engine to run on (default: the config's default_engine)")
    q.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: table)")
    q.add_argument("-o", "--output", metavar="FILE", help="write the answer to FILE")
    q.add_argument("--max-rows", type=int, default=40, metavar="N",
                   help="rows the table format shows (0: all; default 40)")
    q.add_argument("-p", "--param", action="append", default=None, metavar="VALUE",
                   type=parameter,
                   help="a value for the next ? placeholder (repeatable): 42 is an integer, "
                   "4.2 a decimal, true/false a boolean, NULL a null, anything else text; "
                   "NAME:TYPE=VALUE gives the type (" + ", ".join(PARAMETER_TYPES)
                   + "), e.g. zip:text=02139")
    q.add_argument("--shadow", metavar="ENGINE",
                   help="also run the SQL on ENGINE and print the verdict and latency ratio")
    q.set_defaults(run=run)


_BOOLEANS = {"true": True, "false": False, "t": True, "f": False, "1": True, "0": False}
#: The types ``-p NAME:TYPE=VALUE`` names, each with what reads its value.
PARAMETER_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int, "decimal": Decimal, "float": float, "bool": lambda v: _BOOLEANS[v.lower()],
    "text": str, "date": date.fromisoformat, "timestamp": datetime.fromisoformat,
    "null": lambda v: None,
}
#: (compiled when a -p is read: most queries have none)
_EXPLICIT = LazyPattern(r"\A(?P<name>[A-Za-z_]\w*)?:(?P<type>[a-z]+)=(?P<value>.*)\Z", re.S)
_INTEGER = LazyPattern(r"\A[-+]?[0-9]+\Z")
_DECIMAL = LazyPattern(r"\A[-+]?([0-9]+\.[0-9]*|\.[0-9]+)\Z")


def parameter(text: str) -> Any:
    """A ``-p`` value, typed: see the option's help.

    Raises:
        argparse.ArgumentTypeError: an unknown type, or a value that is not of its type.
    """
    explicit = _EXPLICIT.match(text)
    if explicit is not None:
        kind, value = explicit.group("type"), explicit.group("value")
        if kind not in PARAMETER_TYPES:
            raise argparse.ArgumentTypeError(
                f"unknown type {kind!r} in {text!r}: use one of " + ", ".join(PARAMETER_TYPES))
        try:
            return PARAMETER_TYPES[kind](value)
        except (ValueError, KeyError, ArithmeticError):
            raise argparse.ArgumentTypeError(f"{value!r} is not of type {kind} (in {text!r})") from None
    if _INTEGER.match(text):
        return int(text)
    if _DECIMAL.match(text):
        return Decimal(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.upper() == "NULL":
        return None
    return text


def read_sql(args: argparse.Namespace) -> str:
    """The SQL from the argument, ``-f FILE`` or stdin."""
    if args.sql is not None and args.file is not None:
        raise UsageError("give the SQL either as an argument or with -f, not both")
    if args.sql == "-" or args.file == "-":  # stdin, spelled out
        args.sql = args.file = None
        if sys.stdin.isatty():
            raise UsageError("'-' reads the SQL from standard input, which is a terminal here")
    if args.file is not None:
        try:
            with open(args.file, "rb") as fh:
                sql = _decoded(fh.read(), args.file)
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    elif args.sql is not None:
        sql = args.sql
    elif not sys.stdin.isatty():
        sql = _decoded(sys.stdin.buffer.read(), "standard input")
    else:
        raise UsageError("no SQL given: pass it as an argument, with -f FILE, or on stdin")
    if not sql.strip():
        raise UsageError("the SQL is empty")
    return sql


def _decoded(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: {not_utf8(data, exc)}") from None


def run(args: argparse.Namespace) -> int:
    from gateway.output import output_file, write
    from gateway.startup import one_statement

    sql = read_sql(args)
    if args.format in BINARY_FORMATS and args.output is None and sys.stdout.isatty():
        raise UsageError(f"--format {args.format} writes binary data: use --output FILE "
                         "or redirect stdout")
    with open_gateway(args) as gw:
        alone = args.shadow is None and gw.shadow_settings is None
        with one_statement() if alone else contextlib.nullcontext():
            result = gw.execute(sql, engine=args.engine, parameters=args.param,
                                shadow=args.shadow)
        if args.output is None:
            write(result.reader(), args.format, sys.stdout.buffer, max_rows=args.max_rows)
            sys.stdout.buffer.flush()
        else:
            with output_file(args.output) as out:
                write(result.reader(), args.format, out, max_rows=args.max_rows)
        if args.format == "table" or args.output is not None:
            print(summary_line(result), file=sys.stderr)
        elif notes := note_parts(result):  # stdout holds the answer; the notes still count
            print("note: " + "; ".join(notes), file=sys.stderr)
        if result.shadow is not None:
            # under the answer; on stderr when stdout carries a machine format
            machine = args.output is None and args.format != "table"
            print(result.shadow.summary(), file=sys.stderr if machine else sys.stdout)
    return EXIT_OK


def summary_line(result: Any) -> str:
    """``3 rows from duck in 12.5 ms`` plus fallback and skipped-row notes."""
    noun = "row" if result.rows == 1 else "rows"
    line = f"{result.rows} {noun} from {result.engine} in {result.elapsed * 1000:.1f} ms"
    if "fallback_reason" in result.notes:
        line += f" (fallback: {result.notes['fallback_reason']})"
    if skipped := _skipped(result):
        line += f"; {skipped}"
    return line


def note_parts(result: Any) -> list[str]:
    """What the answer alone does not say: who answered instead, rows left out."""
    parts = []
    if "fallback_reason" in result.notes:
        parts.append(f"answered by {result.engine} (fallback: "
                     f"{result.notes['fallback_reason']})")
    if skipped := _skipped(result):
        parts.append(skipped)
    return parts


def _skipped(result: Any) -> str:
    n = result.notes.get("skipped_rows")
    return f"{n} malformed row{'' if n == 1 else 's'} skipped" if n else ""
