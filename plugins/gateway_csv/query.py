"""From SQL text to a small plan: what to scan, what the scanner fuses, what Arrow finishes.

A statement is parsed with sqlglot (DuckDB dialect) into a :class:`Query`:
one table, the select list with ``*`` expanded, WHERE split into conjuncts,
GROUP BY keys (by expression, name, alias or position), the aggregates used
anywhere, HAVING, ORDER BY and LIMIT/OFFSET. :func:`fused_aggregate` decides
whether the compiled scanner can compute the whole aggregation on the raw
bytes (the Q01-Q04 shapes); otherwise the scanner only extracts the needed
columns and :mod:`gateway_csv.compute` finishes the query.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from gateway.errors import QueryError, Unsupported
from gateway_csv import fused
from gateway_csv.fused import (
    A_AVG,
    A_CORR,
    A_COUNT,
    A_COUNT_STAR,
    A_COVAR_POP,
    A_COVAR_SAMP,
    A_MAX,
    A_MEDIAN,
    A_MIN,
    A_STDDEV_POP,
    A_STDDEV_SAMP,
    A_SUM,
    A_VAR_POP,
    A_VAR_SAMP,
    F_DAY,
    F_HOUR,
    F_IDENT,
    F_MONTH,
    F_ROUND,
    F_YEAR,
    TRUNC_FNS,
    DerivedKey,
    FusedAggregate,
    Key,
)
from gateway_csv.layout import BOOL, DATE, FLOAT, INT, STR, TS, TSTZ, Layout
from gateway_csv.naming import aggregate_name
from gateway_csv.scan import MAX_COLUMNS

# Shared with _scanner.c
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_ISNULL, OP_NOTNULL = range(8)

_OPS = {exp.EQ: OP_EQ, exp.NEQ: OP_NE, exp.LT: OP_LT, exp.LTE: OP_LE, exp.GT: OP_GT,
        exp.GTE: OP_GE}
_FLIP = {OP_LT: OP_GT, OP_LE: OP_GE, OP_GT: OP_LT, OP_GE: OP_LE, OP_EQ: OP_EQ, OP_NE: OP_NE}
_KEY_FNS = {exp.Year: F_YEAR, exp.Month: F_MONTH, exp.Day: F_DAY, exp.Hour: F_HOUR}
#: DuckDB's algebraic aggregates (stddev is stddev_samp, variance var_samp), which only the
#: fused scan computes: of plain columns (gateway_csv.binding refuses any other argument)
STATISTICS = {exp.Variance: A_VAR_SAMP, exp.VariancePop: A_VAR_POP, exp.Stddev: A_STDDEV_SAMP,
              exp.StddevSamp: A_STDDEV_SAMP, exp.StddevPop: A_STDDEV_POP,
              exp.CovarSamp: A_COVAR_SAMP, exp.CovarPop: A_COVAR_POP, exp.Corr: A_CORR}
#: median and quantile_cont, like the statistics, are the fused scan's alone (run.py's Arrow
#: aggregation refuses them)
_AGG_FNS = {exp.Sum: A_SUM, exp.Avg: A_AVG, exp.Min: A_MIN, exp.Max: A_MAX,
            exp.Median: A_MEDIAN, exp.PercentileCont: A_MEDIAN, **STATISTICS}
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Median, exp.PercentileCont,
               *STATISTICS)
#: quantile_cont's constant quantile, as the csv engine reads it (a number from 0 to 1)
QUANTILE = re.compile(r"0?\.[0-9]{1,15}|[01](\.[0-9]{0,15})?")


def quantile(node: exp.Expression | None) -> float | None:
    """The quantile of ``quantile_cont(x, q)``: q a number from 0 to 1 written plainly
    (DuckDB's DECIMAL, made the double it reads), else None."""
    if isinstance(node, exp.Literal) and not node.is_string and QUANTILE.fullmatch(node.this):
        q = float(node.this)
        return q if 0 <= q <= 1 else None
    return None


_REFUSED = {
    exp.Join: "JOIN", exp.Subquery: "a subquery", exp.Window: "a window function",
    exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT", exp.With: "WITH",
    exp.Lateral: "LATERAL", exp.Pivot: "PIVOT", exp.Placeholder: "query parameters",
    exp.Comprehension: "a list comprehension", exp.Lambda: "a lambda",
}


ENGINES_FOR_MORE = ("duckdb",)


def unsupported(node: exp.Expression, what: str | None = None) -> Unsupported:
    text = what or f"{node.key.upper()} ({node.sql(dialect='duckdb')[:60]})"
    return Unsupported(f"the csv engine does not run {text}", engines=ENGINES_FOR_MORE)


def key(node: exp.Expression) -> str:
    """A canonical text for an expression, to match GROUP BY keys and aggregates: names in
    lower case, string constants as written (``strftime(ts, '%M')``, minutes, is not
    ``strftime(ts, '%m')``, months)."""
    def lowered(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Identifier):
            return exp.Identifier(this=n.name.lower(), quoted=False)
        if isinstance(n, exp.Var):
            return exp.Var(this=n.name.lower())
        return n

    return node.transform(lowered).sql(dialect="duckdb", normalize_functions="lower")


#: aggregates named ``fn(column)`` by DuckDB, as tests/test_csv_names.py checks
_NAMED_AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min",
                     exp.Max: "max", exp.Median: "median"}


