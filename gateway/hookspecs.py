"""Every hook arrowgate calls, and the values they are handed. This module is the one
place they are declared.

A plugin is a module (or object) with functions decorated by
``gateway.hookimpl`` whose names match these specs; pluggy checks the
argument names. Plugins are found through the entry-point group
``arrowgate``; the built-in engines register through the same group.
``ARROWGATE_PLUGINS`` (a comma list of entry-point names) limits which load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from gateway.records import Record

if TYPE_CHECKING:
    import argparse

    from gateway.config import GatewayConfig
    from gateway.engine import Engine
    from gateway.errors import GatewayError
    from gateway.result import Result
    from gateway.shadow.record import ShadowRecord
    from gateway.statement import Pipeline, Statement

hookspec = pluggy.HookspecMarker("arrowgate")

#: what to do when nothing answers the shadow hooks (the hint of that error)
SHADOW_MISSING = ("arrowgate's shadow layer registers through the entry point 'shadow' of "
                  "the group 'arrowgate' (gateway.shadow.plugin): reinstall arrowgate")


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


@hookspec
def arrowgate_engine_types() -> list[type[Engine]]:
    """Register engine types.

    Called at most once per plugin and plugin manager: on an outside plugin
    (or one passed to :func:`gateway.connect`) when the gateway starts; on a
    built-in one (``csv``, ``duckdb``, ...) only when a configuration names
    its type or every type is listed (:mod:`gateway.plugins`).

    Returns:
        A list of :class:`gateway.engine.Engine` subclasses, each with a
        distinct ``type_name``. Importing the classes must not import their
        drivers (``arrowgate engines`` lists them cheaply).

    All answers are collected (not firstresult); two plugins registering the
    same type name is a configuration error naming both.
    """


@hookspec
def arrowgate_query_started(event: QueryEvent) -> None:
    """Observe a query being handed to an engine.

    Called just before ``Engine.execute``, after SQL rewriting.

    Args:
        event: the query (id, SQL, engine name and type, parameters, start time).

    Returns nothing; all implementations are called. An exception raised here
    is reported as a warning and does not stop the query.
    """


@hookspec
def arrowgate_query_finished(event: QueryEvent, rows: int, elapsed: float) -> None:
    """Observe a query whose answer was read to the end.

    Called once the result stream is exhausted (or the result is closed
    after reading), so ``rows`` and ``elapsed`` cover the whole answer.

    Args:
        event: the same object passed to ``arrowgate_query_started``.
        rows: the number of rows the caller received.
        elapsed: seconds from the start of execution to the last batch.

    Returns nothing; all implementations are called.
    """


@hookspec
def arrowgate_query_failed(event: QueryEvent, error: GatewayError, elapsed: float) -> None:
    """Observe a query that failed (while starting or while streaming).

    Called once per failed query, when ``Engine.execute`` raises or when
    reading its stream raises, before the error reaches the caller.

    Args:
        event: the same object passed to ``arrowgate_query_started``.
        error: the :mod:`gateway.errors` exception the caller will receive.
        elapsed: seconds from the start of execution to the failure.

    Returns nothing; all implementations are called.
    """


@hookspec(firstresult=True)
def arrowgate_rewrite_sql(sql: str, engine: str, engine_type: str) -> str | None:
    """Rewrite SQL before it reaches an engine.

    Called for every query, before ``arrowgate_query_started``.

    Args:
        sql: the SQL the caller gave.
        engine: the target engine's name.
        engine_type: the target engine's type name.

    Returns:
        The SQL to run instead, or None to leave it alone. firstresult: the
        first plugin that returns a string wins (plugins registered later are
        called first).
    """


@hookspec
def arrowgate_register_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add subcommands to the ``arrowgate`` command line.

    Called once each time the ``arrowgate`` command builds its argument
    parser, after the core commands (``query``, ``engines``, ``sources``,
    ``data``, ``shadow``, ``bench``) are added, so a plugin can also add an
    action to one of them with :func:`gateway.cli.commands.add_action`.
    datasette's ``register_commands`` is the model.

    Args:
        subparsers: the ``arrowgate`` parser's subparsers. Add a command with
            :func:`gateway.cli.commands.add_command` (which gives it the shared
            epilog and examples) and ``set_defaults(run=FUNCTION)``, where
            ``FUNCTION(args)`` returns the exit code. Import heavy libraries
            inside ``FUNCTION``, never at module level: every ``arrowgate``
            invocation, ``--help`` included, runs this hook.

    Returns nothing; all implementations are called (plugins registered later
    first). Two plugins adding the same command name is an argparse error.
    """


@hookspec
def arrowgate_shadow_finished(record: ShadowRecord) -> None:
    """Observe a shadow record becoming final.

    Called once per record (compared or skipped), after it is appended to the
    shadow store and after its done-callbacks, in the thread that completes
    it: the caller's, on the last read of a shadowed answer, or the verdict
    thread with ``background = true``.

    Args:
        record: the final :class:`gateway.shadow.record.ShadowRecord`
            (``record.query_id`` ties it to the query's other events).

    Returns nothing; all implementations are called. An exception raised here
    is reported as a warning and does not reach the caller.
    """


@hookspec(firstresult=True)
def arrowgate_shadow_settings(config: GatewayConfig) -> Any:
    """Check the configuration's ``[shadow]`` section.

    Called once as a gateway starts whose configuration has a ``[shadow]``
    section. The shadow layer (:mod:`gateway.shadow.plugin`) answers it; the
    gateway keeps the answer as ``gw.shadow_settings`` and hands it back to
    nothing but the shadow layer.

    Returns:
        The checked settings. firstresult.

    Raises:
        gateway.errors.ConfigError: a wrong key or value in the section.
    """


@hookspec(firstresult=True)
def arrowgate_shadowed(pipeline: Pipeline, statement: Statement) -> Result | None:
    """Step 7 of the statement pipeline: run ``statement`` on its engine and on a reference.

    Called for a statement that asks for a reference (``shadow="engine"``), or
    when the configuration has a ``[shadow]`` section, and never for the parts a
    statement runs (a prelude, the reference's own run). The shadow layer
    (:mod:`gateway.shadow.plugin`) answers it; ``pipeline.run_plain`` runs a
    statement through every other step.

    Returns:
        The primary's answer with ``result.shadow`` set, or None: not shadowed
        (the pipeline then runs it plainly). firstresult.
    """


def _hook_names() -> list[str]:
    return [name for name, obj in globals().items()
            if name.startswith("arrowgate_") and callable(obj)]


HOOK_NAMES: list[str] = _hook_names()

__all__: list[Any] = ["HOOK_NAMES", "SHADOW_MISSING", "QueryEvent", "hookspec"]
