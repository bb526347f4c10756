"""The aggregations the csv engine answers without its planner (see :mod:`gateway_csv.shape`
for its projections, and why).

:func:`aggregation` reads the aggregations the fused scan computes whole, as
csvql's benchmark queries are written (``SELECT passenger_count,
STRFTIME('%Y', pickup_datetime) AS y, COUNT(*) FROM trips GROUP BY
passenger_count, y``): plain columns, ``count(*)`` and count, sum, avg, min
and max of a column, ``strftime('%Y', column)`` and ``round(column)`` as
keys, aliases, GROUP BY and ORDER BY of names, LIMIT. :func:`aggregated`
answers one through the planner's own fused scan (:mod:`gateway_csv.fused`),
answer's table and order (:mod:`gateway_csv.columns`), and returns None
wherever the planner's judgement is needed. tests/test_csv_shape_aggregation.py
holds them to the planner's answers and errors.

A projection, the commoner first look at a file, imports none of this (nor
the fused scan, :mod:`gateway_csv.temporal` and :mod:`gateway_csv.naming`):
3-5 ms of a one-row ``arrowgate query``.
"""

from __future__ import annotations

import re
from typing import Final

import pyarrow as pa

from gateway.records import FrozenRecord, Record
from gateway_csv import fused, native, temporal
from gateway_csv.columns import answer_table, ordered, sliced
from gateway_csv.fused import (
    A_AVG,
    A_COUNT,
    A_MAX,
    A_MEDIAN,
    A_MIN,
    A_STDDEV_POP,
    A_STDDEV_SAMP,
    A_SUM,
    A_VAR_POP,
    A_VAR_SAMP,
)
from gateway_csv.layout import Layout
from gateway_csv.naming import aggregate_name
from gateway_csv.native import column_types
from gateway_csv.scan import Scanner
from gateway_csv.shape import LARGEST, RESERVED, SPACE

#: the aggregates read here, by the name DuckDB gives them in a column's name
_AGGREGATES = {"count": A_COUNT, "sum": A_SUM, "avg": A_AVG, "min": A_MIN, "max": A_MAX,
               "var_samp": A_VAR_SAMP, "variance": A_VAR_SAMP, "var_pop": A_VAR_POP,
               "stddev_samp": A_STDDEV_SAMP, "stddev": A_STDDEV_SAMP,
               "stddev_pop": A_STDDEV_POP, "median": A_MEDIAN}
#: the native table's name of an aggregate known by another (gateway_csv.native)
_NATIVE_NAMES = {"variance": "var_samp", "stddev": "stddev_samp"}
#: words not taken as a name in an aggregation: RESERVED, and those sqlglot reads as more
#: than a name after GROUP BY (tests/test_csv_shape_aggregation.py checks every word)
_NOT_NAMES = RESERVED | {"CUBE", "LOCK", "ROLLUP"}
#: strftime's one format read here (csvql's year)
_YEAR = "%Y"
#: one token of an aggregation (the whitespace before it skipped, as sqlglot's tokenizer
#: does); a name quoted with a doubled quote inside, a number running into a word or a
#: dot, and a string other than '%Y' match nothing, so the planner reads the statement
_TOKEN = re.compile(rf"""{SPACE}*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|"(?P<quoted>[^"\x00]+)"(?!")
                     |(?P<number>[0-9]+)(?![A-Za-z0-9_.])|(?P<format>'%Y')(?!')|(?P<mark>[(),*;]))""",
                    re.VERBOSE)


class Term(FrozenRecord):
    """A select item of an aggregation: a column, or one function of one column.

    function: None (the column itself), an aggregate (count, sum, avg, min, max), "round"
        or "strftime" (of the year: ``strftime('%Y', column)``).
    column: the column as written (without its quotes); None in ``count(*)``.
    format_first: strftime's format comes first (csvql's order, as in the statement).
    """

    __slots__ = ("function", "column", "format_first")
    function: Final[str | None]
    column: Final[str | None]
    format_first: Final[bool]

    def __init__(self, function: str | None, column: str | None,
                 format_first: bool = False) -> None:
        self.function, self.column, self.format_first = function, column, format_first

    @property
    def key(self) -> tuple[str | None, str | None, bool]:
        """What tells two terms apart as the planner's keys of expressions do
        (:func:`gateway_csv.query.key`: names in lower case, arguments in order)."""
        return self.function, None if self.column is None else self.column.lower(), \
            self.format_first