def output_name(node: exp.Expression, names: Sequence[str] = ()) -> str | None:
    """The column name DuckDB gives a select item, where it is known without asking
    DuckDB: an alias, a column (named as the file names it, whatever case the
    statement wrote), ``count(*)``, an aggregate of a plain column. None for any
    other expression: DuckDB names it after its own rendering of the expression
    (``(a + 1)``, ``"year"(d)``, ``CAST(a AS VARCHAR)``), which
    :func:`gateway_csv.naming.duckdb_names` asks DuckDB for."""
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        lowered = node.name.lower()
        return next((n for n in names if n.lower() == lowered), node.name)
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
        return aggregate_name("count", None)
    fn = _NAMED_AGGREGATES.get(type(node))
    arg = node.this if fn is not None else None
    extra = [k for k, v in node.args.items() if k not in ("this", "big_int") and v]
    if fn is not None and isinstance(arg, exp.Column) and not extra:
        return aggregate_name(fn, arg.name)  # one column, nothing else (not max(a, 3))
    return None


@dataclass
class Query:
    """One analysed SELECT over one table."""

    table: str
    table_is_path: bool
    items: list[tuple[str, exp.Expression]]
    where: list[exp.Expression]
    group: list[exp.Expression]
    aggregates: list[exp.Expression]
    having: exp.Expression | None
    order: list[tuple[exp.Expression, bool, bool]]
    limit: int | None
    offset: int
    distinct: bool
    is_aggregate: bool
    star_only: bool = False
    #: column names (lower case) the query reads
    columns: set[str] = field(default_factory=set)
    #: DuckDB's type of each select item (gateway_csv.binding.bind), which answers take
    types: list[str] = field(default_factory=list)
    #: the select items DuckDB must name (gateway_csv.naming): their names are provisional
    unnamed: list[int] = field(default_factory=list)


#: a string literal followed by one colon after SELECT or a comma: a quoted prefix alias
#: (a struct literal's `{'a': 1}` matches too, and goes to the fallback: no wrong answer)
_QUOTED_PREFIX_ALIAS = re.compile(r"(?is)(?:\bSELECT\s+(?:DISTINCT\s+)?|,\s*)'(?:[^']|'')*'\s*:(?!:)")
#: ^ and an operator character after it, which DuckDB's lexer reads as one operator (^-)
_CARET_OPERATOR = re.compile(r"\^[-+*/<>=~!@#%^&|`?]")
#: date_trunc (datetrunc) whose unit is not a string literal
_TRUNC_BY_NAME = re.compile(r"(?i)(?<![\w$])date_?trunc\s*\(\s*(?!')")


