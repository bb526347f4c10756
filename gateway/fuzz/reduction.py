"""Shrinking a failing query to a minimal one by tree reduction (for the fuzzer).

:func:`shrink` takes a sqlglot tree and a predicate ("does this query still
show the divergence?") and greedily applies the first reduction the predicate
accepts, until none is accepted: drop a clause (WHERE, HAVING, ORDER BY,
LIMIT, DISTINCT), drop one projection, GROUP BY key or ORDER BY term, replace
an expression by one of its operands, lower a LIMIT. Every candidate is
smaller than the tree it came from, so the loop ends; ``budget`` caps the
predicate calls. This is the hierarchical delta debugging of C-Reduce and
SQLancer's reducer, on the SQL syntax tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

_CLAUSES = ("where", "having", "order", "limit", "offset", "distinct")


def shrink(tree: exp.Expr, still_fails: Callable[[exp.Expr], bool],
           budget: int = 400) -> exp.Expr:
    """The smallest tree reached from ``tree`` for which ``still_fails`` holds.

    Args:
        tree: a query for which ``still_fails(tree)`` is True.
        still_fails: runs a candidate and says whether the divergence remains.
        budget: at most this many calls of ``still_fails``.
    """
    calls = 0
    progress = True
    while progress and calls < budget:
        progress = False
        for candidate in reductions(tree):
            calls += 1
            if still_fails(candidate):
                tree, progress = candidate, True
                break
            if calls >= budget:
                break
    return tree


def reductions(tree: exp.Expr) -> Iterator[exp.Expr]:
    """Smaller variants of ``tree``, the largest cuts first."""
    select = tree if isinstance(tree, exp.Select) else None
    if select is not None:
        for clause in _CLAUSES:
            if select.args.get(clause):
                yield _without(select, clause)
        group = select.args.get("group")
        if group is not None:
            yield _without(select, "group")
            for i in range(len(group.expressions)):
                yield _dropping(select, ("group", "expressions"), i)
        if len(select.expressions) > 1:
            for i in range(len(select.expressions)):
                yield _dropping(select, ("expressions",), i)
        order = select.args.get("order")
        if order is not None and len(order.expressions) > 1:
            for i in range(len(order.expressions)):
                yield _dropping(select, ("order", "expressions"), i)
        limit = select.args.get("limit")
        if limit is not None and isinstance(limit.expression, exp.Literal):
            value = int(limit.expression.this)
            if value > 1:
                smaller = select.copy()
                smaller.args["limit"].set("expression", exp.Literal.number(value // 2))
                yield smaller
    yield from _operand_replacements(tree)


def _without(select: exp.Select, clause: str) -> exp.Expr:
    smaller = select.copy()
    smaller.set(clause, None)
    return smaller


def _dropping(select: exp.Select, path: tuple[str, ...], index: int) -> exp.Expr:
    smaller = select.copy()
    node: exp.Expr = smaller
    for key in path[:-1]:
        node = node.args[key]
    items = list(node.args[path[-1]])
    del items[index]
    node.set(path[-1], items)
    return smaller


def _operand_replacements(tree: exp.Expr) -> Iterator[exp.Expr]:
    """``tree`` with one expression replaced by one of its operands (``a AND b`` -> ``a``)."""
    nodes = [n for n in tree.walk() if _replaceable(n)]
    for index, node in enumerate(nodes):
        for operand in range(len(_operands(node))):
            smaller = tree.copy()
            target = [n for n in smaller.walk() if _replaceable(n)][index]
            replacement = _operands(target)[operand].copy()
            if target is smaller:
                yield replacement
                continue
            target.replace(replacement)
            yield smaller


def _replaceable(node: exp.Expr) -> bool:
    return isinstance(node, (exp.Binary, exp.Func, exp.Not, exp.Paren, exp.Case, exp.Neg,
                             exp.Between, exp.In, exp.Is, exp.Like)) \
        and not isinstance(node, (exp.AggFunc, exp.Alias))


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """The expressions ``node`` could be replaced by (a CASE by its branches' values)."""
    out = []
    for child in node.iter_expressions():
        if isinstance(child, exp.If):
            out.append(child.args["true"])
        elif not isinstance(child, (exp.DataType, exp.Identifier, exp.Star)):
            out.append(child)
    return out
