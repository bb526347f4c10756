"""What a statement reaches beyond its own session: settings of global scope, other
servers, and SQL hidden in strings.

DuckDB keeps most settings per database, not per connection: a plain
``SET threads = 1`` (or ``default_order``, ``memory_limit``,
``preserve_insertion_order``...) on one connection changes every other
connection's answers, and ``SET GLOBAL`` does so for any setting.
``SET SESSION x`` keeps a setting in its connection, and DuckDB itself refuses
it for a setting that cannot be local ("cannot be set locally"). So for
statements from users who share a server, :func:`session_scoped` turns a plain
``SET``/``RESET`` into its ``SESSION`` form and refuses the ``GLOBAL`` forms
and the pragmas that change settings.

``ATTACH`` of a server and the scanner functions that open one from a
connection string (``postgres_scan``, ``mysql_query``...) would be offered
the credentials an engine holds (a DuckDB secret without a scope goes to every
server of its type): :func:`server_reach` finds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.sql import Unparsed, parse
from gateway.sql.kinds import head

_SETTINGS_WORDS = re.compile(r"(?i)\b(set|reset|pragma)\b")
#: a scope said already; a VARIABLE (``SET VARIABLE x = 1``) is always its connection's own
_SCOPE = re.compile(r"(?i)\A(SET|RESET)\s+(GLOBAL|SESSION|LOCAL|VARIABLE)\b")
_PLAIN = re.compile(r"(?i)\A(SET|RESET)\s+")
#: pragmas that only read (DuckDB's "PRAGMA name" forms of its catalog functions)
READ_PRAGMAS = frozenset({
    "table_info", "show", "show_tables", "show_tables_expanded", "show_databases",
    "database_list", "database_size", "storage_info", "metadata_info", "version",
    "platform", "functions", "collations", "user_agent", "table_storage_info",
})
_SERVER_FUNCTIONS = re.compile(r"(?i)\b((?:postgres|mysql|odbc)_[a-z_]+)\s*\(")
_SERVER_TARGET = re.compile(r"(?i)\A\s*(?:postgres|postgresql|pg|mysql|ducklake|md|motherduck)"
                            r":|\b(?:host|hostaddr|dbname|port|user|service)\s*=")
_FILE_TYPES = frozenset({"duckdb", "sqlite", "sqlite3"})


@dataclass(frozen=True)
class ScopedStatement:
    """A statement as it may run for a user who shares the server.

    Attributes:
        sql: the statement to run (a plain ``SET`` turned into ``SET SESSION``).
        refusal: why it may not run at all, or None.
    """

    sql: str
    refusal: str | None = None


def session_scoped(sql: str, dialect: str,
                   fixed: frozenset[str] = frozenset()) -> ScopedStatement:
    """``sql`` with its settings kept in the session, or why that cannot be done.

    ``fixed``: names of settings the server's configuration sets (lower case),
    which a user may not change even in their session (``operator_memory_limit``,
    the per-statement memory cap). Only DuckDB's dialect is read: other engines
    keep settings per connection.
    """
    if dialect != "duckdb" or _SETTINGS_WORDS.search(sql) is None:
        return ScopedStatement(sql)
    from sqlglot import exp

    try:
        statements = parse(sql, dialect)
    except Unparsed:
        return ScopedStatement(sql, "the statement mentions SET, RESET or PRAGMA and cannot "
                                    "be read to check that its settings stay in the session")
    changes = [s for s in statements if _changes_settings(s, exp)]
    if not changes:
        return ScopedStatement(sql)
    for stmt in changes:
        refusal = _refusal(stmt, exp) or _fixed(stmt, exp, fixed)
        if refusal is not None:
            return ScopedStatement(sql, refusal)
    if len(statements) > 1:
        return ScopedStatement(sql, "a SET or RESET must be a statement of its own here")
    start = head(sql)
    if _SCOPE.match(start):
        return ScopedStatement(sql)
    return ScopedStatement(_PLAIN.sub(lambda m: f"{m.group(1)} SESSION ", start, count=1))


def _changes_settings(stmt: Any, exp: Any) -> bool:
    if isinstance(stmt, (exp.Set, exp.Pragma)):
        return True
    return isinstance(stmt, exp.Command) and stmt.name.upper() == "RESET"


def _refusal(stmt: Any, exp: Any) -> str | None:
    if isinstance(stmt, exp.Pragma):
        target = stmt.this
        if isinstance(target, exp.EQ):  # PRAGMA threads = 2
            target = target.this
        name = target.name if isinstance(target, (exp.Anonymous, exp.Column)) else ""
        if name.lower() in READ_PRAGMAS:
            return None
        return (f"PRAGMA {name or '...'} changes a setting of the whole database, which every "
                "other user of this server shares; use SET SESSION where the setting allows it")
    if isinstance(stmt, exp.Set):
        for item in stmt.expressions:
            if str(item.args.get("kind") or "").upper() == "GLOBAL":
                return ("SET GLOBAL changes the setting for every user of this server; "
                        "use SET SESSION (or plain SET, which stays in your session here)")
        return None
    text = str(stmt.expression.this).strip()
    if text.upper().startswith("GLOBAL"):
        return "RESET GLOBAL changes the setting for every user of this server; use RESET"
    return None


def _fixed(stmt: Any, exp: Any, fixed: frozenset[str]) -> str | None:
    """Why ``stmt`` may not run: it changes a setting the configuration fixes."""
    if not fixed:
        return None
    names: list[str] = []
    if isinstance(stmt, exp.Set):
        for item in stmt.expressions:
            if str(item.args.get("kind") or "").upper() == "VARIABLE":
                continue  # a variable of the session's own, not a setting
            target = item.this.this if isinstance(item.this, exp.EQ) else item.this
            names.append(target.name if target is not None else "")
    elif isinstance(stmt, exp.Command):
        words = str(stmt.expression.this).split()
        names = [] if words[:1] == ["VARIABLE"] else words[-1:]
    for name in names:
        if name.lower() in fixed:
            return (f"{name} is fixed by the server's configuration; it cannot be changed "
                    "in a session")
    return None


_WIDE_WORDS = re.compile(r"(?i)\b(attach|detach|secret|install|load|extensions)\b")
_SECRET_DDL = re.compile(r"(?i)\A\s*(CREATE|DROP)\b.*?\bSECRET\b", re.DOTALL)


def database_wide(sql: str, dialect: str) -> str | None:
    """What in ``sql`` changes the database every connection shares, or None.

    DuckDB keeps attached databases, secrets and loaded extensions per database,
    not per connection: one client's ``DETACH`` of the lake, ``CREATE OR REPLACE
    SECRET`` over the catalog's password, or ``LOAD`` of an extension would
    change every other client's engine.
    """
    if dialect != "duckdb" or _WIDE_WORDS.search(sql) is None:
        return None
    from sqlglot import exp

    try:
        statements = parse(sql, dialect)
    except Unparsed:
        return "a statement that cannot be read to check what it changes"
    for stmt in statements:
        if isinstance(stmt, exp.Attach):
            return "ATTACH"
        if isinstance(stmt, exp.Detach):
            return "DETACH"
        if isinstance(stmt, exp.Install):
            return "INSTALL"
        if isinstance(stmt, exp.Update) and not stmt.expressions \
                and stmt.this is not None and stmt.this.name.upper() == "EXTENSIONS":
            return "UPDATE EXTENSIONS"
        if isinstance(stmt, exp.Command):
            name = stmt.name.upper()
            if name in ("LOAD", "ATTACH", "DETACH", "INSTALL", "FORCE"):
                return name
            if name in ("CREATE", "DROP") and _SECRET_DDL.match(f"{name} {stmt.expression}"):
                return f"{name} SECRET"
    return None


def server_reach(sql: str, dialect: str) -> str | None:
    """What in ``sql`` would open a connection to a server (an ``ATTACH`` of one, a
    scanner function with a connection string), or None.

    Function names are matched in the whole text, string literals included, so
    one cannot hide inside ``query('...')``.
    """
    found = _SERVER_FUNCTIONS.search(sql)
    if found is not None:
        return f"{found.group(1)}()"
    if re.search(r"(?i)\battach\b", sql) is None:
        return None
    from sqlglot import exp

    try:
        statements = parse(sql, dialect)
    except Unparsed:
        return "ATTACH"
    for stmt in statements:
        for node in stmt.find_all(exp.Attach):
            if _attaches_server(node, exp):
                return "ATTACH of a server"
        if isinstance(stmt, exp.Command) and stmt.name.upper() == "ATTACH":
            return "ATTACH"
    return None


def _attaches_server(node: Any, exp: Any) -> bool:
    target = node.this
    if isinstance(target, exp.Alias):
        target = target.this
    if not isinstance(target, exp.Literal) or not target.is_string:
        return True
    for option in node.expressions or []:
        if option.this.name.upper() == "TYPE":
            return option.expression.name.lower() not in _FILE_TYPES
    return _SERVER_TARGET.search(target.this) is not None