def parse(sql: str) -> exp.Select:
    """The one SELECT statement in ``sql``.

    Raises:
        QueryError: the SQL does not parse.
        Unsupported: not a single SELECT, or a construct the engine refuses.
    """
    if _TRUNC_BY_NAME.search(sql):
        # sqlglot reads date_trunc(s, d), the unit in a column s, as date_trunc('s', d)
        # (seconds): DuckDB's test_date_trunc.test was answered natively, wrong
        raise Unsupported("the csv engine runs date_trunc with a quoted unit only",
                          engines=ENGINES_FOR_MORE)
    try:
        # a trailing `; -- note` is a Semicolon statement holding the comment
        statements = [s for s in sqlglot.parse(sql, read="duckdb")
                      if s is not None and not isinstance(s, exp.Semicolon)]
    except sqlglot.errors.SqlglotError as exc:
        # sqlglot's parser is not DuckDB's: it refuses SQL DuckDB reads (`SELECT 3!`,
        # `ESCAPE chr(92)`), which is the fallback's; what DuckDB's parser refuses
        # too is a syntax error
        import duckdb

        first = str(exc).splitlines()[0]
        try:
            duckdb.extract_statements(sql)
        except duckdb.ParserException as duck:
            raise QueryError(f"cannot parse the SQL: {str(duck).splitlines()[0]}",
                             kind="syntax") from None
        except duckdb.Error:
            pass
        raise Unsupported(f"the csv engine cannot parse the SQL: {first}",
                          engines=ENGINES_FOR_MORE) from None
    if len(statements) != 1:
        raise QueryError(f"expected one statement, got {len(statements)}", kind="syntax")
    if _CARET_OPERATOR.search(sql):
        # DuckDB reads `2^-1` as the operator ^- (which it lacks), sqlglot as 2 ^ (-1)
        raise Unsupported("the csv engine does not run ^ followed by another operator's "
                          "character", engines=ENGINES_FOR_MORE)
    if "+" in sql and _unary_plus(sql):
        # sqlglot drops it (`SELECT +i` is `SELECT i`), and DuckDB names the column `(+(i))`
        raise Unsupported("the csv engine does not run a unary +", engines=ENGINES_FOR_MORE)
    stmt = statements[0]
    if isinstance(stmt, exp.Select) and not stmt.expressions:
        # DuckDB's words; sqlglot reads a bare SELECT as a select of nothing
        raise QueryError("cannot parse the SQL: SELECT clause without selection list",
                         kind="syntax")
    if _QUOTED_PREFIX_ALIAS.search(sql):
        # `SELECT 'j': 42`: a prefix alias in quotes, which sqlglot reads and DuckDB 2.0
        # refuses (DuckDB's sqllogictest test_select_alias_prefix_colon): DuckDB's to judge
        raise Unsupported("the csv engine leaves a quoted prefix alias ('name': value) to "
                          "DuckDB", engines=ENGINES_FOR_MORE)
    for node_type, name in _REFUSED.items():
        if stmt.find(node_type) is not None:
            raise unsupported(stmt, name)
    if not isinstance(stmt, exp.Select):
        raise unsupported(stmt, f"{stmt.key.upper()} statements")
    if any(i.this == "" and i.args.get("quoted") for i in stmt.find_all(exp.Identifier)):
        raise QueryError("cannot parse the SQL: zero-length delimited identifier (\"\")",
                         kind="syntax")  # DuckDB's parser refuses it; sqlglot takes it
    return stmt


def source_name(select: exp.Select) -> tuple[str, bool] | None:
    """(table name or file path, is_path) of the FROM clause; None without FROM."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        return None
    table = from_.this
    if isinstance(table, exp.Table):
        fn = table.this
        if isinstance(fn, exp.Anonymous | exp.ReadCSV) or (
                isinstance(fn, exp.Func) and not isinstance(fn, exp.Identifier)):
            name = fn.name.lower() if isinstance(fn, exp.Anonymous) else fn.key.lower()
            args = fn.expressions if isinstance(fn, exp.Anonymous) else [fn.this, *fn.expressions]
            if name in ("read_csv", "read_csv_auto", "readcsv") and len(args) == 1 \
                    and isinstance(args[0], exp.Literal) and args[0].is_string:
                return args[0].this, True
            raise unsupported(fn, f"the table function {fn.sql(dialect='duckdb')[:60]}")
        _only(table, _TABLE_ARGS, "FROM")
        alias = table.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise unsupported(table, "FROM with column aliases")
        if table.args.get("db") or table.args.get("catalog"):
            return table.name, False
        ident = table.this
        quoted = isinstance(ident, exp.Identifier) and ident.quoted
        name = table.name
        looks_like_path = quoted and any(c in name for c in "./\\")
        return name, looks_like_path
    raise unsupported(table, f"FROM {table.sql(dialect='duckdb')[:60]}")


def _int_literal(node: exp.Expression | None, what: str) -> int | None:
    if node is None:
        return None
    options = node.args.get("limit_options")
    if options is not None and any(options.args.values()):  # LIMIT 10%, WITH TIES
        raise unsupported(node, f"{what} {options.sql(dialect='duckdb')}".strip())
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(value, exp.Literal) and not value.is_string:
        try:
            number = int(value.this)
        except ValueError:
            pass
        else:
            if number < 1 << 62:  # past it, DuckDB's own rules (and errors) apply
                return number
    raise unsupported(value, f"{what} other than a constant integer below 2^62")


#: the arguments of a SELECT the planner reads (analyse, source_name, _int_literal)
_SELECT_ARGS = ("expressions", "from", "from_", "where", "group", "having", "order", "limit",
                "offset", "distinct", "kind")
#: ...and of its FROM table: a name, maybe qualified, maybe aliased without columns
_TABLE_ARGS = ("this", "db", "catalog", "alias")


def _only(node: exp.Expression, allowed: tuple[str, ...], what: str) -> None:
    """Refuse ``node`` when it has an argument the planner does not read."""
    extra = sorted(k for k, v in node.args.items() if v and k not in allowed)
    if extra:
        raise unsupported(node, f"{what} with {', '.join(extra)}")


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


#: the words after which a `+` is a sign, not an addition
_BEFORE_OPERAND = frozenset({"SELECT", "WHERE", "AND", "OR", "NOT", "WHEN", "THEN", "ELSE", "CASE",
                             "HAVING", "BY", "IN", "BETWEEN", "LIKE", "ILIKE", "IS", "ON",
                             "DISTINCT", "ALL", "LIMIT", "OFFSET", "AS"})


def _unary_plus(sql: str) -> bool:
    from sqlglot.tokens import TokenType

    operand_end = {TokenType.NUMBER, TokenType.STRING, TokenType.VAR, TokenType.IDENTIFIER,
                   TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.STAR}
    prev = None
    for token in sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql):
        if token.token_type == TokenType.PLUS and (prev is None or (
                prev.token_type not in operand_end
                and (not prev.text.replace("_", "").isalnum()
                     or prev.text.upper() in _BEFORE_OPERAND))):
            return True
        prev = token
    return False


def _is_integer(node: exp.Literal) -> bool:
    return not node.is_string and node.this.isdigit()


def _table_names(select: exp.Select, table: tuple[str, bool] | None) -> set[str]:
    """The names a column's qualifier may give the one table read: its alias, else its
    name (a file's name without folder and extensions, as DuckDB names it)."""
    source = select.args.get("from") or select.args.get("from_")
    alias = source.this.alias if source is not None and source.this is not None else ""
    if alias:
        return {alias.lower()}
    if table is None:
        return set()
    name = table[0]
    if table[1]:
        name = name.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0]
    return {name.lower()}