class Aggregation(FrozenRecord):
    """A statement :func:`aggregation` read.

    items: (alias or None, term) of each select item.
    group: the GROUP BY names, as written (without quotes).
    order: the ORDER BY names (as written) and whether each is DESC.
    """

    __slots__ = ("table", "items", "group", "order", "limit", "offset")
    table: Final[str]
    items: Final[tuple[tuple[str | None, Term], ...]]
    group: Final[tuple[str, ...]]
    order: Final[tuple[tuple[str, bool], ...]]
    limit: Final[int | None]
    offset: Final[int]

    def __init__(self, table: str, items: tuple[tuple[str | None, Term], ...],
                 group: tuple[str, ...], order: tuple[tuple[str, bool], ...], limit: int | None,
                 offset: int) -> None:
        self.table, self.items, self.group, self.order = table, items, group, order
        self.limit, self.offset = limit, offset


def aggregation(sql: str) -> Aggregation | None:
    """``sql`` as an aggregation of columns of one table (plain columns, count, sum, avg,
    min and max of a column, ``strftime('%Y', column)`` and ``round(column)`` as keys,
    aliases, GROUP BY and ORDER BY names, LIMIT and OFFSET); None when the planner must
    read it."""
    tokens = _tokens(sql)
    if tokens is None:
        return None
    return _Reader(tokens).statement()


def _tokens(sql: str) -> list[tuple[str, str]] | None:
    """(kind, text) of each token; None when a character is outside the small grammar."""
    tokens = []
    pos = 0
    end = len(sql.rstrip(" \t\r\n"))
    while pos < end:
        match = _TOKEN.match(sql, pos)
        if match is None:
            return None
        kind = match.lastgroup or ""
        tokens.append((kind, match[kind]))
        pos = match.end()
    return tokens


