"""What the outermost query of a statement tells the comparator (read with sqlglot).

Whether order is part of the answer (ORDER BY, mapped to output columns), whether
a LIMIT cuts it, which output columns are GROUP BY keys (rows are paired on
them), and which column names the engine chooses (unaliased expressions such as
``count(*)``, which engines name differently).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OrderTerm:
    """One ORDER BY term and the output column it sorts by.

    ``expression``: for a term that is no output column but an expression over
    output columns only (``-x``, ``lower(s)``, ``s COLLATE NOCASE``), its DuckDB SQL
    with each output column written ``__out_<index>__``, so the comparator can
    compute the key on both answers; else None.
    """

    column: int | None  # output column index, or None when not in the output
    text: str
    expression: str | None = None


@dataclass
class QueryShape:
    """What the outermost query tells the comparator; empty when the SQL cannot be read."""

    parsed: bool = False
    order: list[OrderTerm] = field(default_factory=list)
    has_limit: bool = False
    #: per output column: True when its name is engine-chosen (unaliased expression)
    engine_named: list[bool] = field(default_factory=list)
    #: per output column: True when it is a GROUP BY key; empty when not an aggregate query
    group_keys: list[bool] = field(default_factory=list)
    has_star: bool = False
    projections: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, sql: str | None, dialect: str) -> QueryShape:
        """What ``sql`` tells the comparator, read in ``dialect``; empty when it cannot be read.

        The readings of the last 512 short texts are kept (each caller gets lists of its
        own): a replay compares the answers to one prepared text with every parameter set.
        """
        if sql and len(sql) <= _KEPT_CHARS:
            kept = _kept_shape(sql, dialect)
            return dataclasses.replace(kept, order=list(kept.order),
                                       engine_named=list(kept.engine_named),
                                       group_keys=list(kept.group_keys),
                                       projections=list(kept.projections))
        return cls._read(sql, dialect)

    @classmethod
    def _read(cls, sql: str | None, dialect: str) -> QueryShape:
        if not sql:
            return cls()
        try:
            import sqlglot
            from sqlglot import exp

            statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        except Exception:
            return cls()
        if len(statements) != 1:
            return cls()
        tree = statements[-1]
        shape = cls(parsed=True)
        select = tree
        while isinstance(select, exp.Subquery):
            select = select.this
        if isinstance(select, exp.SetOperation):
            first = select.left
            while not isinstance(first, exp.Select) and isinstance(first, (exp.SetOperation, exp.Subquery)):
                first = first.left if isinstance(first, exp.SetOperation) else first.this
            shape._read_projections(first, exp)
        elif isinstance(select, exp.Select):
            shape._read_projections(select, exp)
            shape._read_groups(select, exp)
        else:
            return cls()
        shape.has_limit = select.args.get("limit") is not None or select.args.get("fetch") is not None
        order = select.args.get("order")
        if order is not None:
            for o in order.expressions:
                if isinstance(o.this, exp.Var) and o.this.name.upper() == "ALL":
                    # ORDER BY ALL: every output column, left to right
                    shape.order += [OrderTerm(i, f"ALL ({i + 1})")
                                    for i in range(len(shape.projections))]
                else:
                    shape.order.append(shape._map_order(o, exp))
        return shape

    def _read_projections(self, select: Any, exp: Any) -> None:
        if not isinstance(select, exp.Select):
            return
        self.projections = list(select.expressions)
        for e in self.projections:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                self.has_star = True
            self.engine_named.append(not isinstance(e, (exp.Alias, exp.Column, exp.Star)))

    def _read_groups(self, select: Any, exp: Any) -> None:
        if self.has_star:
            return
        group = select.args.get("group")
        aggregated = [e.find(exp.AggFunc) is not None for e in self.projections]
        if group is None and not any(aggregated):
            return
        self.group_keys = [not a for a in aggregated]

    def _map_order(self, ordered: Any, exp: Any) -> OrderTerm:
        term = ordered.this
        text = term.sql()
        if isinstance(term, exp.Literal) and term.is_int:
            index = int(term.this) - 1
            return OrderTerm(index if 0 <= index < max(len(self.projections), 1) else None, text)
        for i, proj in enumerate(self.projections):
            bare = proj.this if isinstance(proj, exp.Alias) else proj
            if bare == term:
                return OrderTerm(i, text)
            if isinstance(term, exp.Column) and not term.table and proj.alias_or_name == term.name:
                return OrderTerm(i, text)
        if isinstance(term, exp.Column) and self.has_star:
            return OrderTerm(-1, term.name)  # resolved by name against the answer
        return OrderTerm(None, text, self._over_outputs(term, exp))

    def _over_outputs(self, term: Any, exp: Any) -> str | None:
        """``term`` as an expression over the output columns (OrderTerm.expression), or None
        when it names anything else, aggregates, windows or reads a subquery."""
        if self.has_star or term.find(exp.AggFunc, exp.Window, exp.Select) is not None:
            return None
        missing = []

        def output(node: Any) -> Any:
            if not isinstance(node, exp.Column):
                return node
            for i, proj in enumerate(self.projections):
                bare = proj.this if isinstance(proj, exp.Alias) else proj
                if bare == node or (not node.table and proj.alias_or_name == node.name):
                    return exp.column(f"__out_{i}__")
            missing.append(node)
            return node

        rewritten = term.copy().transform(output)
        if missing or rewritten.find(exp.Column) is None:
            return None
        return rewritten.sql(dialect="duckdb")


#: statements longer than this are read again at each comparison, not kept (memory)
_KEPT_CHARS = 16_384


@functools.lru_cache(maxsize=512)
def _kept_shape(sql: str, dialect: str) -> QueryShape:
    return QueryShape._read(sql, dialect)
