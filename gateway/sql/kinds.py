"""What a statement does: a read or a write, the state it changes, its placeholders."""

from __future__ import annotations

import functools
import re
from typing import Any

from gateway.sql import Unparsed, parse

#: comments and blanks before a statement's first keyword
LEADING = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_READ_START = re.compile(r"(?i)(SELECT|FROM|VALUES|TABLE|DESCRIBE|SHOW|SUMMARIZE)\b")
_STATEFUL = [
    (re.compile(r"(?i)(SET|RESET)\b"), "settings", "a setting"),
    (re.compile(r"(?i)USE\b"), "use", "USE"),
    (re.compile(r"(?i)(BEGIN|START\s+TRANSACTION|COMMIT|ROLLBACK|END\s+TRANSACTION|ABORT)\b"),
     "transactions", "a transaction"),
    (re.compile(r"(?i)CREATE\s+(OR\s+REPLACE\s+)?(LOCAL\s+|GLOBAL\s+)?(TEMP|TEMPORARY)\b"),
     "temp_tables", "a temporary object"),
]


_LITERALS = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b")
_SPACE = re.compile(r"\s+")


def fingerprint(sql: str) -> str:
    """16 hex digits that are the same for statements differing only in literals and
    spacing: a statement's shape, with no value in it."""
    import hashlib

    shape = _SPACE.sub(" ", _LITERALS.sub("?", sql)).strip().lower()
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def head(sql: str) -> str:
    """``sql`` from its first keyword on (leading comments and blanks cut)."""
    return sql[LEADING.match(sql).end():]  # type: ignore[union-attr]


_EXPLAIN = re.compile(r"(?is)\AEXPLAIN\b\s*(?:(?:ANALY[SZ]E|VERBOSE)\b\s*|\([^)]*\)\s*)*")


def explained(sql: str) -> str | None:
    """The statement under ``EXPLAIN [ANALYZE] [(options)]``, or None: EXPLAIN ANALYZE
    runs it (``EXPLAIN ANALYZE CREATE TABLE ...`` creates the table)."""
    inner = None
    start = head(sql)
    while (found := _EXPLAIN.match(start)) is not None:
        inner = start = head(start[found.end():])
    return inner


def state_needed(sql: str) -> tuple[str, str] | None:
    """The session state a statement changes, as ``(kind, what)``, or None.

    ``kind`` is one of :data:`gateway.engine.SESSION_STATE`. Only the first
    statement's leading keywords are read: this is a guard against silently
    losing state, not a parser.
    """
    start = head(sql)
    for pattern, kind, what in _STATEFUL:
        if pattern.match(start):
            return kind, what
    return None


_BEGIN = re.compile(r"(?i)(BEGIN|START\s+TRANSACTION)\b")
_END = re.compile(r"(?i)(COMMIT|ROLLBACK|END|ABORT)\b")


def transaction_change(sql: str) -> str | None:
    """``begin`` for a statement that opens a transaction, ``end`` for one that ends it,
    else None (the leading keyword only)."""
    start = head(sql)
    if _BEGIN.match(start):
        return "begin"
    return "end" if _END.match(start) else None


#: an identifier written with Unicode escapes (PostgreSQL's ``U&"..."``), which the checks
#: here read as written and the server reads decoded: ``U&"pg\005freload_conf"()`` is
#: ``pg_reload_conf()``, ``U&"dblink\005fexec"(...)`` writes on a connection of its own
_ESCAPED_IDENTIFIER = re.compile(r'(?i)(?<![\w$])U&"')


def statement_kind(sql: str, dialect: str = "duckdb") -> str:
    """``read`` for a query; otherwise what the statement is (``INSERT``, ``unrecognized``,
    ``SELECT calling nextval()``: a query with side effects...). A statement with a
    Unicode-escaped identifier is never a query: no name in it can be checked.

    The kinds of the last 512 short texts are kept: a replay asks twice per statement
    (whether to run it, then the shadow's own check), and a prepared statement's text
    comes back with every parameter set (sqlglot's parse was a sixth of a replay's
    work besides the engines').
    """
    if len(sql) <= _COUNT_KEPT_CHARS:
        return _kept_statement_kind(sql, dialect)
    return _statement_kind(sql, dialect)


@functools.lru_cache(maxsize=512)
def _kept_statement_kind(sql: str, dialect: str) -> str:
    return _statement_kind(sql, dialect)


def _statement_kind(sql: str, dialect: str) -> str:
    from sqlglot import exp

    from gateway.sql.nondeterminism import side_effects_in

    if _ESCAPED_IDENTIFIER.search(sql):
        return 'a statement with a Unicode-escaped identifier, U&"..."'
    try:
        statements = parse(sql, dialect)
    except Unparsed:
        return "unrecognized"
    if not statements:
        return "empty"
    for stmt in statements:
        if isinstance(stmt, exp.Query) and (calls := side_effects_in(stmt)):
            return "SELECT calling " + ", ".join(f"{c}()" for c in calls)
        if isinstance(stmt, (exp.Query, exp.Describe)) and not _writes_inside(stmt, exp):
            continue
        if isinstance(stmt, exp.Command):
            return f"{stmt.name.upper()}"
        return str(stmt.key.upper())
    hidden = _side_effect_call().search(sql)
    if hidden is not None:  # a call anywhere, a string too: query('SELECT * FROM f()') runs it
        return f"SELECT calling {hidden.group(1).lower()}()"
    return "read"