def refuse_unrun_aggregates(select: exp.Select) -> None:
    """Refuse an aggregate the engine does not run (stddev, corr: the fallback's)
    from the SQL alone, as :func:`analyse` would, before a file is opened and sniffed:
    the sniff of a file's head (about 90 ms of CPU over h2o's 8 MiB) was the largest
    part of what the csv engine cost a query it hands to its fallback.

    Raises:
        Unsupported: a select item, HAVING or ORDER BY holds such an aggregate.
    """
    for part in (*select.expressions, select.args.get("having"), select.args.get("order")):
        for agg in part.find_all(exp.AggFunc) if part is not None else ():
            if not isinstance(agg, _AGGREGATES):
                raise _unrun(agg)


def _unrun(agg: exp.Expression) -> Unsupported:
    return unsupported(agg, f"the aggregate {agg.sql(dialect='duckdb')[:50]}")


def analyse(select: exp.Select, layout: Layout | None, table: tuple[str, bool] | None) -> Query:
    """The query over ``layout``'s columns (None: a SELECT without FROM)."""
    if select.args.get("joins"):
        raise unsupported(select, "JOIN")
    # what the planner reads, and nothing else: a clause it does not know is refused,
    # never ignored (USING SAMPLE, TABLESAMPLE and FROM t AS x(a) once were; and sqlglot
    # renames its arguments: EXCLUDE's `except` became `except_`)
    _only(select, _SELECT_ARGS, "SELECT")
    for name, node, allowed in (("GROUP BY", select.args.get("group"), ("expressions",)),
                                ("ORDER BY", select.args.get("order"), ("expressions",))):
        if node is not None:
            _only(node, allowed, name)
    for o in select.args["order"].expressions if select.args.get("order") else []:
        _only(o, ("this", "desc", "nulls_first"), "ORDER BY")
    if select.args.get("distinct") is not None and select.args["distinct"].args.get("on"):
        raise unsupported(select, "DISTINCT ON")
    tables = _table_names(select, table)
    for col in select.find_all(exp.Column):
        # one table: a qualifier names it (DuckDB refuses another: `SELECT zzz.* FROM u`),
        # and identifiers are case-insensitive
        if col.table and (col.args.get("db") or col.table.lower() not in tables):
            raise unsupported(col, f"the qualified column {col.sql(dialect='duckdb')[:60]} "
                                   "(a table the query does not read by that name)")
        col.set("table", None)
        if isinstance(col.this, exp.Identifier):
            col.this.set("quoted", False)
    names = layout.names if layout else []
    items: list[tuple[str, exp.Expression]] = []
    unnamed: list[int] = []
    #: the items a name may refer to elsewhere: an alias or a column; DuckDB refuses the
    #: name it gives an expression (ORDER BY "count_star()", HAVING "avg(f)" > 1)
    generated: set[int] = set()
    star_only = True
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and
                                          isinstance(item.this, exp.Star)):
            star = item if isinstance(item, exp.Star) else item.this
            if any(star.args.values()):  # EXCLUDE, REPLACE, RENAME, ILIKE, whatever sqlglot
                # calls them (its `except` became `except_`, and EXCLUDE was ignored)
                raise unsupported(item, "* EXCLUDE/REPLACE/RENAME/ILIKE")
            if layout is None:
                raise QueryError("SELECT * needs a FROM clause", kind="syntax")
            items.extend((n, exp.column(n, quoted=False)) for n in names)
            continue
        star_only = False
        if not isinstance(item, (exp.Alias, exp.Column)):
            generated.add(len(items))
        name = output_name(item, names)
        if name is None:  # provisional (for GROUP BY and ORDER BY): DuckDB names it later
            unnamed.append(len(items))
            name = item.sql(dialect="duckdb", normalize_functions="lower")
        items.append((name, item.this if isinstance(item, exp.Alias) else item))

    where = _conjuncts(select.args.get("where").this if select.args.get("where") else None)
    column_names = {n.lower() for n in names}
    item_aliases = {n.lower() for n, e in items} - column_names
    for i, (_name, expr) in enumerate(items):
        others = {n.lower() for j, (n, e) in enumerate(items)
                  if j != i and _is_alias(e, n.lower())} - column_names
        if any(c.name.lower() in others for c in expr.find_all(exp.Column)):
            # DuckDB reads an earlier item's alias in a select item (a lateral alias:
            # `SELECT 1 AS a, a * 2`), where no file column has the name
            raise unsupported(expr, "a select alias in another select item")
    for cond in where:
        if any(c.name.lower() in item_aliases for c in cond.find_all(exp.Column)):
            # DuckDB reads a select alias in WHERE (`SELECT i % 2 AS k ... WHERE k <> 0`)
            raise unsupported(cond, "a select alias in WHERE")
        if cond.find(exp.AggFunc) is not None:
            raise QueryError("aggregates are not allowed in WHERE",
                             hint="filter on aggregates with HAVING", kind="syntax")

    aliases = {name.lower(): expr for i, (name, expr) in enumerate(items) if i not in generated}
    group: list[exp.Expression] = []
    group_node = select.args.get("group")
    if group_node is not None:
        if group_node.args.get("all") or group_node.args.get("rollup") or group_node.args.get("cube") \
                or group_node.args.get("grouping_sets"):
            raise unsupported(group_node, "GROUP BY ALL/ROLLUP/CUBE/GROUPING SETS")
        for g in group_node.expressions:
            g = g.unnest()  # GROUP BY (k) is GROUP BY k
            if isinstance(g, exp.Literal) and not g.is_string:
                pos = int(g.this)
                if not 1 <= pos <= len(items):
                    raise QueryError(f"GROUP BY position {pos} is not in the select list "
                                     f"(1 to {len(items)})", kind="syntax")
                group.append(items[pos - 1][1])
            elif isinstance(g, exp.Column) and not g.table and g.name.lower() not in column_names \
                    and g.name.lower() in aliases:
                group.append(aliases[g.name.lower()])
            else:
                group.append(g)

    having = select.args.get("having").this if select.args.get("having") else None
    if having is not None:
        # as DuckDB, and as GROUP BY above: a name that is no column may be a select alias
        def unalias(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node.name.lower() not in column_names \
                    and _is_alias(aliases.get(node.name.lower()), node.name.lower()):
                return aliases[node.name.lower()].copy()
            return node
        having = having.transform(unalias)
    order: list[tuple[exp.Expression, bool, bool]] = []
    order_node = select.args.get("order")
    if order_node is not None:
        item_names = [n.lower() for n, _ in items]
        for o in order_node.expressions:
            if isinstance(o.this, (exp.Boolean, exp.Null)) or (
                    isinstance(o.this, exp.Literal) and not _is_integer(o.this)):
                # DuckDB's binder refuses it ("ORDER BY non-integer literal has no effect")
                raise unsupported(o, "ORDER BY a constant other than a position")
            if isinstance(o.this, exp.Column) and len({
                    e.sql().lower() for n, e in items if n.lower() == o.this.name.lower()}) > 1:
                # `SELECT a, b AS a ... ORDER BY a`: DuckDB sorts by the alias (two items of
                # one name and one expression, `SELECT k, k ... ORDER BY k`, are one key)
                raise unsupported(o, f"ORDER BY {o.this.name}, a name two select items have")
            if select.args.get("distinct") is not None and any(
                    c.name.lower() not in item_names for c in o.this.find_all(exp.Column)):
                # `SELECT DISTINCT a ... ORDER BY b`: DuckDB orders the distinct rows by
                # a column they leave out; the native plan orders the projection only
                raise unsupported(o, "ORDER BY a column a SELECT DISTINCT leaves out")
            desc = bool(o.args.get("desc"))
            nulls_first = bool(o.args.get("nulls_first"))
            order.append((o.this, desc, nulls_first))

    aggregates: dict[str, exp.Expression] = {}
    for node in [e for _, e in items] + ([having] if having else []) + [o[0] for o in order]:
        for agg in node.find_all(exp.AggFunc):
            if isinstance(agg, exp.Count) and agg.this is None:
                raise unsupported(agg, "COUNT() without an argument")
            if not isinstance(agg, _AGGREGATES):
                raise _unrun(agg)
            if agg.find(exp.AggFunc) is not agg or any(a.find(exp.AggFunc) for a in agg.args.values()
                                                        if isinstance(a, exp.Expression)):
                raise QueryError("aggregates cannot be nested", kind="syntax")
            aggregates.setdefault(key(agg), agg)
    distinct = select.args.get("distinct") is not None
    is_aggregate = bool(group) or bool(aggregates) or having is not None

    query = Query(
        table=table[0] if table else "", table_is_path=table[1] if table else False,
        items=items, where=where, group=group, aggregates=list(aggregates.values()),
        having=having, order=order, limit=_int_literal(select.args.get("limit"), "LIMIT"),
        offset=_int_literal(select.args.get("offset"), "OFFSET") or 0, distinct=distinct,
        is_aggregate=is_aggregate, star_only=star_only, unnamed=unnamed,
    )
    for node in [e for _, e in items] + where + group + ([having] if having else []) + \
            [o[0] for o in order]:
        for col in node.find_all(exp.Column):
            name = col.name.lower()
            if name in column_names:
                query.columns.add(name)
            elif layout is not None and not _is_alias(aliases.get(name), name):
                raise QueryError(f"no column named {_short(col.name)!r} in {query.table}",
                                 hint=column_list(names, near=col.name), kind="unknown_object")
    return query


def _is_alias(expr: exp.Expression | None, name: str) -> bool:
    """Whether ``name`` names a select item other than the bare column ``name`` itself
    (``SELECT nope FROM t`` makes an item called nope, which is no alias of anything)."""
    return expr is not None and not (isinstance(expr, exp.Column) and expr.name.lower() == name)


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width] + f"... ({len(name)} characters)"


