"""``arrowgate query``: run SQL statements and print their answers."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from gateway.cli.commands import EXIT_OK, UsageError, add_command, open_gateway
from gateway.cli.startup import LazyPattern
from gateway.errors import not_utf8
from gateway.output.writers import BINARY_FORMATS, EXTENSIONS, FORMATS, format_of


def register(sub: Any) -> None:
    q = add_command(
        sub, "query", help="run SQL statements and print their answers",
        description="Run SQL on an engine and print the answer. Several statements (separated "
        "by ';', or\nseveral -c) run in order in one session, each answer printed; the first "
        "that fails\nstops the run with its exit code.\n\n"
        "Without --format, the extension of --output picks the format: "
        + ", ".join(f"{e} {f}" for e, f in EXTENSIONS.items()) + "\n(arrow: the Arrow IPC "
        "file format; arrows: the IPC stream); a file without extension gets the table.",
        examples=[
            'arrowgate query "SELECT 42 AS answer"',
            'arrowgate query -c "SET threads = 1" -c "SELECT 42 AS answer"',
            "arrowgate query --format csv -f report.sql > report.csv",
            'echo "SELECT count(*) FROM trips" | arrowgate query --engine duck',
            'arrowgate query -o out.parquet "SELECT * FROM trips"',
            'arrowgate query --shadow duck_old "SELECT count(*) FROM trips"',
            'arrowgate query -e pg "SELECT * FROM trips WHERE id = ? AND zip = ?" -p 42 '
            '-p zip:text=02139',
        ],
    )
    q.add_argument("sql", nargs="?",
                   help="the SQL; read from -c, -f FILE, or stdin when absent or '-'")
    q.add_argument("-c", "--command", action="append", dest="commands", metavar="SQL",
                   help="the SQL, as duckdb -c and psql -c take it (repeatable: each runs in "
                   "turn, in one session)")
    q.add_argument("-f", "--file", metavar="FILE", help="read the SQL from FILE ('-': stdin)")
    q.add_argument("-e", "--engine", metavar="NAME",
                   help="the engine to run on (default: the config's default_engine)")
    q.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from the extension of --output, else table)")
    q.add_argument("-o", "--output", metavar="FILE", help="write the answer to FILE")
    q.add_argument("--nullvalue", metavar="TEXT", default="",
                   help="what CSV writes for NULL (default: nothing, as DuckDB's CLI)")
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
    """The SQL from the argument, ``-c``, ``-f FILE`` or stdin."""
    given = [what for what, value in (("an argument", args.sql), ("-c", args.commands),
                                      ("-f", args.file)) if value is not None]
    if len(given) > 1:
        raise UsageError(f"give the SQL one way, not with {' and '.join(given)}")
    if args.commands is not None:
        sql = ";\n".join(args.commands)
        if not any(c.strip() for c in args.commands):
            raise UsageError("the SQL is empty")
        return sql
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
        raise UsageError("no SQL given: pass it as an argument, with -c, -f FILE, or on stdin")
    if not sql.strip():
        raise UsageError("the SQL is empty")
    return sql


def statements_of(sql: str) -> list[str]:
    """The statements of ``sql``, in order; the text itself when it holds one (a ``;``
    only at its end), without importing sqlglot."""
    if ";" not in sql.strip().rstrip(";"):
        return [sql]
    from gateway.sql.corpus import split_statements

    return split_statements(sql) or [sql]


def output_format(args: argparse.Namespace) -> str:
    """``--format``, else the format the extension of ``--output`` names, else ``table``.

    Raises:
        UsageError: the two disagree, or the extension names no format and no
            ``--format`` says which to write.
    """
    if args.output is None:
        return args.format or "table"
    named = format_of(args.output)
    extension = os.path.splitext(args.output)[1]
    if args.format is None:
        if named is None and extension:
            raise UsageError(f"cannot tell the format of {args.output} from its extension: "
                             "name the file " + ", ".join(EXTENSIONS)
                             + ", or give --format (" + ", ".join(FORMATS) + ")")
        return named or "table"
    if named is not None and named != args.format:
        raise UsageError(f"--format {args.format} contradicts {args.output}, whose extension "
                         f"means {named}: drop --format, or name the file for {args.format}")
    return str(args.format)


def _decoded(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: {not_utf8(data, exc)}") from None


def run(args: argparse.Namespace) -> int:
    from gateway.output.writers import output_file

    statements = statements_of(read_sql(args))
    fmt = output_format(args)
    if fmt in BINARY_FORMATS and args.output is None and sys.stdout.isatty():
        raise UsageError(f"--format {fmt} writes binary data: use --output FILE "
                         "or redirect stdout")
    if args.param is not None and len(statements) > 1:
        raise UsageError(f"-p gives values to one statement, and the SQL holds "
                         f"{len(statements)}: run the one with placeholders alone")
    with open_gateway(args) as gw, \
            (output_file(args.output) if args.output is not None
             else contextlib.nullcontext(sys.stdout.buffer)) as out:
        if len(statements) == 1:
            _one(gw, statements[0], args, fmt, out)
        else:
            from gateway.sql.kinds import state_needed

            with gw.session(args.engine) as session:
                for i, sql in enumerate(statements, 1):
                    result = session.execute(sql, shadow=args.shadow)
                    _show(result, args, fmt, out, several=True, last=i == len(statements),
                          setting=state_needed(sql) is not None)
    return EXIT_OK


def _one(gw: Any, sql: str, args: argparse.Namespace, fmt: str, out: Any) -> None:
    result = gw.execute(sql, engine=args.engine, parameters=args.param, shadow=args.shadow)
    _show(result, args, fmt, out, several=False, last=True)


def _show(result: Any, args: argparse.Namespace, fmt: str, out: Any, *, several: bool,
          last: bool, setting: bool = False) -> None:
    """Write one statement's answer to ``out``, and what the answer does not say to stderr.

    Of several statements, one that answers no columns, or a ``setting`` (``SET``,
    ``USE``, ``BEGIN``: session state) that answers no rows, writes nothing (as psql and
    DuckDB's CLI print nothing for them), and a binary format (one answer a file) holds
    the last statement's answer alone."""
    import pyarrow as pa

    from gateway.output.writers import write

    reader = result.reader()
    if several and setting:  # a setting's answer is a few rows at most: read it whole
        table = reader.read_all()
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    if several and (not reader.schema.names or (setting and not table.num_rows)
                    or (fmt in BINARY_FORMATS and not last)):
        for _ in reader:  # read to the end: its rows are counted, its notes complete
            pass
    else:
        write(reader, fmt, out, max_rows=args.max_rows, null_text=args.nullvalue)
        out.flush()
    if fmt == "table" or args.output is not None:
        print(summary_line(result), file=sys.stderr)
    elif notes := note_parts(result):  # stdout holds the answer; the notes still count
        print("note: " + "; ".join(notes), file=sys.stderr)
    if result.shadow is not None:
        # under the answer; on stderr when stdout carries a machine format
        machine = args.output is None and fmt != "table"
        print(result.shadow.summary(), file=sys.stderr if machine else sys.stdout)


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