@functools.cache
def _side_effect_call() -> re.Pattern[str]:
    from gateway.sql.nondeterminism import SIDE_EFFECT_NAMES

    names = "|".join(sorted(SIDE_EFFECT_NAMES))
    return re.compile(rf"(?i)(?<![\w$])({names})\s*\(")


def _writes_inside(stmt: Any, exp: Any) -> bool:
    """A query that writes anyway (``WITH x AS (INSERT ... RETURNING *) SELECT``, ``SELECT INTO``)."""
    writes = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Into)
    return any(True for _ in stmt.find_all(*writes))


def is_read(sql: str, dialect: str) -> bool:
    """Whether ``sql`` is a query that changes nothing (see :func:`statement_kind`).

    A statement sqlglot cannot read counts as a query when it starts like one.
    """
    kind = statement_kind(sql, dialect)
    if kind == "unrecognized":
        return _READ_START.match(head(sql)) is not None and ";" not in sql.strip().rstrip(";") \
            and _side_effect_call().search(sql) is None
    return kind == "read"


#: statements longer than this are counted again at each prepare, not kept (memory)
_COUNT_KEPT_CHARS = 16_384


def placeholder_count(sql: str, dialect: str) -> int:
    """How many positional parameters ``sql`` takes (``?``, ``$n``), read with sqlglot.

    Clients that prepare every statement prepare the same texts over and over:
    the counts of the last 512 short ones are kept (sqlglot's parse was a tenth
    of the Flight service's work in ADBC's prepare of ``SELECT 1``).
    """
    if len(sql) <= _COUNT_KEPT_CHARS:
        return _kept_placeholder_count(sql, dialect)
    return _placeholder_count(sql, dialect)


@functools.lru_cache(maxsize=512)
def _kept_placeholder_count(sql: str, dialect: str) -> int:
    return _placeholder_count(sql, dialect)


def _placeholder_count(sql: str, dialect: str) -> int:
    from sqlglot import exp

    try:
        statements = parse(sql, dialect)
    except Unparsed:  # a dialect corner sqlglot cannot read: count outside quotes
        bare = _QUOTED.sub("", sql)
        numbered = [int(n) for n in re.findall(r"\$(\d+)", bare)]
        return max(numbered) if numbered else bare.count("?")
    count = 0
    for stmt in statements:
        for node in stmt.find_all(exp.Placeholder, exp.Parameter):
            name = node.name if isinstance(node, exp.Placeholder) else node.this.name
            count = max(count, int(name)) if name.isdigit() else count + 1
    return count


#: what a statement is to a capture and its replay (:func:`capture_kind`)
CAPTURE_KINDS = ("read", "write", "ddl", "settings", "transaction")
_DDL = frozenset({"CREATE", "DROP", "ALTER", "TRUNCATETABLE", "ATTACH", "DETACH", "COMMENT",
                  "LOAD", "INSTALL", "UNINSTALL"})
_SETTINGS = frozenset({"SET", "RESET", "USE", "PRAGMA"})
_TRANSACTION = frozenset({"TRANSACTION", "BEGIN", "COMMIT", "ROLLBACK", "END", "ABORT", "START"})
_ROWS_ONLY = frozenset({"SHOW", "SUMMARIZE", "DESCRIBE"})
_ANALYZE = re.compile(r"(?is)\AEXPLAIN\b[^;]*?\bANALY[SZ]E\b")


def capture_kind(sql: str, dialect: str = "duckdb") -> str:
    """One of :data:`CAPTURE_KINDS`, read with :func:`statement_kind` over every statement of
    ``sql``: ``WITH s AS (...) INSERT``, ``(SELECT 1); INSERT`` and ``EXPLAIN ANALYZE
    INSERT`` are writes; a plain ``EXPLAIN`` runs nothing and is a read. What cannot be
    read is a write: a replay only runs a write when asked to."""
    if len(sql) <= _COUNT_KEPT_CHARS:
        return _kept_capture_kind(sql, dialect)
    return _capture_kind(sql, dialect)


@functools.lru_cache(maxsize=512)
def _kept_capture_kind(sql: str, dialect: str) -> str:
    return _capture_kind(sql, dialect)


#: of a statement's parts, the kind that names the whole: the one a replay is most careful with
_WEIGHT = {"read": 0, "settings": 1, "transaction": 2, "ddl": 3, "write": 4}


def _capture_kind(sql: str, dialect: str) -> str:
    try:
        parts = parse(sql, dialect)
    except Unparsed:
        parts = []
    if len(parts) > 1:
        kinds = [_one_kind(part.sql(dialect=dialect), dialect) for part in parts]
        return max(kinds, key=_WEIGHT.__getitem__)
    return _one_kind(sql, dialect)


def _one_kind(sql: str, dialect: str) -> str:
    inner = explained(sql)
    if inner is not None:
        return _capture_kind(inner, dialect) if _ANALYZE.match(head(sql)) else "read"
    if transaction_change(sql) is not None:
        return "transaction"
    if is_read(sql, dialect):
        return "read"
    kind = statement_kind(sql, dialect)
    if kind in _ROWS_ONLY:
        return "read"
    if kind in _DDL:
        return "ddl"
    if kind in _SETTINGS:
        return "settings"
    if kind in _TRANSACTION:
        return "transaction"
    return "write"
