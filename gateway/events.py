"""The values handed to the query-event hooks."""

from __future__ import annotations

from typing import Any

from gateway.records import Record


class QueryEvent(Record):
    """One query as the gateway runs it.

    Attributes:
        query_id: unique within the process, for correlating events.
        sql: the SQL as the engine receives it (after rewriting).
        engine: the name of the engine that runs it.
        engine_type: that engine's type name.
        parameters: the bound parameter values, or None.
        started: ``time.time()`` when the query was handed to the engine.
        original_sql: the SQL as the caller wrote it (before rewriting).
        tags: free-form facts later layers attach (``role = "shadow"``, ...).
    """

    # and "__dict__": a plugin may keep attributes of its own on the event between its
    # hooks, as it could on the dataclass this was
    __slots__ = ("query_id", "sql", "engine", "engine_type", "parameters", "started",
                 "original_sql", "tags", "__dict__")

    def __init__(self, query_id: int, sql: str, engine: str, engine_type: str,
                 parameters: list[Any] | None, started: float, original_sql: str,
                 tags: dict[str, Any] | None = None) -> None:
        self.query_id, self.sql, self.engine, self.engine_type = query_id, sql, engine, engine_type
        self.parameters, self.started, self.original_sql = parameters, started, original_sql
        self.tags: dict[str, Any] = {} if tags is None else tags
