"""The statements the csv engine answers without its planner: columns of one table here,
their commonest aggregations in :mod:`gateway_csv.shape_aggregation`.

``SELECT a, b AS c FROM t LIMIT 10 OFFSET 5`` and ``SELECT * FROM t`` are
the commonest first look at a file, and the planner costs them most of a
one-shot process: sqlglot and its DuckDB dialect take 50-100 ms to import
(docs/benchmarks.md, "Start-up (issue 23)"), against a few milliseconds of
scanning. :func:`projection` reads such a statement with a small grammar;
anything else (a comment, an expression, a WHERE, a quoted table, a word the
DuckDB dialect reads as something other than a name) returns None, and the
planner reads it. An answer is then the planner's plain projection, built by
the same functions (:mod:`gateway_csv.columns`).

tests/test_csv_shape.py holds them to the planner's answers and errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import pyarrow as pa

from gateway.records import FrozenRecord
from gateway_csv.columns import answer_table, limited, scanned
from gateway_csv.scan import MAX_COLUMNS, Scanner

#: Words not taken as a name: DuckDB's reserved words, and every word sqlglot's DuckDB
#: dialect reads as anything but a plain column, alias or table in these statements
#: (its constants and niladic functions: ``SELECT current_date FROM t`` is no column).
#: tests/test_csv_shape.py checks the second half against the installed sqlglot.
_RESERVED_WORDS = """
    ALL ALTER ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC BETWEEN BOTH CASE CAST CHECK
    COLLATE COLUMN CONNECT_BY_ROOT CONSTRAINT CREATE CROSS CURRENT_CATALOG CURRENT_DATE
    CURRENT_ROLE CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DEFAULT DEFERRABLE
    DESC DESCRIBE DISTINCT DO DROP ELSE END EXCEPT FALSE FETCH FOR FORCE FOREIGN FROM FULL GLOB
    GRANT GROUP HAVING ILIKE IN INITIALLY INNER INSERT INSTALL INTERSECT INTO IS JOIN LATERAL
    LEADING LEFT LIKE LIMIT LOCALTIME LOCALTIMESTAMP MAP NATURAL NOT NOTNULL NULL OFFSET ON
    ONLY OR ORDER OUTER PARTITIONED_BY PIVOT PIVOT_LONGER PIVOT_WIDER PLACING POSITIONAL
    PRIMARY QUALIFY REFERENCES REGEXP RETURNING REVOKE RIGHT RLIKE ROLLBACK SELECT
    SESSION_USER SHOW SIMILAR SOME SUMMARIZE SYMMETRIC TABLE TABLESAMPLE THEN TO TRAILING TRUE
    UNCACHE UNION UNIQUE UNPIVOT USING VALUES VARIADIC WHEN WHERE WINDOW WITH XOR
"""
RESERVED = frozenset(_RESERVED_WORDS.split())

SPACE = r"[ \t\r\n]"  # the whitespace sqlglot's tokenizer skips
_NAME = r'[A-Za-z_][A-Za-z0-9_]*|"[^"\x00]+"'
_ITEM = rf"(?:{_NAME})(?:{SPACE}+AS{SPACE}+(?:{_NAME}))?"
#: (ASCII: a keyword or name matches in ASCII letters of either case, as DuckDB's do; and
#: the pattern compiles in 1 ms where Unicode's case folding took 2-3)
_STATEMENT = re.compile(
    rf"{SPACE}*SELECT{SPACE}+(?P<items>\*|{_ITEM}(?:{SPACE}*,{SPACE}*{_ITEM})*)"
    rf"{SPACE}+FROM{SPACE}+(?P<table>[A-Za-z_][A-Za-z0-9_]*)"
    rf"(?:{SPACE}+LIMIT{SPACE}+(?P<limit>[0-9]+)(?:{SPACE}+OFFSET{SPACE}+(?P<offset>[0-9]+))?)?"
    rf"{SPACE}*;?{SPACE}*", re.IGNORECASE | re.ASCII)
#: one select item of a list _STATEMENT matched
_ITEMS = re.compile(rf"(?P<name>{_NAME})(?:{SPACE}+AS{SPACE}+(?P<alias>{_NAME}))?",
                    re.IGNORECASE | re.ASCII)


class Projection(FrozenRecord):
    """A statement :func:`projection` read.

    table: the FROM name, as written.
    items: (alias, column name) of each select item, or None for ``*``; the alias is
        None where the statement gives none (the answer then names the column as the
        file does, whatever case the statement wrote it in, as DuckDB does).
    """

    __slots__ = ("table", "items", "limit", "offset")
    table: Final[str]
    items: Final[tuple[tuple[str | None, str], ...] | None]
    limit: Final[int | None]
    offset: Final[int]

    def __init__(self, table: str, items: tuple[tuple[str | None, str], ...] | None,
                 limit: int | None, offset: int) -> None:
        self.table, self.items, self.limit, self.offset = table, items, limit, offset


def projection(sql: str) -> Projection | None:
    """``sql`` as a projection of one table's columns, or None when the planner must read it."""
    match = _STATEMENT.fullmatch(sql)
    if match is None or match["table"].upper() in RESERVED:
        return None
    items: list[tuple[str | None, str]] | None = None
    if match["items"] != "*":
        items = []
        for item in _ITEMS.finditer(match["items"]):
            name, alias = _name(item["name"]), _name(item["alias"]) if item["alias"] else None
            if name is None or (item["alias"] and alias is None):
                return None
            items.append((alias, name))
    limit = int(match["limit"]) if match["limit"] is not None else None
    offset = int(match["offset"] or 0)
    if (limit or 0) > LARGEST or offset > LARGEST:
        return None  # past BIGINT, DuckDB's limits are its own story: the planner's
    return Projection(match["table"], tuple(items) if items is not None else None, limit,
                      offset)


#: the largest LIMIT or OFFSET answered here (BIGINT's; their sum still fits a scan's limit)
LARGEST = (1 << 62) - 1


def _name(text: str) -> str | None:
    if text.startswith('"'):
        return text[1:-1]
    return None if text.upper() in RESERVED else text


def batches(scanners: list[Scanner], shape: Projection, types: dict[str, str]) \
        -> Iterator[pa.Table] | None:
    """The answer's tables as the planner streams a plain query's (``types``: DuckDB's type
    of each column by lower-case name); None when the statement names a column the
    files lack (the planner then says so)."""
    layout = scanners[0].layout
    wanted = shape.items if shape.items is not None else tuple((None, n) for n in layout.names)
    if any(s.layout.column_index(column) is None for s in scanners for _, column in wanted) \
            or len({column.lower() for _, column in wanted}) > MAX_COLUMNS:
        return None
    items = tuple((alias if alias is not None else layout.names[layout.lower_names[c.lower()]], c)
                  for alias, c in wanted)
    return _batches(scanners, shape, items, [types[column.lower()] for _, column in items])


def _batches(scanners: list[Scanner], shape: Projection, items: tuple[tuple[str, str], ...],
             types: list[str]) -> Iterator[pa.Table]:
    names = [name for name, _ in items]
    scan_limit = -1 if shape.limit is None else shape.offset + shape.limit

    def tables() -> Iterator[pa.Table]:
        for scanner in scanners:
            layout = scanner.layout
            order = sorted({layout.lower_names[column.lower()] for _, column in items})
            slots = tuple((col, layout.scan_kind(col)) for col in order)
            for _, columns in scanned(scanner, slots, (), scan_limit):
                yield answer_table(names, [columns[column.lower()] for _, column in items],
                                   types)

    return limited(tables(), shape.offset, shape.limit)
