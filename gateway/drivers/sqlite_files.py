"""With ``files = "sources"``: SQLite SQL that would reach a file besides the engine's own database.

A SQLite database opened through a driver (ADBC, ODBC) runs its SQL with the
gateway's file rights: ``ATTACH`` opens or creates any file, ``VACUUM INTO``
writes one, and ``load_extension`` (enabled in the SQLite ODBC driver) loads a
shared library. The engines refuse those statements before the driver sees them.
"""

from __future__ import annotations

import re

from gateway.errors import QueryError

_FILE_REACHING = re.compile(r"(?is)\b(attach|vacuum\b.*?\binto|load_extension)\b")


def check_sqlite_sql(sql: str, engine: str) -> None:
    """Refuse ``sql`` when it reaches past the database file (string literals included).

    Raises:
        QueryError: (kind ``permission``) what was refused.
    """
    found = _FILE_REACHING.search(sql)
    if found is not None:
        word = found.group(1).split()[0].upper()
        what = "VACUUM INTO" if word == "VACUUM" else word
        raise QueryError(
            f"{what} is not allowed: with files = \"sources\" this SQLite database may "
            "reach no other file", engine=engine, kind="permission",
            hint="query this database's own tables")
