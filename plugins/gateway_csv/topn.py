"""The first k rows of each group, as the fused scan keeps them (h2o's q8).

:func:`top_n` reads exactly one shape::

    SELECT <cols> FROM (SELECT <cols>, row_number() OVER (PARTITION BY <keys>
        ORDER BY <col> [ASC|DESC] [NULLS FIRST|LAST]) AS rn FROM t [WHERE ...]) [AS] s
    WHERE rn <= k            -- or rn < k

and :func:`answer` answers it with a top-k aggregate per group in the scan
(:data:`gateway_csv.fused.A_TOP`: k of 1 or 2 in the group's record, else at most 2k
values a group held, pruned by selection), one row per value kept. It is admitted only where DuckDB's answer is one
multiset of rows: the outer select lists partition keys and the order column alone
(not rn, nor another column, which ties would make row_number pick arbitrarily), the
keys are columns the scan reads (not DOUBLE ones: -0.0 and 0.0 are one partition, whose
rows keep their own signs), the order column a BIGINT or DOUBLE one, the inner
WHERE one the scan runs, k from 1 to :data:`MOST`. A group whose cut falls among
zeros of both signs (-0.0 and 0.0 tie in DuckDB's ORDER BY, so either may be kept) is
refused when its rows are made. The rows come in no particular order, as DuckDB's
without an ORDER BY. Everything else is :class:`gateway.errors.Unsupported`.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa
import sqlglot
from sqlglot import exp

from gateway.errors import QueryError, Unsupported
from gateway.records import FrozenRecord
from gateway_csv import fused
from gateway_csv.columns import answer_table
from gateway_csv.layout import FLOAT, INT, Layout
from gateway_csv.query import ENGINES_FOR_MORE, pushdown, source_name
from gateway_csv.scan import Scanner
from gateway_csv.typenames import column_types

#: the largest k read
MOST = 64


class TopN(FrozenRecord):
    """A statement :func:`top_n` read: the table, each output's (name or None, column),
    the partition keys, the order column, its direction and NULL order, k, the inner
    WHERE's conjuncts and the columns the subquery selects."""

    __slots__ = ("table", "outputs", "keys", "order", "desc", "nulls_first", "k", "where",
                 "selected")
    table: Final[tuple[str, bool]]
    outputs: Final[tuple[tuple[str | None, str], ...]]
    keys: Final[tuple[str, ...]]
    order: Final[str]
    desc: Final[bool]
    nulls_first: Final[bool]
    k: Final[int]
    where: Final[tuple[exp.Expression, ...]]
    selected: Final[tuple[str, ...]]

    def __init__(self, table: tuple[str, bool], outputs: tuple[tuple[str | None, str], ...],
                 keys: tuple[str, ...], order: str, desc: bool, nulls_first: bool, k: int,
                 where: tuple[exp.Expression, ...], selected: tuple[str, ...]) -> None:
        self.table, self.outputs, self.keys, self.order = table, outputs, keys, order
        self.desc, self.nulls_first, self.k, self.where = desc, nulls_first, k, where
        self.selected = selected


def _refused(what: str) -> Unsupported:
    return Unsupported(f"the csv engine does not run {what}", engines=ENGINES_FOR_MORE)


def _only(node: exp.Expression, allowed: tuple[str, ...]) -> bool:
    return all(k in allowed for k, v in node.args.items() if v)


def _column(node: exp.Expression) -> str | None:
    """The name of a plain, unqualified column."""
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier) and \
            _only(node, ("this",)):
        return node.name
    return None


