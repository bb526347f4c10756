"""The names DuckDB gives the columns of an answer, where the csv engine cannot know them.

DuckDB names an unaliased expression after its own rendering of the parsed
expression: ``(a + 1)``, ``"year"(d)``, ``CAST(a AS VARCHAR)``, ``(b ~~ 'x%')``.
That rendering has many rules and changes between releases, so the csv engine
does not imitate it: :func:`duckdb_names` asks DuckDB to describe the statement
over an empty table of the same columns and types, in an in-memory database
that reads no file. :func:`gateway_csv.query.output_name` names what needs no
asking (aliases, columns, ``count(*)``, an aggregate of a plain column), which
tests/test_csv_names.py holds to DuckDB's names.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from gateway.errors import Unsupported

#: DuckDB's keywords (``duckdb_keywords()`` of 2.0.1): a column so named is written quoted
#: in an expression's name (``max("year")``); tests/test_csv_names.py checks the list
KEYWORDS = frozenset(["abort", "absolute", "access", "action", "add", "admin", "after", "aggregate", "all", "also", "alter", "always", "analyse", "analyze", "and", "anti", "any", "approx", "array", "as", "asc", "asof", "assertion", "assignment", "asymmetric", "at", "attach", "attribute", "authorization", "backward", "before", "begin", "between", "bigint", "binary", "bit", "boolean", "both", "by", "cache", "call", "called", "cascade", "cascaded", "case", "cast", "catalog", "centuries", "century", "chain", "char", "character", "characteristics", "check", "checkpoint", "class", "close", "cluster", "coalesce", "collate", "collation", "column", "columns", "columns", "comment", "comments", "commit", "committed", "compression", "concurrently", "configuration", "conflict", "connect", "connection", "constraint", "constraints", "content", "continue", "conversion", "copy", "cost", "create", "cross", "csv", "cube", "current", "cursor", "cycle", "data", "database", "day", "days", "deallocate", "dec", "decade", "decades", "decimal", "declare", "default", "defaults", "deferrable", "deferred", "definer", "delete", "delimiter", "delimiters", "depends", "desc", "describe", "destroy", "detach", "dictionary", "disable", "discard", "disconnect", "distance", "distinct", "do", "document", "domain", "double", "drop", "each", "else", "enable", "encoding", "encrypted", "end", "enum", "error", "escape", "event", "exact", "except", "exclude", "excluding", "exclusive", "execute", "exists", "explain", "export", "export_state", "extension", "extensions", "external", "extract", "false", "family", "fetch", "filter", "first", "float", "following", "for", "force", "foreign", "forward", "freeze", "from", "full", "function", "functions", "generated", "generated", "glob", "global", "grant", "granted", "group", "grouping", "grouping_id", "groups", "handler", "having", "header", "hold", "hour", "hours", "identity", "if", "ignore", "ilike", "immediate", "immutable", "implicit", "import", "in", "include", "including", "increment", "index", "indexes", "inherit", "inherits", "initially", "inline", "inner", "inout", "input", "insensitive", "insert", "install", "instead", "int", "integer", "intersect", "interval", "into", "invoker", "is", "isnull", "isolation", "join", "json", "key", "label", "lambda", "language", "large", "last", "lateral", "leading", "leakproof", "left", "level", "like", "limit", "listen", "load", "local", "location", "lock", "locked", "logged", "macro", "map", "map", "mapping", "match", "matched", "materialized", "maxvalue", "merge", "method", "microsecond", "microseconds", "millennia", "millennium", "millisecond", "milliseconds", "minute", "minutes", "minvalue", "mode", "month", "months", "move", "name", "names", "national", "natural", "nchar", "nearest", "new", "next", "no", "none", "not", "nothing", "notify", "notnull", "nowait", "null", "nullif", "nulls", "numeric", "object", "of", "off", "offset", "oids", "old", "on", "only", "operator", "option", "options", "or", "order", "ordinality", "others", "out", "outer", "over", "overlaps", "overlay", "overriding", "owned", "owner", "parallel", "parser", "partial", "partition", "partitioned", "passing", "password", "percent", "persistent", "pivot", "pivot_longer", "pivot_wider", "placing", "plans", "policy", "position", "positional", "pragma", "preceding", "precision", "prepare", "prepared", "preserve", "primary", "prior", "privileges", "procedural", "procedure", "program", "publication", "qualify", "quarter", "quarters", "quote", "range", "read", "real", "reassign", "recheck", "recursive", "ref", "references", "referencing", "refresh", "register", "reindex", "relative", "release", "rename", "repeatable", "replace", "replica", "reset", "resource", "resources", "respect", "restart", "restrict", "returning", "returns", "revoke", "right", "role", "rollback", "rollup", "row", "rows", "rule", "sample", "savepoint", "schema", "schemas", "scope", "scroll", "search", "second", "seconds", "secret", "secure", "security", "select", "semi", "sequence", "sequences", "serializable", "server", "session", "set", "setof", "sets", "share", "show", "similar", "similarity", "simple", "skip", "smallint", "snapshot", "some", "sorted", "source", "sql", "stable", "standalone", "start", "statement", "statistics", "stdin", "stdout", "storage", "stored", "strict", "strip", "struct", "struct", "subscription", "substring", "summarize", "symmetric", "sysid", "system", "table", "tables", "tablesample", "tablespace", "target", "temp", "template", "temporary", "text", "then", "ties", "time", "timestamp", "to", "trailing", "transaction", "transform", "treat", "trigger", "trim", "true", "truncate", "trusted", "try_cast", "try_cast", "tuple", "tuple", "type", "types", "unbounded", "uncommitted", "unencrypted", "union", "unique", "unknown", "unlisten", "unlogged", "unpack", "unpivot", "until", "update", "use", "user", "using", "vacuum", "valid", "validate", "validator", "value", "values", "varchar", "variable", "variadic", "varying", "verbose", "version", "view", "views", "virtual", "volatile", "week", "weeks", "when", "where", "whitespace", "window", "with", "within", "without", "work", "wrapper", "write", "xml", "xmlattributes", "xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlnamespaces", "xmlparse", "xmlpi", "xmlroot", "xmlserialize", "xmltable", "year", "years", "yes", "zone"])

#: a column name DuckDB writes back as it was written in an aggregate's name (``max(Fare)``);
#: DuckDB 2.0.1 quotes one starting with an underscore and a digit (``count("_0")``)
_PLAIN_NAME = re.compile(r"(?!_[0-9])[A-Za-z_][A-Za-z0-9_]*\Z")


def aggregate_name(function: str, column: str | None) -> str | None:
    """DuckDB's name of ``function`` (count, sum, avg, min, max: lower case) of one column
    named as the statement writes it (None: ``count(*)``), where it is known without
    asking DuckDB: ``count_star()``, ``avg(total_amount)``; None for a column DuckDB
    quotes in the name (a keyword, a name that is no plain word)."""
    if column is None:
        return "count_star()"
    if _PLAIN_NAME.match(column) and column.lower() not in KEYWORDS:
        return f"{function}({column})"
    return None


_lock = threading.Lock()
_connection: Any = None


def duckdb_names(sql: str, table: str, columns: tuple[tuple[str, str], ...]) -> list[str]:
    """The names of the columns of ``sql``'s answer, as DuckDB gives them.

    Args:
        sql: one SELECT over ``table`` (or with no FROM: ``table`` is then empty).
        table: the name the statement reads its rows from.
        columns: (name, DuckDB type) of each of the table's columns, in order.

    Raises:
        Unsupported: DuckDB cannot describe the statement (so DuckDB answers it).
    """
    return list(_names(sql.strip().rstrip(";").strip(), table, columns))


@functools.lru_cache(maxsize=512)
def _names(sql: str, table: str, columns: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    import duckdb

    global _connection
    with _lock:
        if _connection is None:
            con = duckdb.connect(":memory:")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
            _connection = con
        con = _connection
        try:
            if table:
                defined = ", ".join(f"{_quoted(name)} {kind}" for name, kind in columns)
                con.execute(f"CREATE OR REPLACE TEMP TABLE {_quoted(table)} ({defined})")
            try:
                described = con.execute(f"DESCRIBE {sql}").fetchall()
            finally:
                if table:
                    con.execute(f"DROP TABLE IF EXISTS temp.main.{_quoted(table)}")
        except duckdb.Error as exc:
            raise Unsupported("the csv engine cannot name this answer's columns as DuckDB does "
                              f"({str(exc).splitlines()[0][:120]})",
                              engines=("duckdb",)) from None
    return tuple(row[0] for row in described)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


__all__ = ["KEYWORDS", "aggregate_name", "duckdb_names"]
