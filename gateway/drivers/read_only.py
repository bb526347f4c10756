"""Connections the database itself keeps from writing, for a read-only user's sessions.

The statement pipeline refuses what a read-only user sends that is not a query
(:func:`gateway.sql.kinds.is_read`), but no parser sees what a function defined on
the server does (``SELECT my_function()`` whose body inserts). Where the database
has a mode for it, the adbc and odbc engines open a read-only user's sessions on
connections put in that mode, and keep those connections apart from the others.

The user cannot leave the mode: ``SET``, ``RESET``, ``PRAGMA``, ``BEGIN READ WRITE``
and ``set_config()`` are no queries, and the pipeline refuses them first; and since
a function on the server may turn it off, the engines set it again before each
statement.
"""

from __future__ import annotations

from gateway.errors import GatewayError, QueryError

#: By the database's sqlglot dialect: the statement making one connection read-only.
#: PostgreSQL starts every later transaction of the connection read-only; SQLite
#: refuses any change to the database file (``query_only``). Others have no such mode
#: per connection (SQL Server, DuckDB: read-only is per database), or it is untested.
READ_ONLY_SQL = {
    "postgres": "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "sqlite": "PRAGMA query_only = ON",
}

#: Words of the database's refusal of a write on such a connection.
_REFUSALS = ("read-only transaction", "readonly database")


def read_only_sql(dialect: str | None) -> str | None:
    """The statement making a connection to a ``dialect`` database read-only, or None
    when the database has none (the pipeline's check is then the only one)."""
    return READ_ONLY_SQL.get(dialect or "")


def as_refusal(error: GatewayError) -> GatewayError:
    """``error``, raised on a read-only connection, as its user should read it: a write
    the database refused says that the user is read-only."""
    lower = error.message.lower()
    if error.kind != "permission" or not any(words in lower for words in _REFUSALS):
        return error
    return QueryError(f"the user is read-only, and the database refused to write: "
                      f"{error.message}", engine=error.engine, kind="permission",
                      hint="a read-only user's statements run on a read-only connection; "
                           "functions that write fail there")
