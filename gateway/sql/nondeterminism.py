"""What in a query's SQL leaves its answer undetermined by the data (read with sqlglot).

Two engines that both answer correctly can still disagree when the SQL lets
them:

- **volatile functions** (``random()``, ``now()``, ``uuid()``,
  ``current_timestamp``...) and aggregates whose result depends on the order
  rows arrive in (``any_value``, ``first``, ``list``/``array_agg``,
  ``string_agg`` without their own ORDER BY): the output columns derived from
  them are not comparable, the rest of the answer is;
- **a cut without a total order**: ``LIMIT``/``OFFSET``/``FETCH``/``TOP`` on
  the outermost query picks rows the ORDER BY does not fix (or any rows, with
  no ORDER BY);
- **window functions over ties** (``row_number``, ``ntile``, ``lag``/``lead``,
  ``first_value``/``last_value``/``nth_value``): rows tied on the window's
  PARTITION BY and ORDER BY may come in either order, so the function's value
  is undetermined in those rows (``row_number``, ``ntile``) or in their whole
  partition (a neighbour's or an edge row's value). When the window's terms
  are output columns, the comparator leaves out only those cells
  (:mod:`gateway.verify.tied_rows`); otherwise the whole column, as for a volatile
  function. ``rank`` and ``dense_rank`` give tied rows one value: determined;
- **an undetermined row set**: ``USING SAMPLE``/``TABLESAMPLE``, a cut inside
  a subquery, a volatile function in a filter, join, grouping or ordering, or a
  filter on a window function ties decide (``QUALIFY row_number() OVER (...) = 1``,
  ``WHERE rn = 1`` over a subquery): only the schema can be checked;
- **DISTINCT ON** whose ORDER BY does not order every output column: the
  columns outside its keys are each engine's pick among tied rows.

Statements whose SELECT changes state (``nextval``, ``setval``) are found
here too (:func:`side_effects`): the shadow runner does not run them twice.

Every function takes the engine's sqlglot ``dialect``.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

#: function names (lower case) whose value changes from call to call
VOLATILE_NAMES = frozenset({
    "random", "rand", "randn", "uuid", "uuidv4", "uuidv7", "gen_random_uuid", "random_uuid",
    "newid", "newsequentialid", "now", "current_timestamp", "current_date", "current_time",
    "localtimestamp", "localtime", "get_current_timestamp", "get_current_time",
    "transaction_timestamp", "statement_timestamp", "clock_timestamp", "timeofday", "sysdate",
    "getdate", "getutcdate", "sysdatetime", "sysutcdatetime", "sysdatetimeoffset",
    "systimestamp", "utc_timestamp", "utc_time", "today", "nextval", "currval", "setval",
})
#: aggregates whose value depends on the order rows arrive in, unless they carry an ORDER BY
ORDER_DEPENDENT_AGGREGATES = frozenset({
    "any_value", "arbitrary", "first", "last", "list", "array_agg", "string_agg",
    "group_concat", "listagg", "json_group_array", "json_arrayagg",
})
#: functions that change state when a SELECT calls them: a sequence, a session's
#: settings, random seed or locks (which a pooled connection would carry to its next
#: user, gateway.drivers.adbc), a notification sent
SIDE_EFFECT_NAMES = frozenset({
    "nextval", "setval", "set_config", "setseed", "pg_advisory_lock",
    "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
    "pg_advisory_unlock", "pg_advisory_unlock_shared", "pg_advisory_unlock_all", "pg_notify",
    # PostgreSQL's large-object writers: PostgreSQL 15 runs them in a read-only
    # transaction too (gateway.drivers.read_only)
    "lo_creat", "lo_create", "lo_import", "lo_export", "lo_from_bytea", "lo_put", "lo_unlink",
    "lo_truncate", "lo_truncate64", "lowrite",
    # PostgreSQL's functions that reach past the transaction, which read-only does not
    # stop: the server's configuration, log or WAL moved, statistics reset; and dblink,
    # which runs any statement on a connection of its own (ending another session's
    # statement is refused to every shared user: gateway.sql.reach.OTHER_SESSIONS)
    "pg_reload_conf", "pg_rotate_logfile",
    "pg_switch_wal", "pg_create_restore_point", "pg_promote", "pg_log_backend_memory_contexts",
    "pg_stat_reset", "pg_stat_reset_shared", "pg_stat_reset_single_table_counters",
    "pg_stat_reset_single_function_counters", "pg_stat_reset_slru",
    "pg_stat_reset_replication_slot", "pg_create_physical_replication_slot",
    "pg_create_logical_replication_slot", "pg_drop_replication_slot",
    "pg_file_write", "pg_file_rename", "pg_file_unlink",
    "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query",
    "dblink_open", "dblink_fetch", "dblink_close", "dblink_disconnect",
}) | frozenset({
    # DuckDB's and DuckLake's table functions that write (``SELECT * FROM
    # ducklake_expire_snapshots('lake')`` deletes a lake's history): a read-only user
    # may not call them, and a shadow does not run them twice
    "ducklake_add_data_files", "ducklake_cleanup_old_files", "ducklake_commit",
    "ducklake_delete_orphaned_files", "ducklake_expire_snapshots",
    "ducklake_flush_inlined_data", "ducklake_merge_adjacent_files",
    "ducklake_rewrite_data_files", "ducklake_set_commit_message", "ducklake_set_option",
    "checkpoint", "force_checkpoint", "copy_database", "import_database", "add_parquet_key",
    "enable_logging", "disable_logging", "truncate_duckdb_logs",
    "add_grammar_extension", "remove_grammar_extension", "create_external_resource",
    "register_external_resource", "deregister_external_resource",
    "destroy_external_resource", "register_external_resource_type",
    "enable_checkpoint_on_shutdown", "disable_checkpoint_on_shutdown",
    "enable_object_cache", "disable_object_cache", "json_execute_serialized_sql",
})

#: window functions whose value in a row tied on the window's keys depends on the tie's order
TIED_ROW_FUNCTIONS = frozenset({"row_number", "ntile"})
#: ...and those whose value anywhere in a partition with a tie may depend on it
TIED_PARTITION_FUNCTIONS = frozenset({"lag", "lead", "first_value", "last_value", "nth_value"})

_VOLATILE_CLASSES = ("Rand", "Randn", "Randstr", "Uuid", "CurrentDate", "CurrentDatetime",
                     "CurrentTime", "CurrentTimestamp", "CurrentTimestampLTZ", "Localtime",
                     "Localtimestamp", "Systimestamp", "UtcTime", "UtcTimestamp")
_ORDER_DEPENDENT_CLASSES = ("AnyValue", "First", "Last", "ArrayAgg", "GroupConcat",
                            "JSONArrayAgg")


@dataclass
class Cut:
    """The outermost query's LIMIT/OFFSET/FETCH/TOP.

    Attributes:
        limit: the row limit when it is a plain number, else None.
        offset: True when rows are skipped first (OFFSET).
        ordered: True when the query has an ORDER BY (rows tied on its keys
            at the edges of the cut may still differ).
        total: True when the ORDER BY covers every output column, so the cut
            is fixed (rows tied on every column are interchangeable).
    """

    limit: int | None
    offset: bool
    ordered: bool
    total: bool


@dataclass
class TieDependent:
    """An output column made by a window function that rows tied on its keys leave undetermined.

    Attributes:
        position: the column's position in the answer.
        function: the window function, lower case.
        keys: output positions of the window's PARTITION BY terms, then its ORDER BY terms.
        partition: how many of ``keys`` are PARTITION BY terms.
        rows_only: True when only the tied rows' values are undetermined; False when
            every row of a partition holding a tie is.
    """

    position: int
    function: str
    keys: list[int]
    partition: int
    rows_only: bool


@dataclass
class Nondeterminism:
    """What in one statement's SQL leaves its answer undetermined; empty when nothing does."""

    #: the volatile or order-dependent functions found, lower case, in order of appearance
    functions: list[str] = field(default_factory=list)
    #: output column positions derived from them (when the projection shows them)
    column_positions: list[int] = field(default_factory=list)
    #: output column names derived from them (for ``SELECT *`` over a derived table)
    column_names: list[str] = field(default_factory=list)
    #: why the row set is not determined by the data, or None
    rows_undetermined: str | None = None
    #: the outermost cut when no total order fixes it, else None
    cut: Cut | None = None
    #: output columns made by window functions that ties leave undetermined
    ties: list[TieDependent] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.functions or self.rows_undetermined or self.cut or self.ties)

    def columns_in(self, names: list[str]) -> list[int]:
        """Positions of the answer's columns (``names``) derived from volatile functions."""
        wanted = {n.lower() for n in self.column_names}
        return sorted({i for i in self.column_positions if i < len(names)}
                      | {i for i, n in enumerate(names) if n.lower() in wanted})

    @classmethod
    def of(cls, sql: str | None, dialect: str = "duckdb") -> Nondeterminism:
        """Read ``sql`` (one statement) in ``dialect``; empty when it cannot be read.

        The readings of the last 512 short texts are kept (each caller gets a copy of
        its own): a comparison asked twice, and a replay compares the answers to one
        prepared text with every parameter set.
        """
        if sql is not None and len(sql) <= _KEPT_CHARS:
            return copy.deepcopy(_kept_reading(sql, dialect))
        return cls._read(sql, dialect)

    @classmethod
    def _read(cls, sql: str | None, dialect: str) -> Nondeterminism:
        tree = _parse_one(sql, dialect)
        if tree is None:
            return cls()
        from sqlglot import exp

        found = cls()
        outer = tree
        while isinstance(outer, exp.Subquery):
            outer = outer.this
        if not isinstance(outer, (exp.Select, exp.SetOperation)):
            return found
        found.functions = [_name(f) for f in tree.find_all(exp.Func) if _is_volatile(f, exp)]
        if any(True for _ in tree.find_all(exp.TableSample)):
            found.rows_undetermined = "the query samples its input (USING SAMPLE / TABLESAMPLE)"
        for select in tree.find_all(exp.Select, exp.SetOperation):
            inner_cut = _cut_of(select, exp) if select is not outer else None
            if inner_cut is not None and not inner_cut.total:
                found.rows_undetermined = found.rows_undetermined or (
                    "a subquery keeps rows with LIMIT/OFFSET/FETCH that no total order fixes")
        if found.functions and found.rows_undetermined is None:
            found.rows_undetermined = _volatile_outside_projections(tree, exp)
        found.rows_undetermined = found.rows_undetermined or _kept_by_ties(tree, outer, exp)
        found.cut = _cut_of(outer, exp)
        if found.cut is not None and found.cut.total:
            found.cut = None
        if isinstance(outer, exp.Select):
            _distinct_on(outer, found, exp)
        if isinstance(outer, exp.Select):
            _find_ties(outer, found, exp)
        if isinstance(outer, exp.Select) and found.functions:
            sources = _volatile_source_columns(outer, exp)
            for i, proj in enumerate(outer.expressions):
                if _derives_from_volatile(proj, sources, exp):
                    found.column_positions.append(i)
                    found.column_names.append(proj.alias_or_name)
            if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column)
                                               and isinstance(p.this, exp.Star))
                   for p in outer.expressions):
                found.column_names.extend(sorted(sources))
        return found


