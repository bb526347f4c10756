"""The operations the csv engine evaluates itself, with the types DuckDB 2.0.1 gives them.

The rule: the engine evaluates natively only what a differential test has found equal
to DuckDB (``tests/test_csv_native.py``, on adversarial values); everything else is
:class:`gateway.errors.Unsupported`, so the gateway's fallback engine answers it.

:data:`NATIVE` declares every operator, function, cast and aggregate the engine runs,
each with its argument types and its result type as DuckDB names them;
:mod:`gateway_csv.binding` admits a query's expressions by it. :func:`sql`,
:data:`LITERALS` and :func:`text_arguments` write each entry as SQL over adversarial
constants, for the differential tests and ``arrowgate fuzz``.

Types are DuckDB's names: BOOLEAN, INTEGER, BIGINT, HUGEINT, DOUBLE, VARCHAR, DATE,
TIMESTAMP, TIMESTAMPTZ, TIME; DECIMAL is a decimal constant (``1.5``), which the engine
holds as a double, so it may meet numbers but never be an answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from gateway.records import FrozenRecord
from gateway_csv.typenames import (
    BIGINT,
    BOOLEAN,
    DATE,
    DECIMAL,
    DOUBLE,
    HUGEINT,
    INTEGER,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    arrow_type,
    column_types,
)

#: an untyped NULL constant, and a text constant (DuckDB casts it to the other side's type)
NULL, TEXT = "NULL", "STRING_LITERAL"
#: a mix DuckDB refuses to bind (text or a time meeting a number): the evaluator raises
#: DuckDB's error for it, so nothing above it is looked up
REFUSED = "REFUSED"

_ORDERED = (BOOLEAN, INTEGER, BIGINT, HUGEINT, DECIMAL, DOUBLE, VARCHAR, DATE, TIMESTAMP,
            TIMESTAMPTZ, TIME)


class Native(FrozenRecord):
    """One operation the engine evaluates: its SQL name, kind (operator, function, cast,
    aggregate), argument and result types."""

    __slots__ = ("name", "kind", "args", "result")
    name: Final[str]
    kind: Final[str]
    args: Final[tuple[str, ...]]
    result: Final[str]

    def __init__(self, name: str, kind: str, args: tuple[str, ...], result: str) -> None:
        self.name, self.kind, self.args, self.result = name, kind, args, result

    def __str__(self) -> str:
        args = ", ".join(self.args)
        if "(" in self.name:  # count(*), count(DISTINCT), date_part(epoch)
            return f"{self.name}{' ' + args if args else ''} -> {self.result}"
        return f"{self.name}({args}) -> {self.result}"


def _table() -> Iterator[Native]:
    for op in ("=", "<>", "<", "<=", ">", ">="):
        for t in _ORDERED:
            yield Native(op, "operator", (t, t), BOOLEAN)
    for t in _ORDERED:
        yield Native("IN", "operator", (t, t), BOOLEAN)
        yield Native("BETWEEN", "operator", (t, t, t), BOOLEAN)
        yield Native("IS NULL", "operator", (t,), BOOLEAN)
        if t != DECIMAL:
            yield Native("CASE", "operator", (BOOLEAN, t), t)
            yield Native("COALESCE", "function", (t, t), t)
            yield Native("min", "aggregate", (t,), t)
            yield Native("max", "aggregate", (t,), t)
            yield Native("count", "aggregate", (t,), BIGINT)
            yield Native("count(DISTINCT)", "aggregate", (t,), BIGINT)
    for op in ("AND", "OR"):
        yield Native(op, "operator", (BOOLEAN, BOOLEAN), BOOLEAN)
    yield Native("NOT", "operator", (BOOLEAN,), BOOLEAN)
    for t in (INTEGER, BIGINT):  # INTEGER's overflow is an error at 32 bits, as DuckDB's
        for op in ("+", "-", "*", "//", "%"):
            yield Native(op, "operator", (t, t), t)
    for op in ("+", "-", "*", "/", "//"):  # DuckDB's // of doubles: /, but 0 is an error
        yield Native(op, "operator", (DOUBLE, DOUBLE), DOUBLE)
    # of integers, / is a double's quotient (sum(x) / count(*): HUGEINT / HUGEINT)
    for t in (INTEGER, BIGINT, HUGEINT):
        yield Native("/", "operator", (t, t), DOUBLE)
    for t in (INTEGER, BIGINT, DOUBLE):
        yield Native("-", "operator", (t,), t)
        yield Native("abs", "function", (t,), t)
    yield Native("floor", "function", (DOUBLE,), DOUBLE)
    yield Native("ceil", "function", (DOUBLE,), DOUBLE)
    yield Native("floor", "function", (BIGINT,), DOUBLE)
    yield Native("ceil", "function", (BIGINT,), DOUBLE)
    yield Native("round", "function", (DOUBLE,), DOUBLE)
    yield Native("round", "function", (DOUBLE, INTEGER), DOUBLE)
    yield Native("round", "function", (BIGINT,), BIGINT)
    # pow, power, ^ and **: numbers are made doubles first (DuckDB's one signature)
    yield Native("pow", "function", (DOUBLE, DOUBLE), DOUBLE)
    for op in ("LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"):
        yield Native(op, "operator", (VARCHAR, VARCHAR), BOOLEAN)
    for t in (VARCHAR, BIGINT, DOUBLE, BOOLEAN, DATE, TIMESTAMP, TIMESTAMPTZ):
        yield Native("||", "operator", (VARCHAR, t), VARCHAR)
    yield Native("lower", "function", (VARCHAR,), VARCHAR)
    yield Native("upper", "function", (VARCHAR,), VARCHAR)
    yield Native("length", "function", (VARCHAR,), BIGINT)
    yield Native("trim", "function", (VARCHAR,), VARCHAR)
    yield Native("substr", "function", (VARCHAR, BIGINT), VARCHAR)
    yield Native("substr", "function", (VARCHAR, BIGINT, BIGINT), VARCHAR)
    for t in (DATE, TIMESTAMP, TIMESTAMPTZ):
        for fn in ("year", "month", "day"):
            yield Native(fn, "function", (t,), BIGINT)
        yield Native("date_part", "function", (VARCHAR, t), BIGINT)
        if t != TIMESTAMPTZ:  # DuckDB's (ICU's) epoch of a TIMESTAMPTZ rounds otherwise
            yield Native("date_part(epoch)", "function", (VARCHAR, t), DOUBLE)
        yield Native("strftime", "function", (t, VARCHAR), VARCHAR)
        yield Native("date_trunc", "function", (VARCHAR, t),
                     TIMESTAMPTZ if t == TIMESTAMPTZ else TIMESTAMP)
    yield Native("hour", "function", (TIMESTAMP,), BIGINT)
    yield Native("hour", "function", (TIMESTAMPTZ,), BIGINT)
    for source, target in _CASTS:
        yield Native("CAST", "cast", (source,), target)
    yield Native("count(*)", "aggregate", (), BIGINT)
    for t in (BIGINT, HUGEINT):
        yield Native("sum", "aggregate", (t,), HUGEINT)
    yield Native("sum", "aggregate", (DOUBLE,), DOUBLE)
    # avg of a HUGEINT is left to DuckDB: the property test found it one ulp off DuckDB's
    # (1.1335475391529597e+19 against ...595 for 5188, -9223372036854775813 and
    # 43229798211443556352)
    for t in (BIGINT, DOUBLE):
        yield Native("avg", "aggregate", (t,), DOUBLE)
    # DuckDB's quantile_cont(x, 0.5), of a column the fused scan reads (of anything else:
    # left to DuckDB, as is median of a HUGEINT, a date or a time)
    for t in (BIGINT, DOUBLE):
        yield Native("median", "aggregate", (t,), DOUBLE)
        yield Native("quantile_cont", "aggregate", (t, DECIMAL), DOUBLE)
    yield from _statistics()


#: DuckDB's algebraic aggregates the fused scan computes (stddev and variance are
#: stddev_samp and var_samp under other names), each of columns only
STATISTICS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
BINARY_STATISTICS = ("covar_samp", "covar_pop", "corr")


def _statistics() -> Iterator[Native]:
    # of INTEGER as of BIGINT: each value is made a double first
    for name in STATISTICS:
        for t in (BIGINT, DOUBLE):
            yield Native(name, "aggregate", (t,), DOUBLE)
    for name in BINARY_STATISTICS:
        for y in (BIGINT, DOUBLE):
            for x in (BIGINT, DOUBLE):
                yield Native(name, "aggregate", (y, x), DOUBLE)


_CASTS = (
    (INTEGER, BIGINT), (INTEGER, DOUBLE), (INTEGER, VARCHAR),
    (BIGINT, INTEGER), (BIGINT, DOUBLE), (BIGINT, VARCHAR), (BIGINT, BIGINT),
    (DOUBLE, BIGINT), (DOUBLE, INTEGER), (DOUBLE, VARCHAR), (DOUBLE, DOUBLE),
    (VARCHAR, VARCHAR), (DATE, TIMESTAMP), (DATE, VARCHAR), (DATE, DATE),
    (TIMESTAMP, DATE), (TIMESTAMP, VARCHAR), (TIMESTAMP, TIMESTAMP), (TIMESTAMPTZ, VARCHAR),
    (BOOLEAN, VARCHAR), (BOOLEAN, BOOLEAN), (DECIMAL, DOUBLE), (DECIMAL, BIGINT),
    (DECIMAL, INTEGER),
    (TEXT, BIGINT), (TEXT, INTEGER), (TEXT, DOUBLE), (TEXT, DATE), (TEXT, TIMESTAMP),
    (TEXT, BOOLEAN), (TEXT, VARCHAR),
)

#: every native operation (see the module's docstring)
NATIVE: tuple[Native, ...] = tuple(_table())
_BY_KEY: dict[tuple[str, tuple[str, ...]], Native] = {(n.name, n.args): n for n in NATIVE
                                                      if n.kind != "cast"}
_CAST_BY: dict[tuple[str, str], Native] = {(n.args[0], n.result): n for n in NATIVE
                                           if n.kind == "cast"}

#: SQL text of each operation over its operands {0}, {1}, ... (by name and arity)
_TEMPLATES = {
    **{(op, 2): f"{{0}} {op} {{1}}" for op in ("=", "<>", "<", "<=", ">", ">=", "AND", "OR", "+",
                                              "-", "*", "/", "//", "%", "LIKE", "NOT LIKE",
                                              "ILIKE", "NOT ILIKE", "||")},
    ("IN", 2): "{0} IN ({1}, NULL)", ("BETWEEN", 3): "{0} BETWEEN {1} AND {2}",
    ("IS NULL", 1): "{0} IS NULL", ("NOT", 1): "NOT {0}", ("-", 1): "-({0})",
    ("CASE", 2): "CASE WHEN {0} THEN {1} END", ("COALESCE", 2): "coalesce({0}, {1})",
    ("count(DISTINCT)", 1): "count(DISTINCT {0})", ("count(*)", 0): "count(*)",
    ("date_part(epoch)", 2): "date_part('epoch', {1})", ("substr", 2): "substr({0}, {1})",
    ("substr", 3): "substr({0}, {1}, {2})", ("round", 2): "round({0}, {1})",
}


def sql(entry: Native, operands: list[str]) -> str:
    """``entry`` applied to ``operands`` (SQL texts of its argument types)."""
    if entry.kind == "cast":
        return f"CAST({operands[0]} AS {entry.result})"
    template = _TEMPLATES.get((entry.name, len(entry.args)),
                              f"{entry.name}({', '.join(f'{{{i}}}' for i in range(len(entry.args)))})")
    return "(" + template.format(*operands) + ")"


#: constants of each type that have found wrong answers before (see module docstring)
LITERALS: dict[str, tuple[str, ...]] = {
    INTEGER: ("0", "1", "-1", "7", "-7", "2147483647", "-2147483647", "3"),
    BIGINT: ("2147483648", "9223372036854775807", "-9223372036854775807", "4294967296"),
    DECIMAL: ("1.5", "-2.5", "0.1", "0.0", "100.25", "-0.5"),
    DOUBLE: ("'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "'-0.0'::DOUBLE", "1e308",
             "2.5e-324", "1e16"),
    VARCHAR: ("''", "'%'", "'_'", "'\\'", "'%\\%'", "'a\\b'", "'İ'", "'i%'", "'%İ%'",
              "'ß'", "'ǅ'", "'%a_'", "'x'", "' x '", "'日本'"),
    TEXT: ("'nan'", "'-0.0'", "'12'", "'-7'", "' 12'", "'1e2'", "'+5'", "'2024-03-10 02:30:00'", "'true'",
           "''", "'1969-12-31'", "'abc'", "'9223372036854775808'"),
    BOOLEAN: ("true", "false"),
    DATE: ("DATE '1969-12-31'", "DATE '2024-03-10'", "DATE '0001-01-01'"),
    TIMESTAMP: ("TIMESTAMP '2024-03-10 02:30:00'", "TIMESTAMP '1969-12-31 23:59:59.999999'"),
    NULL: ("NULL",),
}
#: quantile_cont's quantiles (a plain number from 0 to 1: others are left to DuckDB)
QUANTILES = ("0.5", "0.0", "0.1", "0.25", "0.75", "0.9", "0.333", "1.0", ".5")
#: the text arguments some functions take: parts, units and formats
PARTS = ("'year'", "'month'", "'day'", "'dow'", "'isodow'", "'doy'", "'week'", "'quarter'",
         "'hour'", "'minute'", "'second'", "'millisecond'", "'microsecond'", "'decade'",
         "'century'", "'millennium'", "'era'", "'isoyear'", "'yearweek'")
UNITS = ("'year'", "'quarter'", "'month'", "'week'", "'day'", "'hour'", "'minute'", "'second'",
         "'millisecond'", "'microsecond'")
FORMATS = ("'%Y-%m-%d'", "'%H:%M:%S'", "'%-d/%-m/%y'", "'%j %U %W %V %G'", "'%a %A %b %B'",
           "'%I %p'", "'%c'", "'%x %X'", "'%g %f %n'", "'100%%'", "'%Y'", "'plain'", "'%-j'")


def text_arguments(entry: Native) -> dict[int, tuple[str, ...]]:
    """Per argument position, the constants it must be (parts, units, formats)."""
    if entry.name == "date_part":
        return {0: PARTS}
    if entry.name == "date_part(epoch)":
        return {0: ("'epoch'",)}
    if entry.name == "date_trunc":
        return {0: UNITS}
    if entry.name == "strftime":
        return {1: FORMATS}
    if entry.name in ("LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"):
        return {1: LITERALS[VARCHAR]}
    if entry.name == "substr":
        return {1: ("1", "2", "5", "9", "2147483647"),
                2: ("0", "1", "2", "-1", "-2", "-5", "100", "NULL")}
    if entry.name == "quantile_cont":
        return {1: QUANTILES}
    if entry.name == "round" and len(entry.args) == 2:
        return {1: ("0", "1", "2", "15", "300")}
    return {}


def entry(name: str, args: tuple[str, ...]) -> Native | None:
    """The entry of an operation (not a cast) over ``args``, or None."""
    return _BY_KEY.get((name, args))


def cast_entry(source: str, target: str) -> Native | None:
    """The entry of CAST(source AS target), or None."""
    return _CAST_BY.get((source, target))


__all__ = ["BINARY_STATISTICS", "FORMATS", "LITERALS", "NATIVE", "PARTS", "STATISTICS", "UNITS",
           "Native",
           "arrow_type", "cast_entry", "column_types", "entry", "sql", "text_arguments"]