def column_list(names: Any, most: int = 100, near: str | None = None) -> str:
    """Column names for a message: the nearest to ``near`` first (a typo's likely
    meaning), then the columns, each cut to 60 characters, at most ``most`` of them.

    A file whose header line is 100 MB long (one huge field) otherwise put all
    of it into every error message.
    """
    import difflib

    names = list(names)
    shown = ", ".join(_short(n) for n in names[:most])
    listing = shown + (f", ... and {len(names) - most} more" if len(names) > most else "")
    close = difflib.get_close_matches(near.lower(), [n.lower() for n in names], n=3,
                                      cutoff=0.6) if near else []
    if not close:
        return "columns: " + listing
    return "did you mean " + " or ".join(_short(c) for c in close) + "? columns: " + listing


# ---------------------------------------------------------------- pushdown

def _column_index(node: exp.Expression, layout: Layout) -> int | None:
    """The column a node reads, when the scanner can read it natively (no later conversion)."""
    return fused.native_column(layout, node.name) if isinstance(node, exp.Column) else None


def _filter_const(kind: int, lit: exp.Expression) -> tuple[str, Any] | None:
    """(ctype, value) comparing a column of ``kind`` with a literal, or None if not fusable."""
    from gateway_csv import _scanner

    if isinstance(lit, exp.Neg) and isinstance(lit.this, exp.Literal) and not lit.this.is_string:
        lit = exp.Literal.number("-" + lit.this.this)
    if type(lit) is exp.Cast and kind == DATE and lit.to.this == exp.DataType.Type.DATE and \
            isinstance(lit.this, exp.Literal) and lit.this.is_string:
        lit = lit.this  # DATE '1998-09-02' beside a DATE column: the text it reads as one
    if not isinstance(lit, exp.Literal):
        return None
    text = lit.this
    if kind == STR:
        return ("s", text.encode()) if lit.is_string else None
    if lit.is_string:
        if kind in (TS, TSTZ, DATE):
            try:
                value = _scanner.parse_value(kind if kind != TS else TSTZ, text.encode())
            except ValueError:
                return None
            return "i", value
        return None
    if kind in (INT, FLOAT):
        try:
            value = int(text)
        except ValueError:
            return ("f", float(text))
        if kind == FLOAT:
            return "f", float(text)
        # DuckDB reads a literal past BIGINT as HUGEINT; the scanner compares in int64
        return ("i", value) if -(1 << 63) <= value < (1 << 63) else None
    return None