def side_effects(sql: str, dialect: str = "duckdb") -> list[str]:
    """Functions in ``sql`` that change state when a SELECT calls them (``nextval``...)."""
    tree = _parse_one(sql, dialect)
    return [] if tree is None else side_effects_in(tree)


def side_effects_in(tree: Any) -> list[str]:
    """:func:`side_effects` of a statement sqlglot has already parsed."""
    from sqlglot import exp

    return sorted({_name(f) for f in tree.find_all(exp.Func) if _name(f) in SIDE_EFFECT_NAMES})


#: statements longer than this are read again at each comparison, not kept (memory)
_KEPT_CHARS = 16_384


@functools.lru_cache(maxsize=512)
def _kept_reading(sql: str, dialect: str) -> Nondeterminism:
    return Nondeterminism._read(sql, dialect)


def _parse_one(sql: str | None, dialect: str) -> Any:
    if not sql:
        return None
    try:
        import sqlglot

        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:  # SQL sqlglot cannot read: nothing is known about it
        return None
    return statements[0] if len(statements) == 1 else None


def _name(func: Any) -> str:
    from sqlglot import exp

    if isinstance(func, exp.Anonymous):
        return str(func.name).lower()
    return str(func.sql_name()).lower()


def _is_volatile(func: Any, exp: Any) -> bool:
    cls = type(func).__name__
    if cls in _VOLATILE_CLASSES:
        return True
    name = _name(func)
    if isinstance(func, exp.Anonymous) and name in VOLATILE_NAMES:
        return True
    if cls in _ORDER_DEPENDENT_CLASSES or (isinstance(func, exp.Anonymous)
                                           and name in ORDER_DEPENDENT_AGGREGATES):
        inside_window = isinstance(func.parent, (exp.Window, exp.WithinGroup))
        return not inside_window and func.find(exp.Order) is None
    return False


