"""The DuckDB connection a comparison computes in (pairing rows, hashing them)."""

from __future__ import annotations

import threading
from typing import Any

_database: Any = None
_database_lock = threading.Lock()


def connection(large: bool) -> Any:
    """A DuckDB connection with temporary tables of its own, closed after one comparison.

    Small answers get a cursor on one shared in-memory database: opening a database
    costs ~100 times more than a cursor on a busy machine, and the fuzzer and shadow
    mode compare many small answers. Large ones get a database of their own, whose
    memory goes back when it closes (a shared one kept 200-350 MiB after comparing two
    2M-row answers, a closed one 70 MiB).
    """
    global _database
    import duckdb

    if large:
        return duckdb.connect()
    with _database_lock:
        if _database is None:
            _database = duckdb.connect()
        return _database.cursor()
