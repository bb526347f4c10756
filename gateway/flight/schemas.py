"""Answer schemas of prepared statements, kept so preparing a statement again plans nothing.

Clients such as the ADBC driver prepare every statement they run: without a
cache each ``CreatePreparedStatement`` costs the engine a plan (a ``LIMIT 0``
run) before the ``GetFlightInfo`` plans it again. A schema is kept per
statement text, engine, core session and principal, and every schema kept is
forgotten as soon as any statement that is not surely a read runs on the
service (DDL, DML, ``SET``, ``USE``, a transaction's end: anything may change
what a name resolves to). The cache skips the plan only: preparing still takes
the statement through the pipeline's checks (``Session.prepare``), and running
it takes it through every step again.

A database the service does not own alone (a PostgreSQL or Flight SQL server
behind an ``adbc`` or ``odbc`` engine, a DuckDB file another process writes)
changes without the service seeing a statement: a schema is kept for
``ttl`` seconds at most, so such a change shows within that time.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

from gateway.sql.kinds import head

if TYPE_CHECKING:
    import pyarrow as pa

#: Statements that change no schema: a query with no second statement after it.
#: (``WITH`` may wrap a write, ``PRAGMA`` may change settings, ``EXPLAIN ANALYZE``
#: runs its statement: none of them counts.)
_SURELY_READS = re.compile(r"(\(|select\b|from\b|values\b|table\b|show\b|describe\b|"
                           r"summarize\b)", re.IGNORECASE)


def changes_nothing(sql: str) -> bool:
    """Whether ``sql`` surely leaves every schema as it was (read by its first keyword)."""
    return _SURELY_READS.match(head(sql)) is not None and ";" not in sql.strip().rstrip(";")


class PreparedSchemas:
    """Answer schemas by ``(principal, engine, session, statement)``, at most ``size`` of them,
    each for ``ttl`` seconds at most.

    Thread safety: any number of threads look up, keep and invalidate at once.
    """

    def __init__(self, size: int = 1024, ttl: float = 10.0):
        self.size = size
        self.ttl = ttl
        self._schemas: OrderedDict[Hashable, tuple[int, float, pa.Schema]] = OrderedDict()
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """Read before planning a schema, and handed to :meth:`keep` with it: a schema
        planned while a statement changed things is never kept as current."""
        return self._generation

    def get(self, key: Hashable) -> pa.Schema | None:
        with self._lock:
            kept = self._schemas.get(key)
            if kept is None or kept[0] != self._generation or \
                    time.monotonic() - kept[1] > self.ttl:
                return None
            self._schemas.move_to_end(key)
            return kept[2]

    def keep(self, key: Hashable, generation: int, schema: pa.Schema) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self._schemas[key] = (generation, time.monotonic(), schema)
            self._schemas.move_to_end(key)
            while len(self._schemas) > self.size:
                self._schemas.popitem(last=False)

    def invalidate(self) -> None:
        """Forget every schema: a statement that may change one is running or ran."""
        with self._lock:
            self._generation += 1
            self._schemas.clear()