def _find_ties(select: Any, found: Nondeterminism, exp: Any) -> None:
    """The output columns of ``select`` that are window functions ties leave undetermined."""
    for i, proj in enumerate(select.expressions):
        window = proj.this if isinstance(proj, exp.Alias) else proj
        if not isinstance(window, exp.Window):
            continue
        name = _name(window.this)
        if name not in TIED_ROW_FUNCTIONS | TIED_PARTITION_FUNCTIONS:
            continue
        order = window.args.get("order")
        terms = list(window.args.get("partition_by") or [])
        partition = len(terms)
        terms += [o.this for o in order.expressions] if order is not None else []
        keys = [_output_position(select, term, exp) for term in terms]
        if all(k is not None for k in keys):
            found.ties.append(TieDependent(i, name, [k for k in keys if k is not None],
                                           partition, name in TIED_ROW_FUNCTIONS))
        else:  # the tie's keys are not in the answer: the whole column is undetermined
            found.functions.append(name)
            found.column_positions.append(i)
            found.column_names.append(proj.alias_or_name)


def _tie_window(node: Any, exp: Any) -> bool:
    """Whether ``node`` holds a window function whose value rows tied on its keys decide."""
    return any(isinstance(w.this, exp.Func)
               and _name(w.this) in TIED_ROW_FUNCTIONS | TIED_PARTITION_FUNCTIONS
               for w in node.find_all(exp.Window))


