"""One structured log line per query, on the ``arrowgate.flight.query`` logger.

The line is a JSON object: ``query_id``, ``user``, ``engine``,
``fingerprint`` (a hash of the statement with its literals taken out, so the
same query with other values shares it, and no value reaches the log),
``rows``, ``bytes``, ``ms``, ``outcome`` (``ok``, ``cancelled``,
``expired``, ``timeout``, or an error kind) and ``shadow`` (the verdict, when
the query was shadowed). Statement text and parameters are never logged.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from gateway.flight.statements import ServedQuery
from gateway.sql.kinds import fingerprint

logger = logging.getLogger("arrowgate.flight.query")

def verdict(record: Any) -> dict[str, Any] | None:
    """A shadow record as the log and the ``shadow-verdict`` action show it."""
    if record is None:
        return None
    done = getattr(record, "done", None)
    if callable(done) and not done():
        return {"status": "pending"}
    return {"status": record.status, "category": getattr(record, "category", None),
            "message": getattr(record, "message", None), "ratio": record.ratio}


def log_query(query: ServedQuery) -> None:
    """The line for a query that ran (whatever became of its stream)."""
    record(query_id=query.query_id, user=query.user, engine=query.engine, sql=query.sql,
           rows=query.rows, nbytes=query.bytes, started=query.created,
           outcome=query.outcome, shadow=query.shadow)


def record(*, query_id: int | None, user: str, engine: str, sql: str, rows: int, nbytes: int,
           started: float, outcome: str, shadow: Any = None) -> None:
    """The line for one query; ``started`` is a ``time.monotonic()`` reading."""
    logger.info(json.dumps({
        "query_id": query_id, "user": user, "engine": engine, "fingerprint": fingerprint(sql),
        "rows": rows, "bytes": nbytes, "ms": round((time.monotonic() - started) * 1000, 3),
        "outcome": outcome, "shadow": verdict(shadow),
    }, default=str))