def pushdown(cond: exp.Expression, layout: Layout,
             slot_of: dict[int, int]) -> list[tuple[int, int, str, Any]] | None:
    """Scanner filters equivalent to one WHERE conjunct, or None if it needs Arrow."""
    def slot(index: int) -> int:
        if index not in slot_of:
            slot_of[index] = -1
        return index

    if isinstance(cond, exp.Paren):
        return pushdown(cond.this, layout, slot_of)
    if isinstance(cond, exp.Is) and isinstance(cond.expression, exp.Null):
        idx = _column_index(cond.this, layout)
        return None if idx is None else [(slot(idx), OP_ISNULL, "n", None)]
    if isinstance(cond, exp.Not) and isinstance(cond.this, exp.Is) and \
            isinstance(cond.this.expression, exp.Null):
        idx = _column_index(cond.this.this, layout)
        return None if idx is None else [(slot(idx), OP_NOTNULL, "n", None)]
    if isinstance(cond, exp.Between):
        idx = _column_index(cond.this, layout)
        if idx is None:
            return None
        kind = layout.scan_kind(idx)
        low, high = _filter_const(kind, cond.args["low"]), _filter_const(kind, cond.args["high"])
        if low is None or high is None or (kind == INT and "f" in (low[0], high[0])):
            return None
        return [(slot(idx), OP_GE, *low), (slot(idx), OP_LE, *high)]
    op = _OPS.get(type(cond))
    if op is None:
        return None
    left, right = cond.this, cond.expression
    idx = _column_index(left, layout)
    if idx is None:
        idx, left, right, op = _column_index(right, layout), right, left, _FLIP[op]
    if idx is None:
        return None
    kind = layout.scan_kind(idx)
    if kind == BOOL:
        return None
    const = _filter_const(kind, right)
    if const is None:
        return None
    return [(slot(idx), op, *const)]


