"""Random SQL queries over one table's columns, built as sqlglot trees (for the fuzzer).

:class:`QueryGenerator` draws SELECT statements from the subset every engine
of the gateway aims to run: filters (comparisons, ``IS [NOT] NULL``,
``BETWEEN``, ``IN``, ``LIKE``, ``AND``/``OR``/``NOT``), scalar expressions
(arithmetic with ``/`` and ``%``, ``abs``, ``round``, ``coalesce``, ``CASE``,
casts of numbers to text and of doubles to integers, ``lower``, ``substring``,
``||``, ``EXTRACT``, ``date_trunc``), aggregates (``count``,
``count(DISTINCT)``, ``sum``, ``min``, ``max``, ``avg``), ``GROUP BY``, ``HAVING``, ``ORDER BY``, ``LIMIT``, ``DISTINCT``,
the first k rows of each group (``row_number() OVER (PARTITION BY ... ORDER BY ...) <= k``,
h2o's q8, selecting only what makes the answer one multiset), NULLs and
edge values (zero, -1, the 32- and 64-bit limits, halves for rounding). The
same seed draws the same queries. SQLsmith and SQLancer are the models: many
small random queries, each judged by a second engine.

Columns are described by :class:`Column` (a name and a kind read from the
Arrow type); literals are drawn from values the table holds and from the edges.
A generator can be told to leave constructs out (``without=["round"]``, by
sqlglot's expression names): once a divergence is understood, a run over the
rest finds the next one instead of the same one again (SQLancer's generators
skip known bugs the same way).

Given an engine's table of native operations (:class:`Operations`, such as the csv
engine's), half of the expressions, conditions and aggregates are drawn from it
instead: each entry over columns of its argument types and the table's adversarial
constants (NaN, the integer edges, backslashes, ``İ``, empty formats), so that every
operation the engine evaluates itself is generated; :attr:`QueryGenerator.used` names
the entries the last query holds.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlglot
from sqlglot import exp

#: literals at the edges, per kind, mixed with the table's own values
EDGES: dict[str, list[Any]] = {
    # one past BIGINT each way: DuckDB reads such a literal as HUGEINT (a pushed-down filter
    # once failed on it)
    "int": [0, 1, -1, 2, 2147483647, -2147483648, 9223372036854775807, -9223372036854775808,
            9223372036854775808, -9223372036854775809],
    "float": [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e15, -1.0, float("nan"), float("inf"),
              float("-inf"), 1.7976931348623157e308, 5e-324],
    "string": ["", "a", "A", " ", "%", "_", "\\", "İ", "ß"],
}

#: draws a generator makes for one query before it gives up on its ``without`` list
REDRAWS = 1000


def expression_types(names: Iterable[str]) -> tuple[type[exp.Expr], ...]:
    """The sqlglot expression classes named (``round``, ``intdiv``, ``Like``; any case).

    Raises:
        ValueError: a name that is no sqlglot expression.
    """
    known = {cls.key: cls for cls in vars(exp).values()
             if isinstance(cls, type) and issubclass(cls, exp.Expr)}
    out = []
    for name in names:
        cls = known.get(name.strip().lower())
        if cls is None:
            raise ValueError(f"{name!r} is not a sqlglot expression name "
                             "(such as round, intdiv, like, between, case, distinct, limit)")
        out.append(cls)
    return tuple(out)


@dataclass
class Column:
    """One column of the fuzzed table.

    Attributes:
        name: as the engines spell it.
        kind: ``int``, ``float``, ``string``, ``bool``, ``temporal`` or ``other``.
        values: a sample of the values it holds (literals are drawn from them).
        sql_type: its type as DuckDB names it (BIGINT, DOUBLE, VARCHAR, TIMESTAMPTZ, ...),
            which an operations table's argument types are matched against.
    """

    name: str
    kind: str
    values: list[Any] = field(default_factory=list)
    sql_type: str = ""

    @classmethod
    def from_arrow(cls, table: Any) -> list[Column]:
        """The columns of an Arrow table (a sample of the source), with their values."""
        import pyarrow as pa

        out = []
        for f, col in zip(table.schema, table.columns, strict=True):
            t = f.type
            kind = ("int" if pa.types.is_integer(t) else
                    "float" if pa.types.is_floating(t) or pa.types.is_decimal(t) else
                    "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else
                    "bool" if pa.types.is_boolean(t) else
                    "temporal" if pa.types.is_temporal(t) else "other")
            values = [v for v in col.to_pylist() if v is not None and not isinstance(v, bytes)]
            out.append(cls(f.name, kind, sorted(set(values), key=repr)[:50], _sql_type(t)))
        return out


def _sql_type(t: Any) -> str:
    """DuckDB's name of an Arrow type, for the types an operations table names."""
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_decimal(t):
        return "HUGEINT" if t.scale == 0 and t.precision == 38 else "DECIMAL"
    return {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE",
            pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.bool_(): "BOOLEAN",
            pa.date32(): "DATE", pa.time64("us"): "TIME"}.get(t, str(t).upper())


