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
import functools
import io
import re
from collections.abc import Callable, Sequence
from typing import Any

from gateway.cli.startup import LazyPattern
from gateway.errors import ConfigError, QueryError
from gateway.records import Record
from gateway_csv import dialect

# Kinds shared with _scanner.c, then kinds the scanner reads as text and Arrow
# converts: HUGE (integers past 64 bits, DuckDB's HUGEINT, as decimal128(38, 0))
# and TIME (time64[us])
STR, INT, FLOAT, TS, BOOL, DATE, TSTZ, HUGE, TIME = range(9)

KIND_NAMES = {STR: "VARCHAR", INT: "BIGINT", FLOAT: "DOUBLE", TS: "TIMESTAMP", BOOL: "BOOLEAN",
              DATE: "DATE", TSTZ: "TIMESTAMP WITH TIME ZONE", HUGE: "HUGEINT", TIME: "TIME"}
#: SQL type names accepted in a source's ``columns`` override.
TYPE_KINDS = {
    "VARCHAR": STR, "TEXT": STR, "STRING": STR, "CHAR": STR,
    "BIGINT": INT, "INTEGER": INT, "INT": INT, "INT8": INT, "INT4": INT, "LONG": INT,
    "SMALLINT": INT, "TINYINT": INT, "HUGEINT": HUGE, "INT128": HUGE,
    "DOUBLE": FLOAT, "FLOAT": FLOAT, "REAL": FLOAT, "FLOAT8": FLOAT, "NUMERIC": FLOAT,
    "DECIMAL": FLOAT,
    "TIMESTAMP": TS, "DATETIME": TS,
    "TIMESTAMPTZ": TSTZ, "TIMESTAMP WITH TIME ZONE": TSTZ,
    "DATE": DATE, "BOOLEAN": BOOL, "BOOL": BOOL, "TIME": TIME,
}

#: DuckDB's sample: its column types are sniffed on this many rows from the header on
SAMPLE_ROWS = 20_480
#: the head sniffed: the dialect and the types on up to SAMPLE_ROWS rows of it
DIALECT_BYTES = 8 << 20
#: the most of a file's head read to hold SAMPLE_ROWS rows (rows of 3 KiB on average);
#: past it the csv engine refuses the file rather than type it on fewer rows than DuckDB
SAMPLE_BYTES = 64 << 20
DELIMITERS = (",", "|", ";", "\t")
QUOTES = ('"', "'")
#: DuckDB's date format templates (its sniffer's format_template_candidates), with the
#: first value's separator for "-"; DuckDB tries them from the last one backwards
DATE_FORMATS = ("%m-%d-%Y", "%m-%d-%y", "%d-%m-%Y", "%d-%m-%y", "%Y-%m-%d", "%y-%m-%d")
#: DuckDB's timestamp format templates, the same way
TIMESTAMP_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%m-%d-%Y %I:%M:%S %p", "%m-%d-%y %I:%M:%S %p",
                     "%d-%m-%Y %H:%M:%S", "%d-%m-%y %H:%M:%S", "%Y-%m-%d %H:%M:%S",
                     "%y-%m-%d %H:%M:%S")
_DATE_SEPARATOR = LazyPattern(r"[ \t]*[0-9]+([^0-9]+)[0-9]+")

# The shapes the sniffer types values by, in the order it tries them; the sniffer
# itself asks _scanner.shapes, their C form (shapes_by_regex is the reference it is
# tested against). A leading + keeps a value text, as in DuckDB's sniffer.
_INT = r"-?[0-9]+"
_FLOAT = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|-?(?:nan|infinity|inf)"
_DATE = r"[0-9]{4}-[0-9][0-9]-[0-9][0-9]"
_TIME = r"[ T][0-9][0-9]:[0-9][0-9](?::[0-9][0-9](?:\.[0-9]+)?)?"
_PATTERNS = [
    (BOOL, LazyPattern(r"(?:true|false|t|f|yes|no)", re.I | re.ASCII)),  # not y/n, as DuckDB sniffs
    (INT, LazyPattern(_INT)),
    (FLOAT, LazyPattern(_FLOAT, re.I | re.ASCII)),
    (TIME, LazyPattern(r"[0-9][0-9]:[0-9][0-9](?::[0-9][0-9](?:\.[0-9]+)?)?")),
    (DATE, LazyPattern(_DATE)),
    (TS, LazyPattern(_DATE + r"(?:" + _TIME + r")?")),
    (TSTZ, LazyPattern(_DATE + _TIME + r"(?:Z|[+-][0-9][0-9](?::?[0-9][0-9])?)?")),
]
#: what some value of a sample is (_scanner.shapes' bits past the kinds'): an integer
#: or decimal with a leading zero (text to DuckDB), an integer of 19 digits or more,
#: a value ending in blanks once one was no integer (:func:`_blank_after_double`),
#: an infinity; and what every value is: a digit first (after blanks), as every
#: shape tried past the kinds' is
SH_LEADING_ZERO, SH_WIDE, SH_BLANK_AFTER_DOUBLE, SH_INFINITY, SH_DIGIT_FIRST = \
    (1 << b for b in range(16, 21))
#: ...and some value that starts as a hexadecimal or binary integer does (``0x1F``, ``0b11``)
SH_RADIX = 1 << 21
_DIGIT_FIRST = LazyPattern(r"[ \t]*[0-9]")
#: the start of a line (a value of a joined sample) that is no integer (blanks around one
#: are allowed)
_NOT_INTEGER_LINE = LazyPattern(r"(?m)^(?![ \t]*-?[0-9]+[ \t]*$)")
_BLANK_END = LazyPattern(r"[ \t](?=\n|\Z)")
_INFINITY = LazyPattern(r"[ \t]*[-+]?inf(?:inity)?[ \t]*", re.I | re.ASCII)
# what DuckDB's TIME parser may take (3:45, 1:2:3, 24:00:00; not 12:0)
_LOOSE_TIME = LazyPattern(r"(?>[ \t]*+[0-9]+:(?:[0-9]+:[0-9]+(?:\.[0-9]*)?|[0-9][0-9])[ \t]*+)")
# an ISO timestamp and a zone name (UTC, EST, America/New_York), which DuckDB reads
_NAMED_ZONE = LazyPattern(r"(?>[ \t]*+[0-9]{4}-[0-9][0-9]-[0-9][0-9][ T][0-9][0-9]:[0-9][0-9](?::[0-9][0-9](?:\.[0-9]+)?)? "
                         r"[A-Za-z][A-Za-z0-9_+/-]*+[ \t]*+)")
_NOT_BLANK = LazyPattern(r"[^ \r\n]")
_COMMENT_LINE = LazyPattern(r"(?m)^#[^\n]*(?:\n|$)")
_LEADING_ZERO = LazyPattern(r"(?m)^[ \t]*[+-]?0[0-9]")
_OTHER_DATE = LazyPattern(r"(?>[ \t]*+[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4}[ \t]*+)")
_OTHER_TIMESTAMP = LazyPattern(r"(?>[ \t]*+[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4} [0-9]{1,2}:[0-9][0-9]:[0-9][0-9]"
                              r"(?: [AaPp][Mm])?[ \t]*+)")


