"""Binding a query's expressions to the native-operation table, before any row is read.

:func:`bind` walks every expression of a query once (select list, WHERE, GROUP BY,
HAVING, ORDER BY) and gives each DuckDB's type, as DuckDB's binder would: constants
take their literal types (``1`` INTEGER, ``1.5`` DECIMAL, ``'x'`` a text constant that
becomes the other side's type), operands are widened to a common type, and every
operation, cast and aggregate is looked up in :data:`gateway_csv.native.NATIVE`. What
it does not find is :class:`gateway.errors.Unsupported`, so the fallback engine answers
it; a mix DuckDB refuses (text or a time meeting a number) is left to the evaluator,
which raises DuckDB's error. The scans and aggregations are unchanged: binding only
decides which expressions reach them, and the answer's types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from gateway.errors import Unsupported
from gateway_csv.native import (
    BIGINT,
    BOOLEAN,
    DATE,
    DECIMAL,
    DOUBLE,
    HUGEINT,
    INTEGER,
    NULL,
    REFUSED,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    Native,
    cast_entry,
    entry,
)
from gateway_csv.query import ENGINES_FOR_MORE, Query

_INTEGERS = (INTEGER, BIGINT, HUGEINT)
_NUMBERS = (*_INTEGERS, DECIMAL, DOUBLE)
_TEMPORAL = (DATE, TIMESTAMP, TIMESTAMPTZ, TIME)

#: CAST's type names as DuckDB spells them (sqlglot's names on the left)
_CAST_NAMES = {"INT": INTEGER, "INTEGER": INTEGER, "BIGINT": BIGINT, "DOUBLE": DOUBLE,
               "VARCHAR": VARCHAR, "TEXT": VARCHAR, "BOOLEAN": BOOLEAN, "DATE": DATE,
               "TIMESTAMP": TIMESTAMP, "TIMESTAMPNTZ": TIMESTAMP, "DATETIME": TIMESTAMP}


def lookup(name: str, args: tuple[str, ...], node: exp.Expression) -> str:
    """The result type of ``name`` over ``args``.

    Raises:
        Unsupported: no native entry (the query falls back).
    """
    if REFUSED in args:
        return REFUSED
    found = entry(name, args)
    if found is None:
        raise Unsupported(f"the csv engine does not run {name}({', '.join(args)}) "
                          f"(in {node.sql(dialect='duckdb')[:60]}); docs/csv.md lists what "
                          "it runs itself", engines=ENGINES_FOR_MORE)
    return found.result


def _refused(a: str, b: str) -> bool:
    """A mix DuckDB refuses and the evaluator raises DuckDB's error for."""
    pair = {a, b}
    return bool(pair & {VARCHAR} and pair & set(_NUMBERS)) or \
        bool(pair & set(_TEMPORAL) and pair & set(_NUMBERS))


def common(a: str, b: str) -> str | None:
    """The type DuckDB casts two operands to (None: none)."""
    if a == b:
        return VARCHAR if a == TEXT else a
    if REFUSED in (a, b):
        return REFUSED
    if a in (NULL, TEXT):
        return b if a == NULL or b != NULL else VARCHAR
    if b in (NULL, TEXT):
        return a
    if a in _INTEGERS and b in _INTEGERS:
        return max(a, b, key=_INTEGERS.index)
    if a in _NUMBERS and b in _NUMBERS:
        return DOUBLE if DOUBLE in (a, b) else DECIMAL if HUGEINT not in (a, b) else None
    if {a, b} == {DATE, TIMESTAMP}:
        return TIMESTAMP
    if _refused(a, b):
        return REFUSED
    return None


def _literal(node: exp.Literal) -> str:
    if node.is_string:
        return TEXT
    text = node.this
    try:
        value = int(text)
    except ValueError:
        if "e" in text.lower():
            return DOUBLE
        digits = text.replace(".", "").lstrip("0")
        # a decimal of at most 15 digits compares with any integer as its double
        # does (no integer lies between the two); more digits are DuckDB's exact DECIMAL
        if len(digits) > 15:
            raise Unsupported(f"the csv engine does not run the decimal {text[:40]} (more "
                              "than 15 digits)", engines=ENGINES_FOR_MORE) from None
        return DECIMAL
    if -(2**31) <= value < 2**31:
        return INTEGER
    if -(2**63) <= value < 2**63:
        return BIGINT
    if value < 10**38:
        return HUGEINT
    return DOUBLE