def fused_aggregate(query: Query, layout: Layout) -> FusedAggregate | None:
    """The fused plan for an aggregate query (:func:`gateway_csv.fused.plan`), or None
    when Arrow must finish it."""
    if query.distinct:
        return None
    from gateway_csv.temporal import grain_of, one_to_one

    keys: list[Key] = []
    for g in query.group:
        fn = F_IDENT
        node = g
        finished = False
        if type(g) in _KEY_FNS:
            fn, node = _KEY_FNS[type(g)], g.this
        elif isinstance(g, exp.Round) and g.args.get("decimals") is None:
            fn, node = F_ROUND, g.this
        elif (grained := grain_of(g)) is not None:
            node, grain = grained
            fn, finished = TRUNC_FNS[grain], True
        idx = _column_index(node, layout)
        if idx is None:
            return None
        derived = DerivedKey(functools.partial(_derived_key, g, layout.names[idx].lower()),
                             one_to_one(g)) if finished else None
        keys.append(Key(idx, fn, derived))
    aggs: list[tuple[int, int]] = []
    products: list[tuple[fused.Factor, ...] | None] = []
    seconds: list[int] = []
    quantiles: list[float | None] = []
    for agg in query.aggregates:
        products.append(None)
        seconds.append(-1)
        quantiles.append(quantile(agg.expression) if isinstance(agg, exp.PercentileCont)
                         else None)
        if isinstance(agg, exp.PercentileCont) and quantiles[-1] is None:
            return None
        if type(agg) in STATISTICS:
            idx = _column_index(agg.this, layout)
            second = _column_index(agg.expression, layout) if agg.expression is not None else -1
            if idx is None or second is None or \
                    any(v for k, v in agg.args.items() if k not in ("this", "expression")):
                return None
            aggs.append((STATISTICS[type(agg)], idx))
            seconds[-1] = second
            continue
        if isinstance(agg, exp.Count):
            arg = agg.this
            if isinstance(arg, exp.Star):
                aggs.append((A_COUNT_STAR, -1))
                continue
            if isinstance(arg, exp.Distinct):
                return None
            idx = _column_index(arg, layout)
            if idx is None:
                return None
            aggs.append((A_COUNT, idx))
            continue
        if len(agg.args.get("expressions") or []) > 0:
            return None
        idx = _column_index(agg.this, layout)
        if idx is None and isinstance(agg, exp.Sum | exp.Avg):
            product = _product(agg.this, layout)
            if product is None:
                return None
            products[-1] = product
            idx = product[0][0]
        if idx is None:
            return None
        aggs.append((_AGG_FNS[type(agg)], idx))
    filters: list[tuple[int, int, str, Any]] = []
    for cond in query.where:
        pushed = pushdown(cond, layout, {})
        if pushed is None:
            return None
        filters.extend(pushed)
    return fused.plan(layout, keys, aggs, filters, products, seconds, quantiles=quantiles)