class Layout(Record):
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
        formats: column index -> the strptime format of a DATE or TIMESTAMP column
            the sniffer found written another way than ISO (read as text, converted
            afterwards).
        skipped_lines: rows before the header that the sniffer skipped (a preamble).
        comment: lines starting with it are skipped ("" for none).
        trailing: every data row ends in one more, empty, field, which is not a column.
        cut_comments: comments follow values on some lines (``1;3 # note``): the
            file is read through a copy cut at the comment character.
        padded_quotes: blanks sit around quoted fields (``1, "a" ,2``): the scanner
            skips them (the types are sniffed on a head without them).
        lower_names: each name in lower case -> its column (worked out from ``names``).
    """

    __slots__ = ("names", "kinds", "delimiter", "quote", "escape", "header", "data_start", "nulls",
                 "skip_bad", "timestamp_format", "formats", "skipped_lines", "comment", "trailing",
                 "cut_comments", "padded_quotes", "lower_names")

    def __init__(self, names: list[str], kinds: list[int], delimiter: str = ",",
                 quote: str = '"', escape: str = '"', header: bool = True, data_start: int = 0,
                 nulls: tuple[str, ...] = ("",), skip_bad: bool = False,
                 timestamp_format: str | None = None, formats: dict[int, str] | None = None,
                 skipped_lines: int = 0, comment: str = "", trailing: bool = False,
                 cut_comments: bool = False, padded_quotes: bool = False) -> None:
        self.names, self.kinds, self.delimiter, self.quote, self.escape = \
            names, kinds, delimiter, quote, escape
        self.header, self.data_start, self.nulls, self.skip_bad = header, data_start, nulls, skip_bad
        self.timestamp_format = timestamp_format
        self.formats: dict[int, str] = {} if formats is None else formats
        self.skipped_lines, self.comment, self.trailing = skipped_lines, comment, trailing
        self.cut_comments, self.padded_quotes = cut_comments, padded_quotes
        self.lower_names = {n.lower(): i for i, n in enumerate(names)}

    @property
    def ncols(self) -> int:
        return len(self.names)

    def column_index(self, name: str) -> int | None:
        return self.lower_names.get(name.lower())

    def dialect(self) -> tuple[Any, ...]:
        """The dialect tuple _scanner.scan takes."""
        return (ord(self.delimiter), ord(self.quote) if self.quote else -1,
                ord(self.escape) if self.escape else -1, self.ncols + self.trailing,
                self.skip_bad, tuple(n.encode() for n in self.nulls),
                ord(self.comment) if self.comment else -1, self.trailing, self.padded_quotes)

    def scan_kind(self, index: int) -> int:
        """The kind the scanner reads a column as (text when a custom format converts it later)."""
        kind = self.kinds[index]
        if kind in (HUGE, TIME) or index in self.formats or \
                (self.timestamp_format and kind in (TS, TSTZ)):
            return STR
        return kind


def _split_lines(text: str, delimiter: str, quote: str, escape: str,
                 limit: int = SAMPLE_ROWS) -> list[list[str | None]]:
    """Up to ``limit`` rows of a sample; a field written as "" stays "" (None marks an
    unquoted empty)."""
    plain = _split_plain(text, delimiter, quote, escape, limit)
    if plain is not None:
        return plain
    kwargs = reader_options(delimiter, quote, escape)
    rows: list[list[str | None]] = []
    if csv.field_size_limit() < DIALECT_BYTES:
        csv.field_size_limit(DIALECT_BYTES)  # a field may fill the sample (default: 128 KiB)
    reader = csv.reader(io.StringIO(text, newline=""), **kwargs)
    try:
        for row in reader:
            if row:
                rows.append(list(row))
            if len(rows) >= limit:
                break
    except csv.Error:
        pass  # a field past the size limit: sniff on the rows before it
    return rows


def reader_options(delimiter: str, quote: str, escape: str) -> dict[str, Any]:
    """csv.reader's options for a dialect (no quoting where ``quote`` is empty)."""
    kwargs: dict[str, Any] = {"delimiter": delimiter, "strict": False}
    if quote:
        kwargs["quotechar"] = quote
        if escape and escape != quote:
            kwargs["escapechar"] = escape
            kwargs["doublequote"] = False
    else:
        kwargs["quoting"] = csv.QUOTE_NONE
    return kwargs


def _split_plain(text: str, delimiter: str, quote: str, escape: str,
                 limit: int) -> list[list[str | None]] | None:
    """:func:`_split_lines` by ``str.split`` where no character of the text makes
    ``csv.reader`` do more than that (no quote, escape, NUL or lone CR in it, no field
    past its size limit), or None. Five times faster than the reader: typing the
    sample is most of a cold one-query process."""
    if not _is_plain(text, quote, escape):
        return None
    lines = text.split("\n", limit)
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    rest = lines.pop() if len(lines) > limit else None
    if len(text) > DIALECT_BYTES and max(map(len, lines), default=0) > DIALECT_BYTES:
        return None  # the reader stops at a field past its size limit
    rows: list[list[str | None]] = [line.split(delimiter) for line in lines if line]
    if rest is not None and len(rows) < limit:
        return None  # blank lines took rows' places: the rest holds more rows
    return rows


#: fed to the reader after a line: a row that took it in ran past the line
_PAST_THE_LINE = "\x1e\x1farrowgate\x1f\x1e"
#: the delimiter of a sample rewritten without its quotes (:func:`unquoted`)
UNQUOTED_DELIMITER = "\x1f"


def unquoted(text: str, delimiter: str, quote: str, escape: str,
             data: bytes | memoryview | None = None, limit: int = -1) -> bytes | None:
    """:func:`unquoted_by_reader`'s text as UTF-8, written in C
    (:func:`gateway_csv._scanner.unquote`) where the delimiter, quote and escape are
    ASCII, however many lines hold a quote; the reader's form where C leaves it (a
    field past the reader's size limit in a quoted line, or characters not ASCII).
    ``data``: the text's UTF-8, where it is at hand. ``limit``: C may stop at the line
    end of the text's limit-th row (as :meth:`_Sample.plain` counts rows), the rows
    a sample of that many is read from.

    TPC-H's lineitem, a quoted comment ending every row, went to the reader and its
    rows to :meth:`_Sample.of_rows`: 70-90 ms of the 110 ms its head's sniff took,
    which now takes 18-19 ms in all (docs/benchmarks.md)."""
    if len(text) > DIALECT_BYTES:
        return None
    if len(delimiter) == 1 and all(c.isascii() for c in (delimiter, quote, escape)):
        from gateway_csv import _scanner

        found = _scanner.unquote(text.encode() if data is None else data, ord(delimiter),
                                 ord(quote) if quote else -1, ord(escape) if escape else -1,
                                 limit)
        if found is not None:
            return found
    rewritten = unquoted_by_reader(text, delimiter, quote, escape)
    return None if rewritten is None else rewritten.encode()


def unquoted_by_reader(text: str, delimiter: str, quote: str, escape: str,
                       budget: bool = True) -> str | None:
    """``text`` with the rows the reader reads in it (:func:`_split_lines`), written
    without quotes or escapes: fields separated by :data:`UNQUOTED_DELIMITER`, rows by
    the same line ends, so that :meth:`_Sample.plain` types it in C. None where it
    cannot be: more than a tenth of the lines hold a quote or an escape, one of them
    holds a field still open at its end (the reader then reads on into the next line),
    a line is read as one empty field (``""``: a blank line to the plain split) or as a
    field holding a line end (an escaped CR), or the text holds the new delimiter, a NUL
    or a lone CR.

    The lines without a quote or escape are split only at delimiters; each of the others
    is read by the reader alone, followed by a line it cannot hold
    (:data:`_PAST_THE_LINE`): a field open at the line's end takes that line in.

    A single quoted value (``"Midtown, East"``) sent the taxi file's 8 MiB head to the
    reader and its rows to :meth:`_Sample.of_rows`, a Python object per field: 343 ms
    of sniffing, against 13 ms without it (docs/benchmarks.md).

    ``budget``: give up past a tenth of the lines quoted (the reader reads each
    alone); False only as the reference of the C form."""
    if UNQUOTED_DELIMITER in text or "\x00" in text or _PAST_THE_LINE in text or \
            ("\r" in text and text.count("\r") != text.count("\r\n")):
        return None
    if len(text) > DIALECT_BYTES:
        return None
    # the lines holding a quote or an escape, as (start, end) in text, found by search
    spans: dict[int, int] = {}
    most = text.count("\n") // 10 + 1  # quoted lines
    for c in {quote, escape} - {""}:
        at = text.find(c)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            spans[start] = end
            if budget and len(spans) > most:
                return None
            at = text.find(c, end)
    kwargs = reader_options(delimiter, quote, escape)
    out, done = [], 0
    replaced = text.replace(delimiter, UNQUOTED_DELIMITER)  # one character for one
    for start in sorted(spans):
        end = spans[start]
        line = text[start:end]
        try:
            read = list(csv.reader([line + "\n", _PAST_THE_LINE], **kwargs))
        except csv.Error:
            return None
        if len(read) != 2 or read[1] != [_PAST_THE_LINE] or read[0] == [""] or \
                any("\r" in field or "\n" in field for field in read[0]):
            # a field open at the line's end, a row of one empty field, or a line end
            # kept in a field (an escaped CR)
            return None
        out += [replaced[done:start], UNQUOTED_DELIMITER.join(read[0]),
                "\r" if line.endswith("\r") else ""]
        done = end
    out.append(replaced[done:])
    return "".join(out)


def _is_plain(text: str, quote: str, escape: str) -> bool:
    """Whether csv.reader would only split ``text`` at delimiters and line ends: no
    quote, escape or NUL in it, and a CR only before a LF (the reader ends a line at
    a lone CR too)."""
    return not ((quote and quote in text) or (escape and escape in text) or "\x00" in text
                or ("\r" in text and text.count("\r") != text.count("\r\n")))


def _column_kind(values: list[str]) -> int:
    return _column_type(values)[0]


def _column_type(values: list[str]) -> tuple[int, str | None]:
    """(the narrowest kind every value fits, its strptime format when not ISO)."""
    return _column_type_of(_Column("\n".join(values), len(values), values))


def _column_type_of(col: _Column) -> tuple[int, str | None]:
    """:func:`_column_type` of a column's values that are not NULL, read as text (its
    ``joined`` or ``values()``) only where a rare case needs them.

    The kinds are tried in _PATTERNS' order on the shapes every value has
    (:func:`gateway_csv._scanner.shapes`, :func:`shapes_by_regex` in C); dates
    and times are checked with the scanner's own parser too, so an impossible
    date (2024-02-30) keeps its column text, as in DuckDB.
    """
    shapes = col.shapes()
    if not col.count or shapes is None:
        return STR, None  # no values, or one holds a newline
    values_of = col.values
    for kind, _ in _PATTERNS:
        if not shapes >> kind & 1:
            continue
        if kind in (INT, FLOAT) and shapes & SH_LEADING_ZERO:
            return STR, None
        if kind == FLOAT and shapes & SH_BLANK_AFTER_DOUBLE:
            return STR, None
        if kind == INT and shapes & SH_WIDE:
            return _wide_int_kind(values_of()), None
        if kind == TIME and not _all_parse(kind, values_of()):
            continue
        return kind, None
    # every shape below starts with a digit (after blanks)
    joined = col.joined if shapes & SH_DIGIT_FIRST else ""
    for kind, shape, formats in ((DATE, _OTHER_DATE, DATE_FORMATS),
                                 (TS, _OTHER_TIMESTAMP, TIMESTAMP_FORMATS)):
        if joined and re.fullmatch(f"(?:{shape.pattern}\n)*+{shape.pattern}", joined):
            fmt = duckdb_date_format(formats, values_of())
            if fmt is not None:
                return kind, fmt
    if joined and re.fullmatch(f"(?:{_LOOSE_TIME.pattern}\n)*+{_LOOSE_TIME.pattern}", joined):
        from gateway.errors import Unsupported

        raise Unsupported(f"the csv engine reads times only as HH:MM[:SS[.ffffff]] (up to "
                          f"23:59:59.999999), not {next(v for v in values_of() if not _all_parse(TIME, [v]))!r}, "
                          "which DuckDB's looser TIME parser may read; the duckdb engine reads "
                          "it", engines=("duckdb",))
    if joined and re.fullmatch(f"(?:{_NAMED_ZONE.pattern}\n)*+{_NAMED_ZONE.pattern}", joined):
        from gateway.errors import Unsupported

        raise Unsupported(f"the csv engine does not read timestamps with a named time zone "
                          f"({values_of()[0].strip()!r}), which DuckDB reads as TIMESTAMP (UTC) or "
                          "TIMESTAMP WITH TIME ZONE; the duckdb engine reads them",
                          engines=("duckdb",))
    if not shapes & SH_INFINITY:
        return STR, None
    values = values_of()
    finite = [v for v in values if not _INFINITY.fullmatch(v)]
    if finite and _column_type(finite)[0] in (DATE, TS, TSTZ, TIME):
        from gateway.errors import Unsupported

        raise Unsupported("the csv engine does not read a column of dates or times that "
                          f"holds infinity ({next(v for v in values if v not in finite)!r}), "
                          "which DuckDB's sniffer may take as a DATE; the duckdb engine "
                          "reads it", engines=("duckdb",))
    return STR, None


def shapes_by_regex(values: list[str]) -> int:
    """What :func:`gateway_csv._scanner.shapes` computes, by _PATTERNS and the
    scanner's parsers one value at a time: a bit for each kind whose pattern every
    value matches (blanks around it allowed, but not around a BOOLEAN), DATE,
    TIMESTAMP and TIMESTAMP WITH TIME ZONE only when every value parses too, the
    SH_ flags, SH_DIGIT_FIRST when every value has it. The reference the C form is
    tested against."""
    bits = 0
    for kind, pattern in _PATTERNS:
        blanks = "" if kind == BOOL else "[ \t]*+"
        line = re.compile(f"(?>{blanks}(?:{pattern.pattern}){blanks})", pattern.flags)
        if all(line.fullmatch(v) for v in values) and \
                (kind not in (DATE, TS, TSTZ) or _all_parse(kind, values)):
            bits |= 1 << kind
    joined = "\n".join(values)
    for flag, found in ((SH_LEADING_ZERO, _LEADING_ZERO.search(joined)),
                        (SH_WIDE, re.search(r"[0-9]{19}", joined)),
                        (SH_BLANK_AFTER_DOUBLE, _blank_after_double(values)),
                        (SH_INFINITY, any(_INFINITY.fullmatch(v) for v in values)),
                        (SH_RADIX, _RADIX_START.search(joined))):
        bits |= flag if found else 0
    if all(_DIGIT_FIRST.match(v) for v in values):
        bits |= SH_DIGIT_FIRST
    return bits


def _blank_after_double(values: list[str]) -> bool:
    """Whether DuckDB's sniffer tests a value ending in blanks against DOUBLE, whose
    strict cast refuses them (``2.5 ``), so that the column stays text. The sniffer
    goes value by value and tests a value against DOUBLE only once an earlier one
    (or this one) has failed its integer types: ``1 `` before ``2.5`` is an integer
    then, and the column is DOUBLE."""
    joined = "\n".join(values)
    found = _NOT_INTEGER_LINE.search(joined)
    return found is not None and _BLANK_END.search(joined, found.start()) is not None


def _first_not_integer(values: list[str]) -> int | None:
    """The index of the first of ``values`` that is no integer, or None."""
    return _first_not_integer_of("\n".join(values)) if values else None


def _first_not_integer_of(joined: str) -> int | None:
    found = _NOT_INTEGER_LINE.search(joined)
    return None if found is None else joined.count("\n", 0, found.start())


def _refuse_blanks_in_refined_chunk(column: list[str | None], values: list[str],
                                    null_set: tuple[str, ...]) -> None:
    """Past its first chunk of rows DuckDB's sniffer casts whole chunks of 2,048 rows: an
    integer ending in blanks in the chunk whose first non-integer value moves the column
    to DOUBLE fails that strict cast too (the column stays text), unlike in the first
    chunk, which goes value by value (:func:`_blank_after_double`). ``values`` are the
    column's values that are not NULL.

    Raises:
        Unsupported: such a chunk may hold blanks before that value (row positions
            here may differ from DuckDB's by blank or comment lines).
    """
    _refuse_blanks_of(_Column("\n".join(values), len(values), column), null_set)


def _refuse_blanks_of(col: _Column, null_set: tuple[str, ...]) -> None:
    """:func:`_refuse_blanks_in_refined_chunk` on a sample's column."""
    if col.integer_rows is not None:  # found by C (_Sample.plain)
        first, blank = col.integer_rows
        if first < dialect.CHUNK_ROWS - 2 or blank < max(0, first - dialect.CHUNK_ROWS):
            return
        _refuse_blanks()
    nth = _first_not_integer_of(col.joined) if col.count else None
    if nth is None:
        return
    if nth < dialect.CHUNK_ROWS - 2 and col.count == col.rows:
        return  # no NULLs: the value's row is its index
    column = col.cells()
    first = -1
    for first, v in enumerate(column):  # noqa: B007 - its row, counting NULLs
        if v not in null_set and v is not None:
            if nth == 0:
                break
            nth -= 1
    if first < dialect.CHUNK_ROWS - 2:
        return
    if any(v not in null_set and v is not None and v[-1:] in (" ", "\t")
           for v in column[max(0, first - dialect.CHUNK_ROWS):first]):
        _refuse_blanks()


def _refuse_blanks() -> None:
    from gateway.errors import Unsupported

    raise Unsupported("the csv engine does not read a column whose integers end in "
                      "blanks near its first decimal value past row 2,046: DuckDB's "
                      "sniffer may then keep the column as text; the duckdb engine "
                      "reads it", engines=("duckdb",))


class _Column:
    """One column of a sniffed sample: its values that are not NULL joined by newlines
    (``count`` of them), and its ``rows`` cells, NULLs too, in row order: given, or
    joined by newlines (the C sample's form), split only when asked for.

    A column of the C sample (:meth:`_Sample.plain`) comes typed instead: its
    ``shapes()`` and ``integer_rows`` found in the same pass, and ``load`` to read
    its text, called only where a rare case needs it.

    Attributes:
        integer_rows: (the row of the first value that is no integer, NULL rows
            counted; the last row before it whose value ends in a blank, or -1),
            where C found them (the first is -1 when every value is an integer),
            else None.
    """

    __slots__ = ("_cells", "_joined", "_load", "_shapes", "count", "integer_rows", "rows")

    def __init__(self, joined: str | None, count: int, cells: Sequence[str | None] | str | None,
                 *, rows: int = 0, shapes: int | None = None,
                 integer_rows: tuple[int, int] | None = None,
                 load: Callable[[], tuple[str, Sequence[str | None] | str]] | None = None) -> None:
        self._joined, self.count, self._cells, self._load = joined, count, cells, load
        self._shapes, self.integer_rows = shapes, integer_rows
        if isinstance(cells, str):
            self.rows = cells.count("\n") + 1
        else:
            self.rows = rows if cells is None else len(cells)

    def _read(self) -> None:
        assert self._load is not None
        self._joined, self._cells = self._load()
        self._load = None

    @property
    def joined(self) -> str:
        if self._joined is None:
            self._read()
        assert self._joined is not None
        return self._joined

    def values(self) -> list[str]:
        return self.joined.split("\n") if self.count else []

    def cells(self) -> Sequence[str | None]:
        if self._cells is None:
            self._read()
        if isinstance(self._cells, str):
            self._cells = self._cells.split("\n")
        assert self._cells is not None
        return self._cells

    def shapes(self) -> int | None:
        """:func:`gateway_csv._scanner.shapes` of the values (0 for none), or None when
        one of them holds a newline (no shape has one)."""
        if self._shapes is None:
            if not self.count:
                return 0
            joined = self.joined
            if joined.count("\n") != self.count - 1:
                return None
            from gateway_csv import _scanner

            self._shapes = _scanner.shapes(joined.encode())
        return self._shapes

    def with_first(self, value: str, null_set: tuple[str, ...],
                   typed: tuple[int, int, int, int] | None = None) -> _Column:
        """The column with a row before the others (``typed``: its shapes, count and
        integer rows, found by C)."""
        if typed is not None:
            shapes, count, not_int, blank = typed
            return _Column(None, count, None, rows=self.rows + 1, shapes=shapes,
                           integer_rows=(not_int, blank),
                           load=lambda: self._text_with_first(value, null_set))
        cells = [value, *self.cells()] if self.rows else [value]
        if value in null_set:
            return _Column(self.joined, self.count, cells)
        return _Column(value + "\n" + self.joined if self.count else value, self.count + 1,
                       cells)

    def _text_with_first(self, value: str, null_set: tuple[str, ...]) -> tuple[str, Sequence[str | None]]:
        col = self.with_first(value, null_set)
        return col.joined, col.cells()


class _Sample(Record):
    """The rows the sniffer types: the first (a header or not), how many rows there are
    (the first included), and the columns of the rows after it that have ``ncols``
    fields (``body`` of them); ``first_typed``: the C sample's (shapes, count,
    not_int_row, blank_row) of each column with the first row before the others
    (:func:`gateway_csv._scanner.sample_shapes`)."""

    __slots__ = ("first", "rows", "body", "columns", "first_typed")

    def __init__(self, first: list[str | None], rows: int, body: int, columns: list[_Column],
                 first_typed: list[tuple[int, int, int, int]] | None = None) -> None:
        self.first, self.rows, self.body, self.columns = first, rows, body, columns
        self.first_typed = first_typed

    @classmethod
    def of_rows(cls, rows: list[list[str | None]], ncols: int,
                null_set: tuple[str, ...]) -> _Sample:
        body = [r for r in rows[1:] if len(r) == ncols]
        cells = list(zip(*body, strict=True)) if body else [() for _ in range(ncols)]
        columns = []
        for column in cells:
            values = list(filter(None, column)) if null_set == ("",) else \
                [v for v in column if v not in null_set]
            columns.append(_Column("\n".join(values), len(values), column))  # type: ignore[arg-type]
        return cls(rows[0], len(rows), len(body), columns)

    @classmethod
    def plain(cls, text: str | None, delimiter: str, quote: str, escape: str, limit: int, skip: int,
              ncols: int, trailing: bool, null_set: tuple[str, ...],
              data: bytes | memoryview | None = None) -> _Sample | None:
        """The sample typed by C (:func:`gateway_csv._scanner.sample_shapes`) where
        :func:`_split_plain` would read it: no quote, escape, NUL or lone CR in the
        text, an ASCII delimiter, up to 65,536 columns (the C side's bound). Its
        columns come with their shapes, their text read
        (:func:`gateway_csv._scanner.sample_columns`, the same sample) only when
        asked for. ``data``: the text's UTF-8, where it is at hand (``text`` None: only
        ``data``, known to hold no quote, escape, NUL or lone CR: :func:`unquoted`'s).
        None where that does not hold, or no row is left."""
        if len(delimiter.encode()) != 1 or not 1 <= ncols <= 1 << 16 or \
                (text is not None and (len(text) > DIALECT_BYTES or
                                       not _is_plain(text, quote, escape))):
            return None
        from gateway_csv import _scanner

        if data is None:
            assert text is not None
            data = text.encode()
        nulls = tuple(n.encode() for n in null_set)
        args = (ord(delimiter), ncols, skip, limit, trailing, nulls)
        first, rows, body, columns, with_first = _scanner.sample_shapes(data, *args)
        if first is None:
            return None
        texts: list[tuple[str, str | list[str | None]]] = []

        def text_of(index: int) -> tuple[str, str | list[str | None]]:
            if not texts:
                texts.extend((joined.decode(), cells.decode() if body else [])
                             for joined, _, cells in _scanner.sample_columns(data, *args)[3])
            return texts[index]

        return cls([f.decode() for f in first], rows - skip, body,
                   [_Column(None, count, None, rows=body, shapes=shapes,
                            integer_rows=(not_int, blank), load=functools.partial(text_of, i))
                    for i, (shapes, count, not_int, blank) in enumerate(columns)],
                   first_typed=with_first)

    def with_first(self, null_set: tuple[str, ...]) -> list[_Column]:
        """The columns of every row with ``ncols`` fields, the first included."""
        if len(self.first) != len(self.columns):
            return self.columns
        typed: Sequence[tuple[int, int, int, int] | None] = \
            self.first_typed or [None] * len(self.columns)
        return [col.with_first(v, null_set, found)  # type: ignore[arg-type]
                for col, v, found in zip(self.columns, self.first, typed, strict=True)]


def duckdb_date_format(templates: tuple[str, ...], values: list[str]) -> str | None:
    """The format DuckDB's sniffer picks for ``values`` (dates or timestamps not in ISO
    form), or None when none reads them.

    DuckDB puts the first value's separator into its templates (leaving out ISO's
    ``%Y-%m-%d``), starts from the last one and, value by value, drops the format in use
    while it does not parse the value: 01/02/2024 is 1 February (``%d/%m/%Y`` comes
    before ``%m/%d/%Y``) and 01/02/24 is 24 February 2001 (``%y/%m/%d``). Parsing
    checks each field's range only (a day up to 31): a value the format parses into a
    day its month lacks (10/02/30 as 2010-02-30) keeps the format and fails DuckDB's
    cast, so the column is no date at all (None).

    Raises:
        Unsupported: the format DuckDB ends with does not read a value it accepted
            earlier (DuckDB would fail on it or read it otherwise): a date must never be
            read differently from DuckDB, so the file is left to the fallback; or a
            value after the first has a year with fewer digits than the format in use
            writes (``06-26-5``), which DuckDB's parser reads there and strptime does
            not (the first value's must be whole: DuckDB reads ``06-26-5`` alone as
            text).
    """
    from gateway.errors import Unsupported

    found = _DATE_SEPARATOR.match(values[0])
    if found is None:
        return None
    separator = found.group(1)
    formats = [t.replace("-", separator) for t in templates]
    candidates = [f for f in formats if "%Y-%m-%d" not in f]
    for index, value in enumerate(values):
        value = value.strip()
        while candidates and not _parses(candidates[-1], value):
            short = _year_padded(candidates[-1], value)
            if short is not None and (index or short[1] > 1) and \
                    _parses(candidates[-1], short[0]):
                # DuckDB's parser reads a %y of one digit and a %Y of one to three
                # (06-26-5 is 2005-06-26), one digit not in the first value (06-26-5
                # alone is text), and keeps the format; strptime does not
                raise Unsupported(f"the csv engine does not read dates such as {value!r} "
                                  f"whose year has fewer digits than {candidates[-1]!r} "
                                  "writes (DuckDB's parser reads them); the duckdb engine "
                                  "reads them", engines=("duckdb",))
            candidates.pop()
        if not candidates:
            # DuckDB then reads the values as ISO dates, which may lack leading zeros
            # (2005-10-3)
            iso = [f for f in formats if "%Y-%m-%d" in f and _all_match(f, values)]
            return iso[-1] if iso else None
        if not _all_match(candidates[-1], [value]):
            return None
    if not _all_match(candidates[-1], values):
        raise Unsupported(f"the csv engine does not read dates such as {values[0]!r} whose "
                          f"day and month order DuckDB settles value by value (ending with "
                          f"{candidates[-1]!r}, which misreads earlier values)",
                          engines=("duckdb",))
    return candidates[-1]


def _all_parse(kind: int, values: list[str]) -> bool:
    import datetime

    from gateway_csv import _scanner

    try:
        for v in values:
            if kind == TIME:
                if len(v.strip().partition(".")[2]) > 6:
                    return False  # DuckDB drops digits past microseconds
                datetime.time.fromisoformat(v.strip())
            else:
                _scanner.parse_value(kind, v.encode())
    except ValueError:
        return False
    return True


def _parses(fmt: str, value: str) -> bool:
    """Whether ``fmt`` parses ``value`` field by field, whether or not the day exists in
    its month (strptime's "day is out of range for month" comes after parsing)."""
    import datetime

    try:
        datetime.datetime.strptime(value, fmt)
    except ValueError as exc:
        return str(exc) == "day is out of range for month"
    return True


def _year_padded(fmt: str, value: str) -> tuple[str, int] | None:
    """``value`` with the year of ``fmt``'s date part padded with zeros to the digits
    strptime wants (2 for ``%y``, 4 for ``%Y``), and the year's own digits; None when
    it needs no padding."""
    found = _DATE_SEPARATOR.match(value)
    if found is None:
        return None
    separator = found.group(1)
    date, _, rest = value.partition(" ")
    fields = date.split(separator)
    wanted = fmt.partition(" ")[0].split(separator)
    for i, (part, spec) in enumerate(zip(fields, wanted, strict=False)):
        width = {"%y": 2, "%Y": 4}.get(spec)
        if width is not None and part.isdigit() and len(part) < width:
            fields[i] = part.zfill(width)
            return separator.join(fields) + (" " + rest if rest else ""), len(part)
    return None


def _all_match(fmt: str, values: list[str]) -> bool:
    import datetime

    try:
        for v in values:
            datetime.datetime.strptime(v.strip(), fmt)
    except ValueError:
        return False
    return True


def _wide_int_kind(values: list[str]) -> int:
    """BIGINT, or HUGEINT past 64 bits up to 38 digits (decimal128(38, 0)'s limit).

    Raises:
        Unsupported: an integer of 39 digits or more. DuckDB reads it exactly, as a
            HUGEINT (up to 2**127, which Arrow's decimal128(38, 0) cannot hold) or
            past that as a BIGNUM; the csv engine would only have a DOUBLE.
    """
    numbers = [int(v) for v in values]
    if all(-(2**63) <= n < 2**63 for n in numbers):
        return INT
    wide = next((v.strip() for v, n in zip(values, numbers, strict=True)
                 if abs(n) >= 10**38), None)
    if wide is not None:
        from gateway.errors import Unsupported

        raise Unsupported(f"the csv engine does not read integers of 39 digits or more, such "
                          f"as {wide[:24]}... ({len(wide.lstrip('-'))} digits), which DuckDB "
                          f"reads exactly as HUGEINT or BIGNUM; the duckdb engine reads them",
                          engines=("duckdb",))
    return HUGE


def sniff(head: bytes, options: dict[str, Any], *, path: str, complete: bool) -> Layout:
    """Work out a file's layout from its first bytes and the source's overrides.

    Args:
        head: the first bytes of the file (up to :data:`DIALECT_BYTES`).
        options: the source's CSV options (delimiter, quote, header, columns, ...).
        path: the file, for messages.
        complete: ``head`` is the whole file.

    Raises:
        QueryError: the file is empty or not UTF-8.
        ConfigError: an override names an unknown column or type.
    """
    bom = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    _refuse_utf16(head, path)
    candidates = dialect.detect(head[bom:], options, complete) if \
        options.get("delimiter") is None or len(options["delimiter"]) == 1 else []
    end = len(head)  # of the rows sniffed: an incomplete head's last line is cut (not copied)
    if not complete:
        cut = head.rfind(b"\n")
        end = cut + 1 if cut > 0 else end
    # invalid UTF-8 is reported by the scanner, with its line and column
    text = str(memoryview(head)[bom:end], "utf-8", errors="replace")
    given_quote = options.get("quote")
    for key, value in (("delimiter", options.get("delimiter")), ("quote", given_quote),
                       ("escape", options.get("escape"))):
        if value is not None and len(value) > 1:
            raise ConfigError(f"the {key} must be one character, not {value!r}", key=key)
    nulls = options.get("null", "")
    null_set = (nulls,) if isinstance(nulls, str) else tuple(nulls)
    skip_bad = options.get("on_error") == "skip"
    blank = _NOT_BLANK.search(text) is None  # (strip would copy the whole head)
    if blank and text.count("\n") > 1:
        # blank lines only: DuckDB skips the empty ones before the first of blanks, takes
        # that line (or, when all are empty, the first) as a header naming column0, and
        # reads each further line as a row of one VARCHAR (NULL when empty)
        lines = head[bom:end].split(b"\n")
        header_line = next((i for i, line in enumerate(lines) if line.strip(b"\r")), 0)
        return Layout(names=["column0"], kinds=[STR], header=True,
                      data_start=min(end, bom + sum(len(line) + 1 for line in
                                                           lines[:header_line + 1])),
                      nulls=null_set, skip_bad=skip_bad)
    if blank:
        # DuckDB reads an empty file as one VARCHAR column and no rows
        return Layout(names=["column0"], kinds=[STR], header=False, data_start=end,
                      nulls=null_set, skip_bad=skip_bad)

    if not candidates and not skip_bad and \
            all(options.get(k) is None for k in ("delimiter", "quote", "escape")):
        raise QueryError(f"{path}: no delimiter, quote and comment character DuckDB's sniffer "
                         "tries reads the file as a table (under each, the rows have different "
                         "numbers of fields, or a quote is never closed); DuckDB refuses it too",
                         hint="set delimiter, quote or escape on the source, or "
                              'on_error = "skip" to skip the rows that do not fit', kind="type")
    if candidates:
        found = _typed_best(candidates, text, null_set)
        delimiter, quote, escape, comment = found.delimiter, found.quote, found.escape, \
            found.comment
        uncommented = _uncommented(text, comment, quote)
        # text's UTF-8, not encoded again where it is the head's ASCII
        data = memoryview(head)[bom:end] if uncommented is text and text.isascii() else None
        text = uncommented
        # types from DuckDB's sample: SAMPLE_ROWS rows from the header on
        skipped, ncols, trailing = found.skip, found.ncols, found.trailing
        sample = _Sample.plain(text, delimiter, quote, escape, SAMPLE_ROWS + skipped, skipped,
                               ncols, trailing, null_set, data)
        if sample is None and len(delimiter) == 1:
            rewritten = unquoted(text, delimiter, quote, escape, data, SAMPLE_ROWS + skipped)
            if rewritten is not None:
                sample = _Sample.plain(None, UNQUOTED_DELIMITER, "", "",
                                       SAMPLE_ROWS + skipped, skipped, ncols, trailing, null_set,
                                       rewritten)
        if sample is None:
            rows = _split_lines(text, delimiter, quote, escape, SAMPLE_ROWS + skipped) or \
                [[text.splitlines()[0]]]
            rows = rows[skipped:] or [[""] * ncols]
            if trailing:
                rows = rows[:1] + [r[:ncols] if len(r) == ncols + 1 else r for r in rows[1:]]
            sample = _Sample.of_rows(rows, ncols, null_set)
    elif skip_bad or any(options.get(k) is not None for k in ("delimiter", "quote", "escape")):
        # the given dialect, or rows to skip: the scan reports the rows that do not fit
        comment, trailing = "", False
        delimiter, quote, escape, score = _dialect(text[:65536], options)
        if _COMMENT_LINE.search(text[:65536]):
            # lines starting with # are comments when the table is more regular without them
            uncommented = _COMMENT_LINE.sub("", text)
            d, q, e, s = _dialect(uncommented[:65536], options)
            if s > score:
                comment, delimiter, quote, escape, text = "#", d, q, e, uncommented
        rows = _split_lines(text, delimiter, quote, escape, SAMPLE_ROWS + 200) or \
            [[text.splitlines()[0]]]
        skipped = _preamble(rows)
        rows = rows[skipped:skipped + SAMPLE_ROWS]
        ncols = max(len(rows[0]), 1)
        sample = _Sample.of_rows(rows, ncols, null_set)
    first, body = sample.first, sample.body
    kinds, formats = _kinds(sample.columns, null_set)

    header = options.get("header")
    if header is None:
        if not body and ncols == 1 and len(text.splitlines()) > 1:
            header = True  # the rows are blank lines, NULLs of a text column
        elif not body:
            # one line: a header when it is all text ("a,b") or all empty, else a row
            # ("42"; "AAA|", whose empty value DuckDB tests against BOOLEAN)
            empty = [v is None or v in null_set for v in first]
            header = sample.rows == 1 and (all(empty) or (not any(empty) and all(
                _column_kind([v]) == STR for v in first)))
        elif all(not (v or "").strip() for v in first):
            header = True  # a header of only delimiters: default names
        else:
            # a column of only NULLs below the first row keeps DuckDB's narrowest
            # candidate, BOOLEAN, when the first row is tested against it
            tested = [BOOL if not col.count else kind
                      for col, kind in zip(sample.columns, kinds, strict=True)]
            header = any(kind != STR and first[i] not in null_set
                         and _column_kind([first[i]]) not in _compatible(kind)
                         for i, kind in enumerate(tested))
            header = header or all(k == STR for k in tested)
    if header:
        names = _unique_names([(v or "").strip() for v in first], ncols)
        if not body:
            kinds, formats = [STR] * ncols, {}
    else:
        width = len(str(ncols - 1))
        names = [f"column{i:0{width}d}" for i in range(ncols)]
        kinds, formats = _kinds(sample.with_first(null_set), null_set)

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
        formats.pop(lower[col.lower()], None)

    try:
        data_start = _skip_rows(head, bom, end, quote, skipped + bool(header), path, comment,
                                multiline=bool(candidates))
    except QueryError as unclosed:
        if options.get("quote") is not None or not quote:
            raise
        if candidates:
            # DuckDB's dialect detection kept this quote (its quotes close where the
            # detection looked), and DuckDB reads the header's unclosed quote its own way
            # (afl/24.csv: a header `pedro;nl"` naming `nl"`, and no rows); read unquoted,
            # the file was another table
            from gateway.errors import Unsupported

            raise Unsupported(f"{unclosed.message}, under the dialect DuckDB's detection "
                              f"chose (delimiter {delimiter!r}, quote {quote!r}): DuckDB "
                              "reads such a header its own way", engines=("duckdb",),
                              hint="set quote on the source (quote = \"\" when fields are "
                                   "not quoted), or fallback on the csv engine to a duckdb "
                                   "engine") from None
        # a quote that never closes: read the file unquoted, as DuckDB does
        return sniff(head[:end], {**options, "quote": ""}, path=path, complete=complete)
    return Layout(names=names, kinds=kinds, delimiter=delimiter, quote=quote or "",
                  escape=escape or "", header=bool(header), data_start=data_start,
                  nulls=null_set, skip_bad=skip_bad,
                  timestamp_format=options.get("timestamp_format"), formats=formats,
                  skipped_lines=skipped, comment=comment, trailing=trailing,
                  cut_comments=bool(comment) and any(
                      comment in line and not line.startswith(comment)
                      for line in str(memoryview(head)[:end], "utf-8", "replace").splitlines()),
                  padded_quotes=padded_quotes(text, delimiter, quote or ""))


def padded_quotes(text: str, delimiter: str, quote: str) -> bool:
    """Whether blanks sit between a quoted field and its delimiter or line end
    (``1, "a" ,2``) anywhere in ``text``.

    Every such place holds a blank beside the quote, which ``str.__contains__``
    finds in a millisecond where the pattern takes 100-130 ms over an 8 MiB
    head of quoted fields (the pattern's ``^`` alternative is tried at every
    character); without one, the pattern cannot match.
    """
    if not quote or " " not in text:  # no blank at all (h2o): one memchr, not 15 ms of search
        return False
    # a few quotes (a value quoted here and there): look beside each, not over all the
    # text for a blank and a quote together (7 ms a search over 8 MiB of taxi rows,
    # whose blanks are many)
    at, seen = text.find(quote), 0
    while at >= 0 and seen < 1000:
        if text[at - 1:at] == " " or text[at + 1:at + 2] == " ":
            break
        at, seen = text.find(quote, at + 1), seen + 1
    else:
        if at < 0:
            return False
    if " " + quote not in text and quote + " " not in text:
        return False
    return re.search(f"(?:^|{re.escape(delimiter)}) +{re.escape(quote)}|"
                     f"{re.escape(quote)} +(?:{re.escape(delimiter)}|$)", text, re.M) is not None


def _refuse_utf16(head: bytes, path: str) -> None:
    """Refuse a file that looks like UTF-16 text (a NUL byte at every other position
    of its head), which the csv engine would read as UTF-8 holding NULs.

    Raises:
        Unsupported: DuckDB reads such a file (without a byte-order mark; it takes
            the NULs as characters of the values), and the duckdb engine reads it as
            DuckDB does.
    """
    sample = head[:4096]
    pairs = len(sample) // 2
    if pairs < 2:
        return
    nuls = max(sample[0:pairs * 2:2].count(0), sample[1:pairs * 2:2].count(0))
    if nuls >= 0.9 * pairs:
        from gateway.errors import Unsupported

        raise Unsupported(f"{path}: the file looks like UTF-16 text (a NUL byte at every "
                          "other position) without a byte-order mark; the csv engine reads it only "
                          "as UTF-8 and would see NULs. The duckdb engine reads it as DuckDB "
                          "does", engines=("duckdb",))


def _typed_best(candidates: list[dialect.Dialect], text: str, null_set: tuple[str, ...]) \
        -> dialect.Dialect:
    """DuckDB's DetectTypes choice among dialects that fit equally: the first with the
    fewest text columns."""
    best, fewest = candidates[0], None
    for cand in candidates if len(candidates) > 1 else ():
        rows = _split_lines(_uncommented(text, cand.comment, cand.quote), cand.delimiter,
                            cand.quote, cand.escape)[cand.skip:]
        body = [r for r in (rows[1:] if len(rows) > 1 else rows) if len(r) == cand.ncols]
        text_columns = _kinds(_Sample.of_rows([[], *body], cand.ncols, null_set).columns,
                              null_set)[0].count(STR) if body else cand.ncols
        if fewest is None or text_columns < fewest:
            best, fewest = cand, text_columns
    return best


def _uncommented(text: str, comment: str, quote: str) -> str:
    """The text without its comments: lines cut at their comment character (outside
    quotes), and dropped when nothing but blanks is left of them."""
    if not comment or comment not in text:
        return text
    lines, in_quote = [], False
    for line in text.split("\n"):
        line, in_quote = dialect.cut_comment(line, comment, quote, in_quote)
        if line != comment:
            lines.append(line)
    return "\n".join(lines)


def _dialect(probe: str, options: dict[str, Any]) -> tuple[str, str, str, float]:
    """(delimiter, quote, escape, score): the given ones, else the candidates whose
    rows have the most consistent field count (the first wins a tie)."""
    delimiter, quote, escape = options.get("delimiter"), options.get("quote"), \
        options.get("escape")
    best: tuple[float, str, str, str] | None = None
    for cand in (delimiter,) if delimiter is not None else DELIMITERS:
        for q in (quote,) if quote is not None else QUOTES:
            opens = bool(q) and re.search(f"(?:^|[{re.escape(cand)}\n]){re.escape(q)}", probe)
            if quote is None and q != QUOTES[0] and not opens:
                continue  # another quote is only a candidate where it opens fields
            escapes = (escape,) if escape is not None else \
                (q, "\\") if q and "\\" + q in probe else (q,)
            for e in escapes:
                rows = _split_lines(probe, cand, q, e)[:200]
                if not rows:
                    continue
                widths = [len(r) for r in rows]
                common = max(set(widths), key=widths.count)
                score = (widths.count(common) / len(widths)) * (common > 1) + \
                    (common > 1) * 0.001 * common
                # on a tie, a quote that opens fields beats one that never does, and
                # a backslash written before quotes is their escape
                if opens:
                    score += 1e-6
                if e == "\\" != q:
                    score += 1e-7
                if best is None or score > best[0]:
                    best = (score, cand, q, e)
    if best is None:
        q = quote if quote is not None else '"'
        return delimiter or ",", q, escape if escape is not None else q, 0.0
    return best[1], best[2], best[3], best[0]


def _preamble(rows: list[list[str | None]]) -> int:
    """How many leading rows are narrower than the table after them (a title, notes)."""
    widths = [len(r) for r in rows[:200]]
    common = max(set(widths), key=lambda w: (widths.count(w), w))
    if common < 2 or widths[0] >= common:
        return 0
    if widths[0] == common - 1 and all(not r[-1] for r in rows[1:200] if len(r) == common):
        return 0  # a header, and rows ending in a delimiter
    skip = widths.index(common)
    return skip if all(w < common for w in widths[:skip]) else 0


def _kinds(columns: list[_Column], null_set: tuple[str, ...]) \
        -> tuple[list[int], dict[int, str]]:
    """Per column: kinds, and the formats of non-ISO dates and timestamps. DuckDB
    keeps one format per type and file: the first column of a type sets it, and
    a later column written in another format stays text."""
    kinds, formats = [], {}
    first_format: dict[int, str | None] = {}
    for i, col in enumerate(columns):
        kind, fmt = _column_type_of(col)
        if kind == FLOAT:
            _refuse_blanks_of(col, null_set)
        if kind == STR:
            _refuse_dates_past_the_scanner(col, null_set)
            shapes = col.shapes()
            if (shapes & SH_RADIX if shapes is not None else
                    _RADIX_START.search(col.joined) is not None):
                _refuse_radix_integers(col)
        if kind in (DATE, TS) and first_format.setdefault(kind, fmt) != fmt:
            kind, fmt = STR, None
        kinds.append(kind)
        if fmt is not None:
            formats[i] = fmt
    return kinds, formats


#: the start of an ISO date, whatever its year's digits
_DATE_START = LazyPattern(r"[ \t]*[0-9]{4,}-[0-9]{1,2}-[0-9]{1,2}", re.ASCII)
#: a date DuckDB reads and the scanner does not: a year of five digits or more
_LONG_YEAR = LazyPattern(r"[ \t]*[0-9]{5,}-", re.ASCII)


def _refuse_dates_past_the_scanner(col: _Column, null_set: tuple[str, ...]) -> None:
    """Refuse a text column of dates DuckDB reads as DATE or TIMESTAMP: its own BC form
    (``0020-01-01 (BC)``) or a year past 9999 (``10000-01-01``), which the scanner's
    parsers refuse, so that min/max, ORDER BY and comparisons would work on text."""
    shapes = col.shapes()
    if not col.count or (shapes is not None and not shapes & SH_DIGIT_FIRST):
        return  # (the usual text column: its values are not read for this)
    joined = col.joined
    if not _DATE_START.match(joined):
        return  # DuckDB types a column DATE only when every value is one, the first too
    values = [v for v in col.values() if v not in null_set]
    if not all(_DATE_START.match(v) for v in values):
        return
    odd = next((v for v in values if "(BC)" in v or _LONG_YEAR.match(v)), None)
    if odd is not None:
        from gateway.errors import Unsupported

        raise Unsupported(f"the csv engine does not read dates such as {odd.strip()[:40]!r} "
                          "(before year 1, or after 9999), which DuckDB types DATE or "
                          "TIMESTAMP", engines=("duckdb",))


#: a value DuckDB's integer cast reads in base 16 or 2 (``0x1F``, ``0b11``)
_RADIX_START = LazyPattern(r"(?m)^[ \t]*0[xXbB]")  # (signed, DuckDB's casts refuse it)
#: a column of such values and decimal integers: DuckDB's sniffer types it BIGINT (or
#: HUGEINT); looser than DuckDB's own rule (signs, underscores anywhere, blanks after),
#: so that only a column DuckDB might read as text is ever refused
_INTEGERS_ANY_RADIX = LazyPattern(
    r"[ \t]*[-+]?(?:[0-9][0-9_]*|0[xX][0-9A-Fa-f_]*|0[bB][01_]*)[ \t]*", re.ASCII)


def _fits_hugeint(value: str) -> bool:
    """Past HUGEINT DuckDB's integer casts fail, and the column stays text: a column of
    128-bit hashes (0x9036400d9cbfd626f5fba91a3a03e0ac, in DuckDB's own corpus)."""
    digits = value.strip(" \t").lstrip("+-").replace("_", "")
    if digits[:2].lower() not in ("0x", "0b"):
        return True
    body = digits[2:].lstrip("0")
    return len(body) * (4 if digits[1] in "xX" else 1) <= 127 or \
        int(body or "0", 16 if digits[1] in "xX" else 2) < 1 << 127


def _refuse_radix_integers(col: _Column) -> None:
    """Refuse a column of hexadecimal or binary integers, which DuckDB types BIGINT and
    reads as numbers (0x1F is 31); the csv engine's scanner reads decimal digits only."""
    values = col.values()
    if all(_INTEGERS_ANY_RADIX.fullmatch(v) and _fits_hugeint(v) for v in values):
        from gateway.errors import Unsupported

        example = next(v for v in values if _RADIX_START.match(v))
        raise Unsupported(f"the csv engine does not read hexadecimal or binary integers "
                          f"such as {example.strip()[:40]!r}, which DuckDB types BIGINT and "
                          "reads as numbers", engines=("duckdb",))


def _compatible(kind: int) -> tuple[int, ...]:
    return {FLOAT: (INT, FLOAT, HUGE), HUGE: (INT, HUGE), TS: (DATE, TS), TSTZ: (DATE, TS, TSTZ)}.get(kind, (kind,))


def _unique_names(raw: list[str], ncols: int) -> list[str]:
    """Header names made unique as DuckDB's DetectHeaderInternal does: while a name is
    taken (case-insensitively), its own collision count goes up and is appended, so
    ``a,a_1,a,a_1`` is ``a, a_1, a_1_1, a_1_2``."""
    width = len(str(ncols - 1))
    names: list[str] = []
    collisions: dict[str, int] = {}
    for i, name in enumerate(raw):
        name = name or f"column{i:0{width}d}"
        while name.lower() in collisions:
            collisions[name.lower()] += 1
            name = f"{name}_{collisions[name.lower()]}"
        collisions[name.lower()] = 0
        names.append(name)
    return names


def _skip_rows(data: bytes, start: int, end: int, quote: str, count: int, path: str,
               comment: str, multiline: bool) -> int:
    """The byte offset after ``count`` rows of ``data[start:end]`` and the blank and
    comment lines before them; ``multiline``: their quoted fields may hold line ends
    (the dialect was detected by DuckDB's rules, which saw those quotes close).

    Raises:
        QueryError: a quote opened in those rows is never closed.
    """
    q = quote.encode()[0] if quote else -1
    pos, n = start, end
    c = comment.encode()[0] if comment else -1

    def skip_blank_and_comments(pos: int) -> int:
        while pos < n and (data[pos] in b"\r\n" or data[pos] == c):
            if data[pos] == c:
                line_end = data.find(b"\n", pos, n)
                pos = n if line_end < 0 else line_end
            pos += 1
        return pos

    for _ in range(count):
        pos = skip_blank_and_comments(pos)
        in_quote = False
        row = pos
        while pos < n:
            byte = data[pos]
            if byte == q:
                in_quote = not in_quote
            elif byte == 10 and not in_quote:
                break
            pos += 1
        if in_quote or (not multiline and b"\n" in data[row:pos]):
            # a header whose quote runs past its line swallows the rows after it
            line = data[row:min(row + 60, n)].decode("utf-8", "replace").splitlines()[0]
            raise QueryError(f"{path}: the quote opened in the header line ({line!r}) is not "
                             "closed on that line", hint="fix the file, or set quote on the source "
                                            "(quote = \"\" when fields are not quoted)", kind="type")
        pos += 1
    return min(pos, n)