def _kept_by_ties(tree: Any, outer: Any, exp: Any) -> str | None:
    """Why the rows kept depend on how ties fell, or None: a filter on a window function
    ties decide (``QUALIFY row_number() OVER (PARTITION BY g ORDER BY k) = 1``), or on a
    column a subquery made with one (``WHERE rn = 1``): rows tied on ``k`` may each be
    the one kept, and each engine keeps its own."""
    for select in tree.find_all(exp.Select):
        qualify = select.args.get("qualify")
        if qualify is not None and _tie_window(qualify, exp):
            return "QUALIFY keeps rows by a window function its ORDER BY may leave tied"
        if select is outer:
            continue
        made = {p.alias_or_name.lower() for p in select.expressions
                if isinstance(p, exp.Alias) and _tie_window(p, exp)}
        if not made:
            continue
        for where in tree.find_all(exp.Where, exp.Qualify):
            if select in list(where.find_all(exp.Select)):
                continue  # the filter is inside the subquery that makes the column
            if any(c.name.lower() in made for c in where.find_all(exp.Column)):
                return ("a filter keeps rows by a window function (row_number() and the "
                        "like) its ORDER BY may leave tied")
    return None


def _distinct_on(select: Any, found: Nondeterminism, exp: Any) -> None:
    """``DISTINCT ON (keys)``: which row of each key stands for it is the ORDER BY's to
    fix; where it does not order every output column, the columns outside the keys are
    each engine's pick (rows tied on the ORDER BY)."""
    distinct = select.args.get("distinct")
    on = distinct.args.get("on") if distinct is not None else None
    if on is None:
        return
    order = select.args.get("order")
    if order is not None and _orders_every_column(select, order, exp):
        return
    keys = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
    positions = {_output_position(select, key, exp) for key in keys}
    found.functions.append("DISTINCT ON (its pick among rows tied on the ORDER BY)")
    for i, proj in enumerate(select.expressions):
        if i not in positions:
            found.column_positions.append(i)
            found.column_names.append(proj.alias_or_name)


