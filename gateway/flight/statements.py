"""Queries between GetFlightInfo and the end of their DoGet, and prepared statements.

A query runs from the moment a client asks for its FlightInfo; its ticket
names it until the stream ends, the client cancels it, or it waits unread
longer than ``ticket_idle``. The concurrency limits are the statement
pipeline's (:class:`gateway.statement.Limits`): a statement counts from its
admission, before it is planned, until its answer is read, closed or expired. Handles are random, and a
handle only works for the user it was issued to: anyone else is told it does
not exist.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.flight.backend import Prepared
    from gateway.flight.serve_config import ServeSettings
    from gateway.result import Result

_local_ids = itertools.count(1)


@dataclass
class ServedQuery:
    """One statement the service is running for a client; ``first`` is its answer."""

    user: str
    engine: str
    sql: str
    first: Result
    handle: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    created: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    rows: int = 0
    bytes: int = 0
    streaming: bool = False
    cancelled: bool = False
    outcome: str = "waiting"
    shadow: Any = None
    #: what a capture of it records besides the above
    parameters: pa.Table | None = None
    settings: list[str] = field(default_factory=list)
    write: bool = False

    @property
    def schema(self) -> pa.Schema:
        return self.first.schema

    @property
    def query_id(self) -> int:
        """The core's id of the query (its hooks and ``gw.running()`` show the same)."""
        if self.first.query_id is None:  # an answer from outside a query handle
            self.first.query_id = -next(_local_ids)
        return self.first.query_id

    def describe(self) -> dict[str, Any]:
        return {"query_id": self.query_id, "user": self.user, "engine": self.engine,
                "sql": self.sql, "started": self.started_at, "rows": self.rows,
                "streaming": self.streaming}


class Queries:
    """The running queries, with the concurrency limits."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self._by_handle: dict[bytes, ServedQuery] = {}
        self._lock = threading.Lock()
        self._finished: dict[int, FinishedQuery] = {}  # the last verdicts, by query id

    def add(self, query: ServedQuery) -> None:
        """Issue the query's ticket (its statement was admitted by the pipeline)."""
        with self._lock:
            self._by_handle[query.handle] = query

    def claim(self, handle: bytes, user: str) -> ServedQuery:
        """The query a ticket names, marked as being streamed (a ticket is read once).

        Raises:
            KeyError: no such query for this user (never issued, read, expired or cancelled).
        """
        with self._lock:
            query = self._by_handle.get(handle)
            if query is None or query.user != user or query.streaming:
                raise KeyError("no such query: the ticket was never issued, was read already, "
                               "or expired; run the statement again")
            query.streaming = True
            return query

    def find(self, handle: bytes, user: str) -> ServedQuery | None:
        with self._lock:
            query = self._by_handle.get(handle)
            return query if query is not None and query.user == user else None

    def finish(self, query: ServedQuery) -> None:
        """Release the query's slot and close its answer (safe to call twice).

        What is kept of it for the ``shadow-verdict`` action is its user and its shadow
        record, never its answer: an answer kept there held the engine's unread batches
        (2.6 MB for each answer a client stopped reading).
        """
        with self._lock:
            self._by_handle.pop(query.handle, None)
            self._finished[query.query_id] = FinishedQuery(query.user, query.shadow)
            while len(self._finished) > 1000:
                del self._finished[next(iter(self._finished))]
        query.first.close()

    def finished(self, query_id: int, user: str) -> FinishedQuery | None:
        with self._lock:
            query = self._finished.get(query_id)
        return query if query is not None and query.user == user else None

    def running(self) -> list[ServedQuery]:
        """The queries whose ticket is issued and not yet read to its end."""
        with self._lock:
            return list(self._by_handle.values())

    def expire(self) -> list[ServedQuery]:
        """Drop queries whose ticket was never redeemed within ``ticket_idle``: each holds
        an admitted statement (counted toward the limits) and its connection."""
        cutoff = time.monotonic() - self.settings.ticket_idle
        with self._lock:
            stale = [q for q in self._by_handle.values() if not q.streaming and q.created < cutoff]
        for query in stale:
            query.outcome = "expired"
            self.finish(query)
        return stale


class FinishedQuery(NamedTuple):
    """What is remembered of a finished query: whose it was, and its shadow record."""

    user: str
    shadow: Any


@dataclass
class PreparedEntry:
    """A prepared statement, and the parameter rows last bound to it."""

    user: str
    prepared: Prepared
    parameters: pa.Table | None = None
    used: float = field(default_factory=time.monotonic)
    #: seconds its prepare took, charged to its first execution's clock, then 0
    unbilled: float = 0.0

    def charge(self) -> float:
        """The prepare's time, once: the ADBC driver prepares every statement it executes,
        so a client's one call is a prepare then an execution, and its time starts with
        the prepare (DuckDB plans a statement in each: a 200 KB one took seconds)."""
        unbilled, self.unbilled = self.unbilled, 0.0
        return unbilled


class PreparedStatements:
    """Prepared statements by handle."""

    def __init__(self, idle: float):
        self.idle = idle
        self._by_handle: dict[bytes, PreparedEntry] = {}
        self._lock = threading.Lock()

    def add(self, user: str, prepared: Prepared, took: float = 0.0) -> bytes:
        """Keep ``prepared``, whose prepare took ``took`` seconds; its handle."""
        handle = secrets.token_bytes(16)
        with self._lock:
            self._by_handle[handle] = PreparedEntry(user, prepared, unbilled=took)
        return handle

    def get(self, handle: bytes, user: str) -> PreparedEntry:
        """Raises KeyError: no such prepared statement for this user."""
        with self._lock:
            entry = self._by_handle.get(handle)
            if entry is None or entry.user != user:
                raise KeyError("no such prepared statement: it was closed or expired; "
                               "prepare the statement again")
            entry.used = time.monotonic()
            return entry

    def close(self, handle: bytes, user: str) -> None:
        entry = self.get(handle, user)
        with self._lock:
            self._by_handle.pop(handle, None)
        entry.prepared.close()

    def expire(self, idle: float | None = None) -> None:
        """Close prepared statements unused for ``idle`` seconds (default: ``session_idle``)."""
        cutoff = time.monotonic() - (self.idle if idle is None else idle)
        with self._lock:
            stale = [h for h, e in self._by_handle.items() if e.used <= cutoff]
            entries = [self._by_handle.pop(h) for h in stale]
        for entry in entries:
            entry.prepared.close()

    def close_all(self) -> None:
        self.expire(idle=-1.0)