class _Reader:
    """The recursive descent over the tokens; each method returns None where the statement
    leaves the grammar."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.at = 0

    def _peek(self, offset: int = 0) -> tuple[str, str]:
        at = self.at + offset
        return self.tokens[at] if at < len(self.tokens) else ("end", "")

    def _word(self, *words: str) -> bool:
        """Take the next token if it is one of ``words`` (keywords, any case)."""
        kind, text = self._peek()
        if kind == "word" and text.upper() in words:
            self.at += 1
            return True
        return False

    def _mark(self, mark: str) -> bool:
        if self._peek() == ("mark", mark):
            self.at += 1
            return True
        return False

    def _name(self) -> str | None:
        kind, text = self._peek()
        if kind == "quoted" or (kind == "word" and text.upper() not in _NOT_NAMES):
            self.at += 1
            return text
        return None

    def _names(self) -> list[str] | None:
        names = []
        while True:
            name = self._name()
            if name is None:
                return None
            names.append(name)
            if not self._mark(","):
                return names

    def _number(self) -> int | None:
        kind, text = self._peek()
        if kind != "number" or int(text) > LARGEST:
            return None  # past BIGINT, DuckDB's limits are its own story: the planner's
        self.at += 1
        return int(text)

    def _term(self) -> Term | None:
        kind, text = self._peek()
        function = text.lower()
        if kind != "word" or self._peek(1) != ("mark", "(") or \
                (function not in _AGGREGATES and function not in ("round", "strftime")):
            name = self._name()
            return None if name is None else Term(None, name)
        self.at += 2
        if function == "count" and self._mark("*"):
            return Term("count", None) if self._mark(")") else None
        format_first = function == "strftime" and self._peek()[0] == "format"
        if format_first:
            self.at += 1
            if not self._mark(","):
                return None
        column = self._name()
        if column is None:
            return None
        if function == "strftime" and not format_first:
            if not self._mark(",") or self._peek()[0] != "format":
                return None
            self.at += 1
        return Term(function, column, format_first) if self._mark(")") else None

    def statement(self) -> Aggregation | None:
        if not self._word("SELECT"):
            return None
        items: list[tuple[str | None, Term]] = []
        while True:
            term = self._term()
            if term is None:
                return None
            alias = None
            if self._word("AS"):
                alias = self._name()
                if alias is None:
                    return None
            items.append((alias, term))
            if not self._mark(","):
                break
        if not self._word("FROM"):
            return None
        kind, table = self._peek()
        if kind != "word" or table.upper() in RESERVED:
            return None
        self.at += 1
        group: list[str] = []
        if self._word("GROUP"):
            found = self._names() if self._word("BY") else None
            if found is None:
                return None
            group = found
        order: list[tuple[str, bool]] = []
        if self._word("ORDER"):
            if not self._word("BY"):
                return None
            while True:
                name = self._name()
                if name is None:
                    return None
                descending = self._word("DESC")
                if not descending:
                    self._word("ASC")
                order.append((name, descending))
                if not self._mark(","):
                    break
        limit, offset = None, 0
        if self._word("LIMIT"):
            limit = self._number()
            if limit is None:
                return None
            if self._word("OFFSET"):
                found_offset = self._number()
                if found_offset is None:
                    return None
                offset = found_offset
        self._mark(";")
        if self._peek()[0] != "end":
            return None
        if not group and not any(t.function in _AGGREGATES for _, t in items):
            return None  # a projection (or what the planner says of it)
        return Aggregation(table, tuple(items), tuple(group), tuple(order), limit, offset)


def aggregated(scanners: list[Scanner], shape: Aggregation) -> pa.Table | None:
    """The answer as the planner gives it, through the same fused scan and the same
    answer's table, order and limit; None wherever the planner would judge otherwise:
    a name that is no column, an item neither a key nor an aggregate, a name DuckDB
    must give, an aggregation the fused scan does not compute (the planner then
    answers or says why), or Arrow refusing a value (the planner raises its error)."""
    layout = scanners[0].layout
    if any(s.layout.names != layout.names or s.layout.kinds != layout.kinds
           for s in scanners[1:]):
        return None
    read = _Resolved.of(shape, layout)
    if read is None:
        return None
    planned = fused.plan(layout, read.keys, read.aggregates, ())
    if planned is None:
        return None
    try:
        keys, aggs, _ = fused.run(scanners, planned)
        outputs = [keys[i] if is_key else aggs[i] for is_key, i in read.outputs]
        table = answer_table(read.names, outputs, read.types)
        if shape.order:
            table = ordered(table, [keys[i] if is_key else outputs[i] for is_key, i in read.order],
                            [(descending, False) for _, descending in shape.order])
    except pa.ArrowException:
        return None
    return sliced(table, shape.offset, shape.limit)


class _Resolved(Record):
    """An aggregation over one layout, as the planner analyses, binds and plans it
    (:func:`gateway_csv.query.analyse`, :func:`gateway_csv.binding.bind`,
    :func:`gateway_csv.query.fused_aggregate`).

    outputs: per select item, (True, key position) or (False, aggregate position).
    order: per ORDER BY name, (False, select item position) or (True, key position).
    """

    __slots__ = ("names", "types", "keys", "aggregates", "outputs", "order")

    def __init__(self, names: list[str], types: list[str], keys: list[fused.Key],
                 aggregates: list[tuple[int, int]], outputs: list[tuple[bool, int]],
                 order: list[tuple[bool, int]]) -> None:
        self.names, self.types, self.keys = names, types, keys
        self.aggregates, self.outputs, self.order = aggregates, outputs, order

    @classmethod
    def of(cls, shape: Aggregation, layout: Layout) -> _Resolved | None:
        types = column_types(layout)
        names = []
        for alias, term in shape.items:
            if term.column is not None and layout.column_index(term.column) is None:
                return None  # the planner names what is wrong
            name = alias if alias is not None else _output_name(term, layout)
            if name is None:
                return None  # DuckDB's name of an expression: the planner asks DuckDB
            names.append(name)
        # a name that is no column may be a select item's name (the last one so named)
        # an alias or a column only: DuckDB refuses the name it gives an expression
        # (ORDER BY "count_star()"), as the planner does (query.analyse)
        referable = [name.lower() if alias is not None or term.function is None else None
                     for name, (alias, term) in zip(names, shape.items, strict=True)]
        aliases = {name: term for name, (_, term) in zip(referable, shape.items, strict=True)
                   if name is not None}
        group = [aliases[g.lower()] if layout.column_index(g) is None and g.lower() in aliases
                 else Term(None, g) for g in shape.group]
        keys = []
        for term in group:
            key = _key(term, layout)
            if key is None:
                return None
            keys.append(key)
        key_of = {term.key: i for i, term in enumerate(group)}
        aggregates: list[tuple[int, int]] = []
        agg_of: dict[tuple[str | None, str | None, bool], int] = {}
        outputs, out_types = [], []
        for _, term in shape.items:
            if term.function in _AGGREGATES:
                if term.key not in agg_of:
                    column = -1 if term.column is None else fused.native_column(layout,
                                                                                term.column)
                    if column is None:
                        return None
                    agg_of[term.key] = len(aggregates)
                    aggregates.append((_AGGREGATES[term.function] if column >= 0
                                       else fused.A_COUNT_STAR, column))
                outputs.append((False, agg_of[term.key]))
            elif term.key in key_of:
                outputs.append((True, key_of[term.key]))
            else:
                return None  # the planner evaluates it over the keys, or says it is no key
            found = _type(term, types)
            if found is None:
                return None
            out_types.append(found)
        order = []
        for name, _ in shape.order:
            # two items of one name (an alias, or the name DuckDB gives an aggregate, as
            # the planner counts them), each its own value: the planner's to judge
            named = [i for i, n in enumerate(names) if n.lower() == name.lower()]
            if len({outputs[i] for i in named if i < len(outputs)}) > 1:
                return None
            if name.lower() in referable:
                order.append((False, referable.index(name.lower())))
            elif Term(None, name).key in key_of and layout.column_index(name) is not None:
                order.append((True, key_of[Term(None, name).key]))
            else:
                return None
        return cls(names, out_types, keys, aggregates, outputs, order)


def _output_name(term: Term, layout: Layout) -> str | None:
    """DuckDB's name of an unaliased select item, where the planner knows it without asking
    DuckDB (:func:`gateway_csv.query.output_name`)."""
    if term.function is None and term.column is not None:
        lowered = term.column.lower()
        return next(n for n in layout.names if n.lower() == lowered)
    if term.function in _AGGREGATES:
        return aggregate_name(term.function, term.column)
    return None


def _key(term: Term, layout: Layout) -> fused.Key | None:
    """The fused scan's key of a GROUP BY term (None: the planner's judgement)."""
    if term.function in _AGGREGATES or term.column is None:
        return None
    column = fused.native_column(layout, term.column)
    if column is None:
        return None
    if term.function == "round":
        return fused.Key(column, fused.F_ROUND)
    if term.function == "strftime":
        return fused.Key(column, fused.TRUNC_FNS[temporal.strftime_grain(_YEAR)],
                         fused.DerivedKey(_year_text, temporal.strftime_one_to_one(_YEAR)))
    return fused.Key(column, fused.F_IDENT)


def _year_text(truncated: pa.Array) -> pa.Array:
    return temporal.strftime(truncated, _YEAR)


def _type(term: Term, types: dict[str, str]) -> str | None:
    """DuckDB's type of a select item, as the planner's binder looks it up in
    :data:`gateway_csv.native.NATIVE` (None: no entry, and the planner says so)."""
    if term.column is None:
        found = native.entry("count(*)", ())
    else:
        column = types[term.column.lower()]
        if term.function is None:
            return column
        if term.function == "strftime":
            found = native.entry("strftime", (column, native.VARCHAR))
        else:
            if column == native.INTEGER and term.function not in ("min", "max", "count"):
                column = native.BIGINT
            found = native.entry(_NATIVE_NAMES.get(term.function, term.function), (column,))
    return None if found is None else found.result