#: the text constants whose cast both DuckDB and Arrow read alike, by target type
_TEXT_FORMS = {
    DOUBLE: re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|-?(nan|inf)", re.IGNORECASE),
    BIGINT: re.compile(r"-?\d{1,18}"), INTEGER: re.compile(r"-?\d{1,9}"),
    HUGEINT: re.compile(r"-?\d{1,37}"),
    DATE: re.compile(r"\d{4}-\d\d-\d\d"),
    TIMESTAMP: re.compile(r"\d{4}-\d\d-\d\d( \d\d:\d\d:\d\d(\.\d{1,6})?)?"),
    BOOLEAN: re.compile(r"true|false"),
}


def _text_fits(node: exp.Expression, target: str) -> None:
    """Refuse a text constant that DuckDB may read as ``target`` more leniently than Arrow
    (`' 12'`, `'+5'`, `'1e2'` as BIGINT), or that is no ``target`` at all (`'abc'`):
    DuckDB's cast of it fails only where a row reaches it (``id < 0 AND i = 'abc'``
    answers 0 rows), so whether DuckDB fails depends on its plan."""
    if not (isinstance(node, exp.Literal) and node.is_string) or target in (VARCHAR, TEXT):
        return
    text = node.this
    form = _TEXT_FORMS.get(target)
    if form is not None and form.fullmatch(text):
        return
    raise Unsupported(f"the csv engine does not read the text {text[:40]!r} as "
                      f"{target}", engines=ENGINES_FOR_MORE)