def literal(value: Any) -> exp.Expr:
    """A value of a column (as Arrow hands it to Python) written as SQL of its own type.

    NaN and the infinities are ``'nan'::DOUBLE`` (a bare ``nan`` would name a column),
    decimals are numbers, and times, dates and timestamps (with a zone or not) are casts
    of their text to TIME, DATE, TIMESTAMP or TIMESTAMPTZ.
    """
    import datetime
    import decimal
    import math

    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float) and not math.isfinite(value):
        return exp.Cast(this=exp.Literal.string(repr(value)), to=exp.DataType.build("DOUBLE"))
    if isinstance(value, (int, float, decimal.Decimal)):
        text = repr(value) if isinstance(value, float) else str(value)
        if text.startswith("-"):
            return exp.Neg(this=exp.Literal.number(text[1:]))
        return exp.Literal.number(text)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, datetime.datetime):
        sql_type = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
    elif isinstance(value, datetime.date):
        sql_type = "DATE"
    elif isinstance(value, datetime.time):
        sql_type = "TIME"
    else:
        return exp.Literal.string(str(value))
    return exp.Cast(this=exp.Literal.string(str(value)), to=exp.DataType.build(sql_type))


class Operations(Protocol):
    """A table of native operations (an engine's ``native_operations``, such as the csv
    engine's ``gateway_csv.native``) the generator draws expressions from.

    ``NATIVE`` holds entries with ``name``, ``kind`` (operator, function, cast,
    aggregate), ``args`` and ``result`` (DuckDB type names); ``sql(entry, operands)``
    renders one; ``text_arguments(entry)`` gives the constants an argument position must
    be (date parts, formats); ``LITERALS`` holds adversarial constants per type.
    """

    NATIVE: tuple[Any, ...]
    LITERALS: dict[str, tuple[str, ...]]

    def sql(self, entry: Any, operands: list[str]) -> str: ...

    def text_arguments(self, entry: Any) -> dict[int, tuple[str, ...]]: ...