def top_n(sql: str) -> TopN | None:
    """``sql`` as the first k rows of each group; None when it is not that shape (the
    planner then says what it does not run).

    Raises:
        Unsupported: the shape, but an answer the scan does not give (or not one answer).
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb")
                      if s is not None and not isinstance(s, exp.Semicolon)]
    except sqlglot.errors.SqlglotError:
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        return None
    outer = statements[0]
    source = outer.args.get("from_") or outer.args.get("from")
    sub = source.this if source is not None else None
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return None
    inner = sub.this
    window = [item for item in inner.expressions
              if isinstance(item, exp.Alias) and isinstance(item.this, exp.Window)]
    if len(window) != 1 or not isinstance(window[0].this.this, exp.RowNumber):
        return None
    if not _only(outer, ("expressions", "from", "from_", "where")) or \
            not _only(inner, ("expressions", "from", "from_", "where")) or \
            not _only(sub, ("this", "alias")) or \
            (sub.args.get("alias") is not None and sub.args["alias"].args.get("columns")):
        raise _refused("a top-N per group other than SELECT ... FROM (SELECT ..., "
                       "row_number() OVER (...) AS rn FROM t [WHERE ...]) WHERE rn <= k")
    rn_alias = window[0].alias
    over = window[0].this
    if not _only(over, ("this", "partition_by", "order", "over")) or \
            over.args.get("over", "").upper() != "OVER":
        raise _refused("a window other than OVER (PARTITION BY ... ORDER BY one column)")
    keys = [_column(k) for k in over.args.get("partition_by") or []]
    order = over.args.get("order")
    ordered = order.expressions if order is not None and _only(order, ("expressions",)) else []
    if any(k is None for k in keys) or len(ordered) != 1 or \
            not _only(ordered[0], ("this", "desc", "nulls_first")) or _column(ordered[0].this) is None:
        raise _refused("row_number() over other than PARTITION BY columns ORDER BY one column")
    order_column = _column(ordered[0].this) or ""
    inner_columns = []
    for item in inner.expressions:
        if item is window[0]:
            continue
        name = _column(item)
        if name is None:
            raise _refused("a top-N per group whose subquery selects more than columns")
        inner_columns.append(name.lower())
    if rn_alias.lower() in inner_columns:
        raise _refused(f"a top-N per group whose row number is named as a column, {rn_alias}")
    k = _limit(outer.args.get("where"), rn_alias)
    outputs: list[tuple[str | None, str]] = []
    wanted = {name.lower() for name in keys} | {order_column.lower()}
    for item in outer.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        name = _column(item.this if isinstance(item, exp.Alias) else item)
        if name is None or name.lower() not in inner_columns:
            # rn, *, an expression, a name the subquery lacks: not one answer, or DuckDB's error
            raise _refused("a top-N per group whose outer select is other than its partition "
                           "keys and order column")
        if name.lower() not in wanted:
            raise _refused(f"a top-N per group selecting {name}, which ties make row_number "
                           "pick arbitrarily")
        outputs.append((alias, name))
    table = source_name(inner)
    if table is None:
        return None
    where = inner.args.get("where")
    conjuncts = _conjuncts(where.this) if where is not None else []
    return TopN(table, tuple(outputs), tuple(k_ for k_ in keys if k_ is not None), order_column,
                bool(ordered[0].args.get("desc")), bool(ordered[0].args.get("nulls_first")), k,
                tuple(conjuncts), tuple(inner_columns))


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _limit(where: exp.Where | None, rn: str) -> int:
    """k of ``WHERE rn <= k`` (``rn < k``: k - 1)."""
    cond = where.this if where is not None else None
    while isinstance(cond, exp.Paren):
        cond = cond.this
    if isinstance(cond, exp.LTE | exp.LT) and (_column(cond.this) or "").lower() == rn.lower() \
            and isinstance(cond.expression, exp.Literal) and not cond.expression.is_string \
            and cond.expression.this.isdigit():
        k = int(cond.expression.this) - isinstance(cond, exp.LT)
        if 1 <= k <= MOST:
            return k
        raise _refused(f"a top-N per group of k = {k} (the scan keeps 1 to {MOST})")
    raise _refused("a top-N per group other than WHERE rn <= k or rn < k")


def answer(scanners: list[Scanner], shape: TopN) -> pa.Table:
    """The rows of ``shape`` over the scanners' files (each of the first one's layout)."""
    layout = scanners[0].layout
    if any(s.layout.names != layout.names or s.layout.kinds != layout.kinds for s in scanners[1:]):
        raise _refused("a top-N per group over files of different columns")
    planned = _plan(layout, shape)
    try:
        keys, values = fused.run_top(scanners, planned)
    except ValueError as exc:
        raise _refused(f"this top-N per group: {exc}") from None
    columns = {layout.names[col].lower(): arr
               for (col, _), arr in zip(planned.key_columns, keys, strict=True)}
    columns[shape.order.lower()] = values
    types = column_types(layout)
    names, arrays, out_types = [], [], []
    for alias, name in shape.outputs:
        idx = layout.column_index(name)
        assert idx is not None
        names.append(alias if alias is not None else layout.names[idx])
        arrays.append(columns[name.lower()])
        out_types.append(types[name.lower()])
    return answer_table(names, arrays, out_types)


def _plan(layout: Layout, shape: TopN) -> fused.FusedAggregate:
    for name in (*shape.keys, shape.order, *shape.selected):
        if layout.column_index(name) is None:
            raise QueryError(f"no column named {name!r} in {shape.table[0]}", kind="unknown_object")
    keys = []
    for name in shape.keys:
        idx = fused.native_column(layout, name)
        if idx is None or layout.kinds[idx] == FLOAT:
            # a DOUBLE key is one group for -0.0 and 0.0 (and every NaN), whose rows DuckDB
            # gives with each row's own value: not the group's one key
            raise _refused(f"a top-N per group partitioned by {name}")
        keys.append(fused.Key(idx, fused.F_IDENT))
    order = fused.native_column(layout, shape.order)
    if order is None or layout.kinds[order] not in (INT, FLOAT):
        raise _refused(f"a top-N per group ordered by {shape.order} (a BIGINT or DOUBLE "
                       "column only)")
    filters: list[tuple[int, int, str, Any]] = []
    for cond in shape.where:
        pushed = pushdown(cond, layout, {}) if _plain_columns(cond) else None
        if pushed is None:
            raise _refused(f"a top-N per group filtered by {cond.sql(dialect='duckdb')[:60]}")
        filters.extend(pushed)
    planned = fused.plan(layout, keys, [(fused.A_TOP, order)], filters,
                         top=(shape.k, shape.desc, shape.nulls_first))
    if planned is None:
        raise _refused("this top-N per group")
    return planned


def _plain_columns(cond: exp.Expression) -> bool:
    return all(_column(c) is not None for c in cond.find_all(exp.Column))


__all__ = ["MOST", "TopN", "answer", "top_n"]