class Binder:
    """Gives a query's expressions DuckDB's types, refusing what :data:`gateway_csv.native.NATIVE` lacks.

    Args:
        columns: column name (lower case) -> DuckDB type.
        aliases: select alias (lower case) -> its expression.
    """

    def __init__(self, columns: Mapping[str, str], aliases: Mapping[str, exp.Expression]):
        self.columns = dict(columns)
        self.aliases = dict(aliases)
        self.used: list[Native] = []
        self._resolving: set[str] = set()

    def type_of(self, node: exp.Expression) -> str:
        handler = _BIND.get(type(node))
        if handler is None:
            raise Unsupported(f"the csv engine does not run {node.key.upper()} "
                              f"({node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
        return handler(self, node)

    def use(self, name: str, args: tuple[str, ...], node: exp.Expression) -> str:
        result = lookup(name, args, node)
        found = entry(name, args)
        if found is not None:
            self.used.append(found)
        return result

    def unify(self, nodes: list[exp.Expression], node: exp.Expression) -> str:
        """The type ``nodes`` are cast to, as DuckDB binds them together."""
        out = NULL
        for t in [self.type_of(n) for n in nodes]:
            joined = common(out, t)
            if joined is None:
                raise Unsupported(f"the csv engine does not mix {out} and {t} (in "
                                  f"{node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
            out = joined
        for n in nodes:
            _text_fits(n, out)
        return VARCHAR if out == TEXT else out


def _column(b: Binder, node: exp.Column) -> str:
    name = node.name.lower()
    if name in b.columns:
        return b.columns[name]
    if name in b.aliases and name not in b._resolving:
        b._resolving.add(name)
        try:
            return b.type_of(b.aliases[name])
        finally:
            b._resolving.discard(name)
    return REFUSED  # no such column: the evaluator names what is wrong


def _lazy_cast(b: Binder, nodes: list[exp.Expression], node: exp.Expression) -> None:
    """Refuse an equality (=, <>, IN) of a number with text that is no constant, or with a
    date or time: DuckDB binds it with a cast of one side that fails only when a row
    reaches it (``id < 0 AND d = 1`` answers 0 rows, a CASE branch no row takes answers
    NULL), so whether DuckDB fails depends on its plan, not on the query."""
    types = {b.type_of(n) for n in nodes}
    if types & set(_NUMBERS) and types & {VARCHAR, *_TEMPORAL}:
        raise Unsupported(f"the csv engine does not run {node.sql(dialect='duckdb')[:60]}: "
                          "DuckDB casts one side to the other's type and fails only where "
                          "rows reach the cast", engines=ENGINES_FOR_MORE)


def _comparison(op: str) -> Callable[[Binder, exp.Expression], str]:
    def bind(b: Binder, node: exp.Expression) -> str:
        if op in ("=", "<>"):
            _lazy_cast(b, [node.this, node.expression], node)
        t = b.unify([node.this, node.expression], node)
        return b.use(op, (t, t), node) if t != NULL else BOOLEAN
    return bind


def _arithmetic(op: str) -> Callable[[Binder, exp.Expression], str]:
    def bind(b: Binder, node: exp.Expression) -> str:
        t = b.unify([node.this, node.expression], node)
        if t == NULL:
            return NULL
        if t == DECIMAL:
            raise Unsupported(f"the csv engine does not run DECIMAL arithmetic (in "
                              f"{node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
        return b.use(op, (t, t), node)
    return bind


def _boolean(op: str) -> Callable[[Binder, exp.Expression], str]:
    def bind(b: Binder, node: exp.Expression) -> str:
        args = [b.type_of(node.this)] + ([b.type_of(node.expression)] if op != "NOT" else [])
        return b.use(op, tuple(BOOLEAN if a == NULL else a for a in args), node)
    return bind


def _in(b: Binder, node: exp.In) -> str:
    _lazy_cast(b, [node.this, *node.expressions], node)
    t = b.unify([node.this, *node.expressions], node)
    return b.use("IN", (t, t), node) if t != NULL else BOOLEAN


def _between(b: Binder, node: exp.Between) -> str:
    t = b.unify([node.this, node.args["low"], node.args["high"]], node)
    return b.use("BETWEEN", (t, t, t), node) if t != NULL else BOOLEAN


def _is(b: Binder, node: exp.Is) -> str:
    t = b.type_of(node.this)
    return b.use("IS NULL", (t,), node) if t not in (NULL, TEXT) else BOOLEAN


def _like(b: Binder, node: exp.Expression) -> str:
    name = ("NOT " if node.args.get("negate") else "") + \
        ("ILIKE" if isinstance(node, exp.ILike) else "LIKE")
    args = tuple(VARCHAR if t in (TEXT, NULL) else t
                 for t in (b.type_of(node.this), b.type_of(node.expression)))
    return b.use(name, args, node)


def _neg(b: Binder, node: exp.Neg) -> str:
    t = b.type_of(node.this)
    if t in (NULL, DECIMAL):
        return t
    return b.use("-", (t,), node)


def _case(b: Binder, node: exp.Case) -> str:
    for branch in node.args["ifs"]:
        cond = exp.EQ(this=node.this, expression=branch.this) if node.this is not None \
            else branch.this
        t = b.type_of(cond)
        if t not in (BOOLEAN, NULL, REFUSED):
            raise Unsupported(f"the csv engine does not run CASE WHEN over a {t} condition "
                              f"(in {node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
    values = [i.args["true"] for i in node.args["ifs"]]
    if node.args.get("default") is not None:
        values.append(node.args["default"])
    t = b.unify(values, node)
    if t in (NULL, REFUSED):
        return t
    return b.use("CASE", (BOOLEAN, t), node)


def _coalesce(b: Binder, node: exp.Expression) -> str:
    t = b.unify([node.this, *node.expressions], node)
    return b.use("COALESCE", (t, t), node) if t not in (NULL, REFUSED) else t


def _cast(b: Binder, node: exp.Cast) -> str:
    source = b.type_of(node.this)
    to = node.to
    name = to.this.name if hasattr(to.this, "name") else str(to.this)
    target = _CAST_NAMES.get(name)
    if target is None:
        raise Unsupported(f"the csv engine does not run CAST to {to.sql(dialect='duckdb')}",
                          engines=ENGINES_FOR_MORE)
    if source == NULL:
        return target
    if source == REFUSED:
        return target
    if target == VARCHAR:
        _raw_text(b, node.this, source)
    if source == DOUBLE and target in _INTEGERS and isinstance(node.this, exp.Column):
        # DuckDB's read_csv parses such a column's text as the integer type: -2.5 is -3
        # there, where a DOUBLE's cast rounds to even (-2)
        raise Unsupported(f"the csv engine does not run CAST of the DOUBLE column "
                          f"{node.this.name} to {target}: DuckDB's read_csv reads its text "
                          "as the integer", engines=ENGINES_FOR_MORE)
    _text_fits(node.this, target)
    found = cast_entry(source, target)
    if found is None:
        raise Unsupported(f"the csv engine does not run CAST({source} AS {target}) (in "
                          f"{node.sql(dialect='duckdb')[:60]}); docs/csv.md lists what it "
                          "runs itself", engines=ENGINES_FOR_MORE)
    b.used.append(found)
    return target


def _paren(b: Binder, node: exp.Expression) -> str:
    return b.type_of(node.this)


def _function(name: str, *fixed: str) -> Callable[[Binder, exp.Expression], str]:
    def bind(b: Binder, node: exp.Expression) -> str:
        t = b.type_of(node.this)
        args = (VARCHAR if t == TEXT else t, *fixed)
        if t == NULL:
            return NULL
        return b.use(name, args, node)
    return bind


def _round(b: Binder, node: exp.Round) -> str:
    t = b.type_of(node.this)
    if t == NULL:
        return NULL
    if t == DECIMAL:
        raise Unsupported("the csv engine does not run round of a DECIMAL constant",
                          engines=ENGINES_FOR_MORE)
    digits = node.args.get("decimals")
    if digits is None:
        return b.use("round", (t,), node)
    places = _constant(digits)
    if places is None or places < 0:
        raise Unsupported("the csv engine runs round only to a constant number of decimal "
                          "places, 0 or more", engines=ENGINES_FOR_MORE)
    return b.use("round", (t, b.type_of(digits)), node)


def _constant(node: exp.Expression) -> int | None:
    """The value of an integer constant (``3``, ``-3``, ``(3)``), or None."""
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Neg):
        inner = _constant(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None


def _substr(b: Binder, node: exp.Substring) -> str:
    start, length = node.args["start"], node.args.get("length")
    first = _constant(start)
    if first is None or first < 1 or (length is not None and _constant(length) is None
                                      and not isinstance(length, exp.Null)):
        raise Unsupported("the csv engine runs substr only with a constant start of at least "
                          "1 and a constant length", engines=ENGINES_FOR_MORE)
    args = [b.type_of(node.this), b.type_of(start)]
    if length is not None:
        args.append(b.type_of(length))
    widened = tuple(VARCHAR if a == TEXT else BIGINT if a in (INTEGER, NULL) else a for a in args)
    return b.use("substr", widened, node)


def _trim(b: Binder, node: exp.Expression) -> str:
    return _function("trim")(b, node)


def _raw_text(b: Binder, node: exp.Expression, t: str) -> None:
    """Refuse a CSV column of another type taken as text: DuckDB 2.0's read_csv then reads
    its raw text (``007`` for 7, ``1.50`` for 1.5) and binds the column as VARCHAR in the
    whole query."""
    if isinstance(node, exp.Column) and node.name.lower() in b.columns and t != VARCHAR:
        raise Unsupported(f"the csv engine does not run {node.name} ({t}) as text: DuckDB "
                          "reads a CSV column cast to VARCHAR as its raw text",
                          engines=ENGINES_FOR_MORE)


def _concat(b: Binder, node: exp.Expression) -> str:
    left, right = b.type_of(node.this), b.type_of(node.expression)
    if NULL in (left, right):
        # DuckDB types `'x' || NULL` as NULL (an Arrow null column), not VARCHAR
        raise Unsupported("the csv engine does not run || with a NULL constant",
                          engines=ENGINES_FOR_MORE)
    _raw_text(b, node.this, left)
    _raw_text(b, node.expression, right)
    args = [VARCHAR if t in (TEXT, NULL) else BIGINT if t == INTEGER else t
            for t in (left, right)]
    if args[0] != VARCHAR:
        args.reverse()
    return b.use("||", (args[0], args[1]), node)


def _temporal_arg(b: Binder, node: exp.Expression) -> str:
    t = b.type_of(node)
    return TIMESTAMP if t == TEXT else t


def _date_trunc(b: Binder, node: exp.Expression) -> str:
    if not isinstance(node.args.get("unit"), exp.Var | exp.Literal):
        raise Unsupported("the csv engine runs date_trunc with a constant unit only",
                          engines=ENGINES_FOR_MORE)
    return b.use("date_trunc", (VARCHAR, _temporal_arg(b, node.this)), node)


def _strftime(b: Binder, node: exp.TimeToStr) -> str:
    from gateway_csv.temporal import strftime_arguments

    value, fmt = strftime_arguments(node)
    fmt_type = b.type_of(fmt)
    return b.use("strftime", (_temporal_arg(b, value),
                              VARCHAR if fmt_type == TEXT else fmt_type), node)


def _date_part(b: Binder, node: exp.Expression) -> str:
    from gateway_csv.temporal import date_part_arguments, part_name

    found = date_part_arguments(node)
    if found is None:
        raise Unsupported(f"the csv engine does not run {node.sql(dialect='duckdb')[:60]}",
                          engines=ENGINES_FOR_MORE)
    part, value = found
    name = "date_part(epoch)" if part_name(part) == "epoch" else "date_part"
    return b.use(name, (VARCHAR, _temporal_arg(b, value)), node)


def _aggregate(name: str) -> Callable[[Binder, exp.Expression], str]:
    def bind(b: Binder, node: exp.Expression) -> str:
        arg = node.this
        if isinstance(arg, exp.Star):
            return b.use("count(*)", (), node)
        label = name
        if isinstance(arg, exp.Distinct):
            label = f"{name}(DISTINCT)"
            arg = arg.expressions[0] if len(arg.expressions) == 1 else arg
        t = b.type_of(arg)
        if t == INTEGER and name in ("sum", "avg"):
            t = BIGINT  # DuckDB adds up INTEGER and BIGINT alike (HUGEINT, DOUBLE)
        if t in (NULL, TEXT, DECIMAL):
            raise Unsupported(f"the csv engine does not run {name} of a {t} constant",
                              engines=ENGINES_FOR_MORE)
        if name == "median" and not isinstance(arg, exp.Column):
            # the fused scan's alone, which reads a column (gateway_csv.fused)
            raise Unsupported("the csv engine runs median of a column only",
                              engines=ENGINES_FOR_MORE)
        return b.use(label, (t,), node)
    return bind


def _statistic(name: str) -> Callable[[Binder, exp.Expression], str]:
    """var_samp, ..., corr: of columns only, as the fused scan computes them (each an
    INTEGER, BIGINT or DOUBLE, made a double as DuckDB casts it)."""
    def bind(b: Binder, node: exp.Expression) -> str:
        args = [node.this] + ([node.expression] if node.expression is not None else [])
        if not all(isinstance(a, exp.Column) and a.name.lower() in b.columns for a in args):
            raise Unsupported(f"the csv engine runs {name} of columns only (in "
                              f"{node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
        types = tuple(BIGINT if t == INTEGER else t for t in (b.type_of(a) for a in args))
        return b.use(name, types, node)
    return bind


def _pow(b: Binder, node: exp.Expression) -> str:
    """pow(x, y) (power, ^, **) of numbers, each made a DOUBLE (DuckDB's one signature)."""
    for arg in (node.this, node.expression):
        t = b.type_of(arg)
        if t not in (INTEGER, BIGINT, DECIMAL, DOUBLE):
            raise Unsupported(f"the csv engine does not run pow of a {t} (in "
                              f"{node.sql(dialect='duckdb')[:60]})", engines=ENGINES_FOR_MORE)
    return b.use("pow", (DOUBLE, DOUBLE), node)


def _quantile_cont(b: Binder, node: exp.Expression) -> str:
    """quantile_cont(column, q): the fused scan's, of a column and a plain q from 0 to 1
    (DuckDB refuses one past 1, and reads one below 0 as a descending quantile)."""
    from gateway_csv.query import quantile

    if not isinstance(node.this, exp.Column) or quantile(node.expression) is None:
        raise Unsupported("the csv engine runs quantile_cont of a column and a constant "
                          "from 0 to 1 only", engines=ENGINES_FOR_MORE)
    return b.use("quantile_cont", (b.type_of(node.this), b.type_of(node.expression)), node)


_BIND: dict[type, Callable[[Binder, Any], str]] = {
    exp.Column: _column, exp.Literal: lambda b, n: _literal(n), exp.Null: lambda b, n: NULL,
    exp.Boolean: lambda b, n: BOOLEAN, exp.Paren: _paren, exp.Alias: _paren,
    exp.EQ: _comparison("="), exp.NEQ: _comparison("<>"), exp.GT: _comparison(">"),
    exp.GTE: _comparison(">="), exp.LT: _comparison("<"), exp.LTE: _comparison("<="),
    exp.And: _boolean("AND"), exp.Or: _boolean("OR"), exp.Not: _boolean("NOT"),
    exp.Is: _is, exp.In: _in, exp.Between: _between, exp.Like: _like, exp.ILike: _like,
    exp.Add: _arithmetic("+"), exp.Sub: _arithmetic("-"), exp.Mul: _arithmetic("*"),
    exp.Div: _arithmetic("/"), exp.IntDiv: _arithmetic("//"), exp.Mod: _arithmetic("%"),
    exp.Neg: _neg, exp.Case: _case, exp.Coalesce: _coalesce, exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Year: _function("year"), exp.Month: _function("month"), exp.Day: _function("day"),
    exp.Hour: _function("hour"), exp.TimestampTrunc: _date_trunc, exp.DateTrunc: _date_trunc,
    exp.TimeToStr: _strftime, exp.Extract: _date_part, exp.Anonymous: _date_part,
    exp.Round: _round, exp.Abs: _function("abs"), exp.Floor: _function("floor"),
    exp.Ceil: _function("ceil"), exp.Lower: _function("lower"), exp.Upper: _function("upper"),
    exp.Length: _function("length"), exp.Substring: _substr, exp.Trim: _trim,
    exp.DPipe: _concat,
    exp.Count: _aggregate("count"), exp.Sum: _aggregate("sum"), exp.Avg: _aggregate("avg"),
    exp.Min: _aggregate("min"), exp.Max: _aggregate("max"), exp.Median: _aggregate("median"),
    exp.Variance: _statistic("var_samp"), exp.VariancePop: _statistic("var_pop"),
    exp.Stddev: _statistic("stddev_samp"), exp.StddevSamp: _statistic("stddev_samp"),
    exp.StddevPop: _statistic("stddev_pop"), exp.CovarSamp: _statistic("covar_samp"),
    exp.CovarPop: _statistic("covar_pop"), exp.Corr: _statistic("corr"), exp.Pow: _pow,
    exp.PercentileCont: _quantile_cont,
}


def bind(query: Query, columns: Mapping[str, str]) -> tuple[list[str], list[Native]]:
    """DuckDB's type of each select item of ``query``, and the native entries it uses.

    Every expression of the query (select list, WHERE, GROUP BY, HAVING, ORDER BY) is
    bound; a WHERE or HAVING condition must be BOOLEAN.

    Raises:
        Unsupported: an operation, a cast or a type outside :data:`gateway_csv.native.NATIVE`.
    """
    binder = Binder(columns, {name.lower(): e for name, e in query.items})
    outputs = []
    for _, node in query.items:
        t = binder.type_of(node)
        if t == TEXT:
            t = VARCHAR
        if t == DECIMAL:
            raise Unsupported("the csv engine does not answer DECIMAL values (it holds "
                              "decimal constants as DOUBLE)", engines=ENGINES_FOR_MORE)
        outputs.append(t)
    for cond in [*query.where, *([query.having] if query.having is not None else [])]:
        t = binder.type_of(cond)
        if t not in (BOOLEAN, NULL, REFUSED):
            raise Unsupported(f"the csv engine does not filter on a {t} condition",
                              engines=ENGINES_FOR_MORE)
    for node in [*query.group, *(o[0] for o in query.order)]:
        if not (isinstance(node, exp.Literal) and not node.is_string):
            binder.type_of(node)
    return outputs, binder.used


__all__ = ["Binder", "bind", "common", "lookup"]