def _output_position(select: Any, term: Any, exp: Any) -> int | None:
    """The position of the output column ``term`` (an expression of ``select``) is, if any."""
    for i, proj in enumerate(select.expressions):
        bare = proj.this if isinstance(proj, exp.Alias) else proj
        if bare == term or (isinstance(term, exp.Column) and not term.table
                            and proj.alias_or_name == term.name):
            return i
    return None


def _cut_of(select: Any, exp: Any) -> Cut | None:
    limit, offset = select.args.get("limit"), select.args.get("offset")
    if limit is None and offset is None and select.args.get("fetch") is None:
        return None
    value = None
    if limit is not None:
        node = limit.args.get("count") if isinstance(limit, exp.Fetch) else limit.expression
        if isinstance(node, exp.Literal) and node.is_int:
            value = int(node.this)
    order = select.args.get("order")
    return Cut(limit=value, offset=offset is not None, ordered=order is not None,
               total=order is not None and _orders_every_column(select, order, exp))


def _orders_every_column(select: Any, order: Any, exp: Any) -> bool:
    """True when the ORDER BY terms cover every output column of ``select``."""
    if not isinstance(select, exp.Select):
        return False
    projections = select.expressions
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
           for p in projections):
        return False
    covered = set()
    for ordered in order.expressions:
        term = ordered.this
        for i, proj in enumerate(projections):
            bare = proj.this if isinstance(proj, exp.Alias) else proj
            if bare == term or (isinstance(term, exp.Literal) and term.is_int
                                and int(term.this) == i + 1) \
                    or (isinstance(term, exp.Column) and not term.table
                        and proj.alias_or_name == term.name):
                covered.add(i)
    return len(covered) == len(projections)


def _volatile_outside_projections(tree: Any, exp: Any) -> str | None:
    """Why a volatile function (or a column made from one) decides which rows come back."""
    deciding = (exp.Where, exp.Join, exp.Group, exp.Having, exp.Qualify)
    for func in tree.find_all(exp.Func):
        if _is_volatile(func, exp) and isinstance(func.find_ancestor(exp.Select, *deciding),
                                                  deciding):
            return f"{_name(func)}() decides which rows come back"
    for select in tree.find_all(exp.Select):
        sources = _volatile_source_columns(select, exp)
        for clause in (select.args.get(k) for k in ("where", "joins", "group", "having")):
            for node in (clause if isinstance(clause, list) else [clause]):
                if node is not None and any(c.name in sources for c in node.find_all(exp.Column)):
                    return "a column made by a volatile function decides which rows come back"
        order = select.args.get("order")
        if order is not None and _cut_of(select, exp) is not None and any(
                (isinstance(n, exp.Column) and n.name in sources)
                or (isinstance(n, exp.Func) and _is_volatile(n, exp))
                for n in order.find_all(exp.Column, exp.Func)):
            return "a volatile ORDER BY decides which rows the LIMIT keeps"
    return None


def _volatile_source_columns(select: Any, exp: Any) -> set[str]:
    """Names of columns that ``select``'s derived tables and CTEs make from volatile functions."""
    names: set[str] = set()
    sources = [*select.find_all(exp.Subquery), *select.find_all(exp.CTE)]
    for source in sources:
        inner = source.this
        if not isinstance(inner, exp.Select) or inner is select:
            continue
        inner_sources = _volatile_source_columns(inner, exp) if inner.find(exp.Subquery, exp.CTE) \
            else set()
        for proj in inner.expressions:
            if _derives_from_volatile(proj, inner_sources, exp):
                names.add(proj.alias_or_name)
    return names


def _derives_from_volatile(proj: Any, sources: set[str], exp: Any) -> bool:
    if any(_is_volatile(f, exp) for f in proj.find_all(exp.Func)):
        return True
    return any(c.name in sources for c in proj.find_all(exp.Column))
