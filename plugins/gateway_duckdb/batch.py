"""Many rows of parameters in one DuckDB statement: ``executemany`` of an INSERT as one
``INSERT ... SELECT`` over the rows, handed to DuckDB as an Arrow table.

Run row by row, each execution cost a parse, a bind and a commit: 93 us a row in
DuckDB's own ``executemany`` and about 2.6 ms a row through the Flight service,
so 50,000 rows of three integers ran past a two-minute timeout. One statement
over the whole table inserts the same rows, in the same order (DuckDB keeps the
insertion order of a scan), in one transaction: a failing row now fails them all,
where row by row the rows before it stayed.
"""

from __future__ import annotations

from typing import Any

#: the name the parameter rows are registered under, for the one statement
RELATION = "__arrowgate_parameter_rows"


def insert_select(sql: str, count: int) -> str | None:
    """``sql``, an ``INSERT ... VALUES (row)`` whose one row is made of expressions over
    placeholders, as an ``INSERT ... SELECT`` over :data:`RELATION`, whose columns
    ``p1`` ... ``pN`` hold the parameters; None for any other statement.

    ``count`` is the number of placeholders; ``?`` are numbered in order, ``$n``
    by their number (a statement mixing both, or naming them, is left alone).
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except SqlglotError:
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Insert):
        return None
    insert = statements[0]
    values = insert.expression
    if not isinstance(values, exp.Values) or len(values.expressions) != 1:
        return None
    row = values.expressions[0]
    if not isinstance(row, exp.Tuple) or row.find(exp.Select) is not None:
        return None
    numbers = _numbers(list(row.find_all(exp.Placeholder, bfs=False)), count)
    if numbers is None:
        return None
    found = iter(numbers)

    def column(node: Any) -> Any:
        if isinstance(node, exp.Placeholder):
            return exp.column(f"p{next(found)}", table=RELATION)
        return node

    columns = [e.copy().transform(column) for e in row.expressions]
    insert.set("expression", exp.select(*columns).from_(RELATION))
    return insert.sql(dialect="duckdb")


def _numbers(placeholders: list[Any], count: int) -> list[int] | None:
    """Each placeholder's parameter number (1-based, in the order they are found), or None."""
    if not placeholders:
        return None
    named = [p.this for p in placeholders]
    if all(n is None for n in named):
        numbers = list(range(1, len(placeholders) + 1))
    elif all(isinstance(n, str) and n.isdigit() for n in named):
        numbers = [int(n) for n in named]
    else:
        return None
    return numbers if max(numbers) <= count and set(numbers) == set(range(1, count + 1)) \
        else None
