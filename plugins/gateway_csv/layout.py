"""What a CSV file looks like: dialect, header, column names and types (sniffed or configured).

The sniffer follows DuckDB's ``read_csv_auto`` so that the csv engine and its
DuckDB shadow see the same table: it reads a sample of rows from the head of
the file (through pread, never touching the memory map), picks the delimiter
whose field count is most consistent, types every column by trying BOOLEAN,
BIGINT, DOUBLE, DATE, TIMESTAMP, TIMESTAMP WITH TIME ZONE in that order
(widening on conflict, VARCHAR last), and takes the first row as a header when
one of its values does not fit its column's type.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import ConfigError, QueryError

# Kinds shared with _scanner.c, then HUGE, which the scanner reads as text and
# Arrow converts to decimal128(38, 0): integers past 64 bits, DuckDB's HUGEINT
STR, INT, FLOAT, TS, BOOL, DATE, TSTZ, HUGE = range(8)

KIND_NAMES = {STR: "VARCHAR", INT: "BIGINT", FLOAT: "DOUBLE", TS: "TIMESTAMP", BOOL: "BOOLEAN",
              DATE: "DATE", TSTZ: "TIMESTAMP WITH TIME ZONE", HUGE: "HUGEINT"}
#: SQL type names accepted in a source's ``columns`` override.
TYPE_KINDS = {
    "VARCHAR": STR, "TEXT": STR, "STRING": STR, "CHAR": STR,
    "BIGINT": INT, "INTEGER": INT, "INT": INT, "INT8": INT, "INT4": INT, "LONG": INT,
    "SMALLINT": INT, "TINYINT": INT, "HUGEINT": HUGE, "INT128": HUGE,
    "DOUBLE": FLOAT, "FLOAT": FLOAT, "REAL": FLOAT, "FLOAT8": FLOAT, "NUMERIC": FLOAT,
    "DECIMAL": FLOAT,
    "TIMESTAMP": TS, "DATETIME": TS,
    "TIMESTAMPTZ": TSTZ, "TIMESTAMP WITH TIME ZONE": TSTZ,
    "DATE": DATE, "BOOLEAN": BOOL, "BOOL": BOOL,
}

SAMPLE_ROWS = 20_480
SAMPLE_BYTES = 512 << 10
DELIMITERS = (",", "|", ";", "\t")

# Each pattern matches a value in at most one way (no two quantifiers compete
# for the same characters), and _column_kind joins them per line in an atomic
# group under a possessive star, so a failing sample is rejected in one pass:
# no backtracking across lines, time linear in the sample.
_INT = r"[+-]?\d+"
_FLOAT = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:nan|infinity|inf)"
_DATE = r"\d{4}-\d\d-\d\d"
_TIME = r"[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?"
_PATTERNS = [
    (BOOL, re.compile(r"(?:true|false)", re.I)),
    (INT, re.compile(_INT)),
    (FLOAT, re.compile(_FLOAT, re.I)),
    (DATE, re.compile(_DATE)),
    (TS, re.compile(_DATE + r"(?:" + _TIME + r")?")),
    (TSTZ, re.compile(_DATE + _TIME + r"(?:Z|[+-]\d\d(?::?\d\d)?)?")),
]
_LEADING_ZERO = re.compile(r"(?m)^[ \t]*[+-]?0\d")


@dataclass
class Layout:
    """How to read one CSV file.

    Attributes:
        names: column names, in file order.
        kinds: scanner kinds (STR, INT, ...), one per column.
        delimiter, quote, escape: single characters (quote/escape may be "").
        header: whether the first row names the columns.
        data_start: byte offset of the first data row.
        nulls: strings read as NULL.
        skip_bad: skip malformed rows (``on_error = "skip"``) instead of failing.
        timestamp_format: strftime format of timestamp columns (read as text by the
            scanner, converted afterwards), or None.
    """

    names: list[str]
    kinds: list[int]
    delimiter: str = ","
    quote: str = '"'
    escape: str = '"'
    header: bool = True
    data_start: int = 0
    nulls: tuple[str, ...] = ("",)
    skip_bad: bool = False
    timestamp_format: str | None = None
    lower_names: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lower_names = {n.lower(): i for i, n in enumerate(self.names)}

    @property
    def ncols(self) -> int:
        return len(self.names)

    def column_index(self, name: str) -> int | None:
        return self.lower_names.get(name.lower())

    def dialect(self) -> tuple[Any, ...]:
        """The dialect tuple _scanner.scan takes."""
        return (ord(self.delimiter), ord(self.quote) if self.quote else -1,
                ord(self.escape) if self.escape else -1, self.ncols, self.skip_bad,
                tuple(n.encode() for n in self.nulls))

    def scan_kind(self, index: int) -> int:
        """The kind the scanner reads a column as (text when a custom format converts it later)."""
        kind = self.kinds[index]
        if kind == HUGE or (self.timestamp_format and kind in (TS, TSTZ)):
            return STR
        return kind


def _split_lines(text: str, delimiter: str, quote: str, escape: str) -> list[list[str | None]]:
    """Rows of a sample; a field written as "" stays "" (None marks an unquoted empty)."""
    kwargs: dict[str, Any] = {"delimiter": delimiter, "strict": False}
    if quote:
        kwargs["quotechar"] = quote
        if escape and escape != quote:
            kwargs["escapechar"] = escape
            kwargs["doublequote"] = False
    else:
        kwargs["quoting"] = csv.QUOTE_NONE
    rows: list[list[str | None]] = []
    for row in csv.reader(io.StringIO(text, newline=""), **kwargs):
        if row:
            rows.append(list(row))
        if len(rows) > SAMPLE_ROWS:
            break
    return rows


def _column_kind(values: list[str]) -> int:
    """The narrowest kind every value fits (checked with one regex over the joined sample)."""
    if not values:
        return STR
    joined = "\n".join(values)
    if joined.count("\n") != len(values) - 1:
        return STR  # a value holds a newline
    for kind, pattern in _PATTERNS:
        line = f"(?>[ \t]*+(?:{pattern.pattern})[ \t]*+)"
        if not re.fullmatch(f"(?:{line}\n)*+{line}", joined, pattern.flags):
            continue
        if kind in (INT, FLOAT) and _LEADING_ZERO.search(joined):
            return STR
        if kind == INT and re.search(r"\d{19}", joined):
            return _wide_int_kind(values)
        return kind
    return STR


def _wide_int_kind(values: list[str]) -> int:
    """BIGINT, HUGEINT past 64 bits, DOUBLE past 38 digits (decimal128(38, 0)'s limit).

    DuckDB keeps integers up to 2**127 exact as HUGEINT; Arrow's exact type for
    them is decimal128(38, 0), so the 39-digit integers DuckDB still holds as
    HUGEINT are DOUBLE here (documented in docs/csv.md).
    """
    numbers = [int(v) for v in values]
    if all(-(2**63) <= n < 2**63 for n in numbers):
        return INT
    return HUGE if all(abs(n) < 10**38 for n in numbers) else FLOAT


def sniff(head: bytes, options: dict[str, Any], *, path: str, complete: bool) -> Layout:
    """Work out a file's layout from its first bytes and the source's overrides.

    Args:
        head: the first bytes of the file (up to :data:`SAMPLE_BYTES`).
        options: the source's CSV options (delimiter, quote, header, columns, ...).
        path: the file, for messages.
        complete: ``head`` is the whole file.

    Raises:
        QueryError: the file is empty or not UTF-8.
        ConfigError: an override names an unknown column or type.
    """
    bom = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    if not complete:
        cut = head.rfind(b"\n")
        head = head[:cut + 1] if cut > 0 else head
    # invalid UTF-8 is reported by the scanner, with its line and column
    text = head[bom:].decode("utf-8", errors="replace")
    if not text.strip():
        raise QueryError(f"{path}: the file is empty, so it has no columns to query",
                         hint="write a header line, or point the source at another file")
    quote = options.get("quote", '"')
    escape = options.get("escape", quote)
    for key, value in (("delimiter", options.get("delimiter")), ("quote", quote),
                       ("escape", escape)):
        if value is not None and len(value) > 1:
            raise ConfigError(f"the {key} must be one character, not {value!r}", key=key)
    nulls = options.get("null", "")
    null_set = (nulls,) if isinstance(nulls, str) else tuple(nulls)

    delimiter = options.get("delimiter")
    if delimiter is None:
        best: tuple[float, str] | None = None
        probe = text[:65536]
        for cand in DELIMITERS:
            rows = _split_lines(probe, cand, quote, escape)[:200]
            if not rows:
                continue
            widths = [len(r) for r in rows]
            common = max(set(widths), key=widths.count)
            score = (widths.count(common) / len(widths)) * (common > 1) + (common > 1) * 0.001 * common
            if best is None or score > best[0]:
                best = (score, cand)
        delimiter = best[1] if best else ","
    rows = _split_lines(text, delimiter, quote, escape)
    if not rows:
        raise QueryError(f"{path}: the file is empty, so it has no columns to query")
    ncols = max(len(rows[0]), 1)
    first, body = rows[0], [r for r in rows[1:] if len(r) == ncols]
    kinds = [_column_kind([v for v in col if v not in null_set])
             for col in (list(zip(*body, strict=True)) if body else [()] * ncols)]

    header = options.get("header")
    if header is None:
        header = True
        if body:
            header = any(kind != STR and first[i] not in null_set
                         and _column_kind([first[i]]) not in _compatible(kind)
                         for i, kind in enumerate(kinds))
            header = header or all(k == STR for k in kinds)
    if header:
        names = _unique_names([(v or "").strip() for v in first], ncols)
    else:
        width = len(str(ncols - 1))
        names = [f"column{i:0{width}d}" for i in range(ncols)]
        if body or len(rows) == 1:
            kinds = [_column_kind([r[i] for r in rows if len(r) == ncols and r[i] not in null_set])
                     for i in range(ncols)]
    if header and len(rows) == 1:
        kinds = [STR] * ncols

    overrides = options.get("columns") or {}
    lower = {n.lower(): i for i, n in enumerate(names)}
    for col, type_name in overrides.items():
        if col.lower() not in lower:
            raise ConfigError(f"the columns override names {col!r}, which {path} does not have",
                              key=f"columns.{col}", hint="columns: " + ", ".join(names))
        kind = TYPE_KINDS.get(str(type_name).upper().strip())
        if kind is None:
            raise ConfigError(f"the csv engine cannot read a column as {type_name!r}",
                              key=f"columns.{col}",
                              hint="types: " + ", ".join(sorted(set(KIND_NAMES.values()))))
        kinds[lower[col.lower()]] = kind

    data_start = bom + (_first_row_length(head[bom:], delimiter, quote) if header else 0)
    return Layout(names=names, kinds=kinds, delimiter=delimiter, quote=quote or "",
                  escape=escape or "", header=bool(header), data_start=data_start,
                  nulls=null_set, skip_bad=options.get("on_error") == "skip",
                  timestamp_format=options.get("timestamp_format"))


def _compatible(kind: int) -> tuple[int, ...]:
    return {FLOAT: (INT, FLOAT, HUGE), HUGE: (INT, HUGE), TS: (DATE, TS), TSTZ: (DATE, TS, TSTZ)}.get(kind, (kind,))


def _unique_names(raw: list[str], ncols: int) -> list[str]:
    width = len(str(ncols - 1))
    names: list[str] = []
    seen: set[str] = set()
    for i, name in enumerate(raw):
        name = name or f"column{i:0{width}d}"
        base, n = name, 0
        while name.lower() in seen:
            n += 1
            name = f"{base}_{n}"
        seen.add(name.lower())
        names.append(name)
    return names


def _first_row_length(data: bytes, delimiter: str, quote: str) -> int:
    """Bytes in the first row, including its newline; quotes may hide newlines."""
    q = quote.encode() if quote else b""
    in_quote = False
    for i, byte in enumerate(data):
        ch = bytes((byte,))
        if q and ch == q:
            in_quote = not in_quote
        elif ch == b"\n" and not in_quote:
            return i + 1
    return len(data)