class QueryGenerator:
    """Draws random SELECT statements over ``table``'s ``columns`` (seeded by ``rng``).

    ``without`` names constructs no query may hold (see :func:`expression_types`).
    """

    def __init__(self, table: str, columns: list[Column], rng: random.Random,
                 without: Iterable[str] = (), operations: Operations | None = None):
        self.table = table
        self.without = expression_types(without)
        self.columns = [c for c in columns if c.kind != "other"]
        self.rng = rng
        self.numeric = [c for c in self.columns if c.kind in ("int", "float")]
        self.ordered = [c for c in self.columns if c.kind != "bool"]
        self.operations = operations
        #: the operations table's entries the last query holds (see :meth:`native`)
        self.used: set[str] = set()
        entries = list(operations.NATIVE) if operations is not None else []
        self._row_entries = [e for e in entries if e.kind != "aggregate"]
        self._conditions = [e for e in self._row_entries if e.result == "BOOLEAN"]
        self._aggregates = [e for e in entries if e.kind == "aggregate"]

    # -- statements ---------------------------------------------------------------------
    def query(self) -> exp.Select:
        """One random statement: a projection, an aggregate, or a grouped aggregate.

        Raises:
            ValueError: no query without the constructs left out was drawn in REDRAWS tries.
        """
        for _ in range(REDRAWS):
            self.used = set()
            tree = self._draw()
            if not self.without or tree.find(*self.without) is None:
                return tree
        names = ", ".join(cls.key for cls in self.without)
        raise ValueError(f"almost every query holds one of {names}: leave out fewer")

    def _draw(self) -> exp.Select:
        shape = self.rng.choices(["plain", "aggregate", "group", "top"], weights=[4, 2, 4, 1])[0]
        if shape == "group" and self.columns:
            return self._grouped()
        if shape == "top" and self.ordered and all(c.name.lower() != "rn" for c in self.columns):
            return self._top()
        if shape == "aggregate":
            select = exp.select(*self._aliased([self._aggregate()
                                                for _ in range(self.rng.randint(1, 3))]))
            return self._filtered(select.from_(self._from()))
        return self._plain()

    def _plain(self) -> exp.Select:
        count = self.rng.randint(1, min(4, max(len(self.columns), 1)))
        projections = [self._scalar() for _ in range(count)]
        select = exp.select(*self._aliased(projections)).from_(self._from())
        if self.rng.random() < 0.2:
            select = select.distinct()
        select = self._filtered(select)
        return self._ordered(select, len(projections))

    def _grouped(self) -> exp.Select:
        keys = [self._group_key() for _ in range(self.rng.randint(1, 2))]
        aggregates = [self._aggregate() for _ in range(self.rng.randint(1, 3))]
        select = exp.select(*self._aliased(keys + aggregates)).from_(self._from())
        select = self._filtered(select)
        select = select.group_by(*[k.copy() for k in keys])
        if self.rng.random() < 0.3:
            select = select.having(self._comparison(self._aggregate(), "int"))
        return self._ordered(select, len(keys) + len(aggregates))

    def _top(self) -> exp.Select:
        """The first k rows of each group by row_number(): the outer select lists partition
        keys and the order column only (another column, or rn, would be any of the tied
        rows: no one answer to compare)."""
        def name(col: exp.Expr) -> str:
            return col.sql("duckdb")

        keys = list(dict.fromkeys(name(self._column()[0])
                                  for _ in range(self.rng.randint(0, 2))))
        order = name(self._column(tuple(c.kind for c in self.ordered))[0])
        outputs = self.rng.sample([*keys, order], self.rng.randint(1, len(keys) + 1))
        partition = f"PARTITION BY {', '.join(keys)} " if keys else ""
        direction = self.rng.choice(["", " ASC", " DESC"]) + \
            self.rng.choice(["", " NULLS FIRST", " NULLS LAST"])
        inner = exp.select(*dict.fromkeys([*keys, order])).from_(self._from())
        inner = self._filtered(inner)
        k = self.rng.choice([1, 2, 3, 5])
        cut = self.rng.choice([f"rn <= {k}", f"rn < {k + 1}"])
        window = sqlglot.parse_one(f"SELECT row_number() OVER ({partition}ORDER BY {order}"
                                   f"{direction}) AS rn", read="duckdb").expressions[0]
        subquery = inner.select(window).sql("duckdb")
        return sqlglot.parse_one(f"SELECT {', '.join(outputs)} FROM ({subquery}) AS sub "
                                 f"WHERE {cut}", read="duckdb", into=exp.Select)

    def _ordered(self, select: exp.Select, width: int) -> exp.Select:
        """ORDER BY (every output column, or some) and LIMIT (only under a total order)."""
        roll = self.rng.random()
        if roll < 0.45:
            return select
        positions = list(range(1, width + 1))
        total = roll < 0.85
        if not total:
            positions = self.rng.sample(positions, self.rng.randint(1, width))
        self.rng.shuffle(positions)
        select = select.order_by(*[
            exp.Ordered(this=exp.Literal.number(p), desc=self.rng.random() < 0.4,
                        nulls_first=self.rng.random() < 0.5) for p in positions])
        if total and self.rng.random() < 0.5:
            select = select.limit(self.rng.choice([1, 2, 3, 5, 10]))
        return select

    def _filtered(self, select: exp.Select) -> exp.Select:
        return select.where(self._condition(2)) if self.rng.random() < 0.6 else select

    def _from(self) -> exp.Table:
        return exp.Table(this=exp.to_identifier(self.table, quoted=True))

    def _aliased(self, expressions: list[exp.Expr]) -> list[exp.Expr]:
        """Each expression named ``c<i>``, or now and then left to the engine to name (the
        names engines choose are part of an answer too), unless another is the same."""
        texts = [e.sql() for e in expressions]
        return [e if self.rng.random() < 0.3 and texts.count(texts[i]) == 1
                else exp.alias_(e, f"c{i}") for i, e in enumerate(expressions)]

    # -- expressions ----------------------------------------------------------------------
    def _column(self, kinds: tuple[str, ...] | None = None) -> tuple[exp.Expr, str]:
        pool = [c for c in self.columns if kinds is None or c.kind in kinds] or self.columns
        col = self.rng.choice(pool)
        return exp.column(exp.to_identifier(col.name, quoted=True)), col.kind

    def _literal(self, kind: str, column: Column | None = None) -> exp.Expr:
        if self.rng.random() < 0.05:
            return exp.Null()
        pool = list(EDGES.get(kind, []))
        if column is not None and column.values:
            pool += column.values * 2
        if not pool:
            return exp.Null()
        return literal(self.rng.choice(pool))

    # -- the operations table -------------------------------------------------------------
    def native(self, entries: list[Any]) -> exp.Expr | None:
        """One entry of ``entries`` (drawn evenly, so that every entry is drawn) applied to
        columns of its argument types and the table's adversarial constants; None when no
        entry drawn can be written over these columns."""
        assert self.operations is not None
        for _ in range(20):
            entry = self.rng.choice(entries)
            fixed = self.operations.text_arguments(entry)
            operands = []
            for i, arg in enumerate(entry.args):
                pool = list(fixed.get(i) or self._operands(arg, entry))
                if not pool:
                    break
                operands.append(self.rng.choice(pool))
            else:
                self.used.add(str(entry))
                return sqlglot.parse_one(f"SELECT {self.operations.sql(entry, operands)}",
                                         read="duckdb").expressions[0]
        return None

    def _operands(self, sql_type: str, entry: Any) -> list[str]:
        assert self.operations is not None
        columns = [exp.to_identifier(c.name, quoted=True).sql("duckdb") for c in self.columns
                   if c.sql_type == sql_type]
        as_text = entry.name == "||" or (entry.kind == "cast" and entry.result == "VARCHAR")
        if as_text and sql_type != "VARCHAR":
            # a bare CSV column cast to text is read raw by DuckDB's read_csv: wrap it
            columns = [f"(CASE WHEN {c} IS NOT NULL THEN {c} END)" for c in columns]
        return columns * 2 + list(self.operations.LITERALS.get(sql_type, ()))

    def _scalar(self) -> exp.Expr:
        """A column, or an expression over columns."""
        if self._row_entries and self.rng.random() < 0.5:
            drawn = self.native(self._row_entries)
            if drawn is not None:
                return drawn
        col, kind = self._column()
        roll = self.rng.random()
        if roll < 0.1:
            return exp.Case(ifs=[exp.If(this=self._condition(1), true=col)],
                            default=exp.Null())
        if roll < 0.13:
            return self._failing()
        if kind in ("int", "float") and roll < 0.55:
            return self._numeric(col, kind)
        if kind == "string" and roll < 0.4:
            return self._text(col)
        if kind == "temporal" and roll < 0.4:
            return self._temporal(col)
        return col

    def _numeric(self, col: exp.Expr, kind: str) -> exp.Expr:
        """Arithmetic, rounding and casts: where engines differ on halves, signs and text."""
        other, other_kind = self._column(("int", "float"))
        choices = [
            exp.Add(this=col, expression=other), exp.Sub(this=col, expression=self._literal(kind)),
            exp.Mul(this=col, expression=self._literal("int")), exp.Abs(this=col),
            exp.Coalesce(this=col, expressions=[self._literal(kind)]),
            exp.Div(this=col, expression=other),
            exp.Cast(this=col, to=exp.DataType.build("VARCHAR")),
        ]
        if kind == "int":
            choices.append(exp.Mod(this=col, expression=self._literal("int")))
        if kind == "float" or other_kind == "float":
            source = col if kind == "float" else other
            choices += [exp.Round(this=source),
                        exp.Round(this=source, decimals=exp.Literal.number(1)),
                        exp.Cast(this=source, to=exp.DataType.build("INTEGER"))]
        return self.rng.choice(choices)

    def _text(self, col: exp.Expr) -> exp.Expr:
        length = exp.Literal.number(self.rng.randint(1, 3))
        return self.rng.choice([
            exp.Upper(this=col), exp.Lower(this=col), exp.Length(this=col),
            exp.Coalesce(this=col, expressions=[exp.Literal.string("?")]),
            exp.Substring(this=col, start=exp.Literal.number(1), length=length),
            exp.DPipe(this=col, expression=exp.Literal.string("-")),
        ])

    def _temporal(self, col: exp.Expr) -> exp.Expr:
        unit = exp.var(self.rng.choice(["YEAR", "MONTH", "DAY", "HOUR"]))
        if self.rng.random() < 0.5:
            return exp.Extract(this=unit, expression=col)
        return exp.TimestampTrunc(this=col, unit=unit)

    def _failing(self) -> exp.Expr:
        """An expression that fails on some rows: both engines must fail alike."""
        strings = [c for c in self.columns if c.kind == "string"]
        if strings and self.rng.random() < 0.5:
            text = exp.column(exp.to_identifier(self.rng.choice(strings).name, quoted=True))
            return exp.Cast(this=text, to=exp.DataType.build("INTEGER"))
        col, _ = self._column(("int",))
        return exp.IntDiv(this=col, expression=exp.Literal.number(0))

    def _group_key(self) -> exp.Expr:
        col, kind = self._column()
        if kind == "float" and self.rng.random() < 0.5:
            return exp.Round(this=col) if self.rng.random() < 0.5 else \
                exp.Round(this=col, decimals=exp.Literal.number(1))
        return col

    def _aggregate(self) -> exp.Expr:
        if self._aggregates and self.rng.random() < 0.4:
            drawn = self.native(self._aggregates)
            if drawn is not None:
                return drawn
        roll = self.rng.random()
        if roll < 0.2 or not self.columns:
            return exp.Count(this=exp.Star())
        if roll < 0.35:
            col, _ = self._column()
            return exp.Count(this=exp.Distinct(expressions=[col]) if roll < 0.27 else col)
        if self.numeric and roll < 0.75:
            col, _ = self._column(("int", "float"))
            return self.rng.choice([exp.Sum, exp.Min, exp.Max, exp.Avg])(this=col)
        col, _ = self._column(tuple(c.kind for c in self.ordered) or None)
        return self.rng.choice([exp.Min, exp.Max])(this=col)

    def _condition(self, depth: int) -> exp.Expr:
        roll = self.rng.random()
        if depth > 0 and roll < 0.3:
            left, right = self._condition(depth - 1), self._condition(depth - 1)
            return exp.And(this=left, expression=right) if roll < 0.18 else \
                exp.Or(this=left, expression=right)
        if depth > 0 and roll < 0.36:
            return exp.Not(this=exp.Paren(this=self._condition(depth - 1)))
        if self._conditions and roll < 0.6:
            drawn = self.native(self._conditions)
            if drawn is not None:
                return drawn
        col, kind = self._column()
        column = next(c for c in self.columns if c.name == col.name)
        roll = self.rng.random()
        if roll < 0.15:
            null = exp.Is(this=col, expression=exp.Null())
            return null if roll < 0.08 else exp.Not(this=null)
        if kind == "bool":
            return col
        if roll < 0.25 and kind != "string":
            low, high = self._literal(kind, column), self._literal(kind, column)
            return exp.Between(this=col, low=low, high=high)
        if roll < 0.35:
            return exp.In(this=col, expressions=[self._literal(kind, column)
                                                 for _ in range(self.rng.randint(1, 3))])
        if roll < 0.42 and kind == "string":
            prefix = str(self.rng.choice(column.values or ["a"]))[:1]
            return exp.Like(this=col, expression=exp.Literal.string(prefix + "%"))
        return self._comparison(col, kind, column)

    def _comparison(self, left: exp.Expr, kind: str, column: Column | None = None
                    ) -> exp.Expr:
        op = self.rng.choice([exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE])
        return op(this=left, expression=self._literal(kind, column))