#: a literal a product's factor takes: digits, a decimal point and digits (DuckDB reads
#: 1 as INTEGER and 0.05 as DECIMAL, each made the DOUBLE float() reads beside a DOUBLE)
_FACTOR_LITERAL = re.compile(r"[0-9]{1,15}(\.[0-9]{1,15})?")


def _product(node: exp.Expression, layout: Layout) -> tuple[fused.Factor, ...] | None:
    """The factors of a product of DOUBLE columns, each alone or plus or minus a literal
    (``l_extendedprice * (1 - l_discount) * (1 + l_tax)``), multiplied left to right as
    written (a parenthesised product is not taken apart), or None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Mul):
        left, right = _product(node.left, layout), _factor(node.right, layout)
        if left is None or right is None or len(left) >= fused.MAX_FACTORS:
            return None
        return (*left, right)
    factor = _factor(node, layout)
    return None if factor is None else (factor,)


def _factor(node: exp.Expression, layout: Layout) -> fused.Factor | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        idx = _column_index(node, layout)
        return None if idx is None or layout.kinds[idx] != FLOAT else (idx, fused.X, 0.0)
    if not isinstance(node, exp.Add | exp.Sub):
        return None
    left, right = node.left, node.right
    if isinstance(left, exp.Literal) and isinstance(right, exp.Column):
        lit, col, op = left, right, fused.LIT_PLUS if isinstance(node, exp.Add) else fused.LIT_MINUS
    elif isinstance(left, exp.Column) and isinstance(right, exp.Literal):
        lit, col, op = right, left, fused.X_PLUS if isinstance(node, exp.Add) else fused.X_MINUS
    else:
        return None
    if lit.is_string or not _FACTOR_LITERAL.fullmatch(lit.this):
        return None
    idx = _column_index(col, layout)
    if idx is None or layout.kinds[idx] != FLOAT:
        return None
    return (idx, op, float(lit.this))


def _derived_key(node: exp.Expression, column: str, truncated: Any) -> Any:
    """``node`` (strftime, date_part, date_trunc of ``column``) over the truncated values."""
    from gateway_csv.compute import Frame  # which imports this module

    return Frame({column: truncated}, len(truncated)).array(node)


def column_plan(query: Query, layout: Layout) -> tuple[tuple[tuple[int, int], ...],
                                                     tuple[tuple[int, int, str, Any], ...],
                                                     list[exp.Expression], list[int]]:
    """(slots, pushed filters, remaining WHERE conjuncts, column index per slot) for COLUMNS mode."""
    wanted: dict[int, int] = {}
    for name in query.columns:
        idx = layout.column_index(name)
        if idx is not None:
            wanted[idx] = -1
    pushed: list[tuple[int, int, str, Any]] = []
    rest: list[exp.Expression] = []
    for cond in query.where:
        got = pushdown(cond, layout, wanted)
        if got is None:
            rest.append(cond)
        else:
            pushed.extend(got)
    order = sorted(wanted)
    if len(wanted) > MAX_COLUMNS:
        raise unsupported(exp.Star(), f"queries reading more than {MAX_COLUMNS} columns of one "
                                      "file")
    slot_of = {col: i for i, col in enumerate(order)}
    return (tuple((col, layout.scan_kind(col)) for col in order),
            tuple((slot_of[c], op, ct, v) for c, op, ct, v in pushed), rest, order)


__all__ = ["ENGINES_FOR_MORE", "STATISTICS", "Query", "analyse", "column_plan", "fused_aggregate", "key",
           "output_name", "parse", "pushdown", "source_name", "unsupported"]
