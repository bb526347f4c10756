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
from collections.abc import Iterable
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
    the per-statement memory cap); nor may they set those of
    :data:`SERVER_OUTPUT_SETTINGS` and :data:`SERVER_OWNED_SETTINGS`. Only
    DuckDB's dialect is read: other engines keep settings per connection.
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


#: settings a shared user may not change even in their own session: with them the server
#: prints or writes what a statement did. DuckDB's profiler prints each statement's text and
#: plan, its literals included, on the server's standard output (``SET enable_profiling =
#: 'json'``), where the service's log promises no statement text, or writes them to a file
#: (``profiling_output``); the progress bar prints there too.
SERVER_OUTPUT_SETTINGS = frozenset({
    "enable_profiling", "enable_profile", "profiling_output", "profile_output",
    "profiling_mode", "profiling_coverage", "profiling_renderer_settings",
    "custom_profiling_settings", "tracked_metrics", "enable_progress_bar",
    "enable_progress_bar_print", "enable_print_progress_bar", "progress_bar_time",
    "log_query_path",
})
#: ...nor these, which the server's memory or its reading of SQL hang on: how much of an
#: answer the server buffers for a client that reads slowly (``SET max_streaming_buffer_size
#: = '100GB'`` and a stalled client would hold the server's memory from everyone), and
#: DuckDB's parser, which the gateway's checks read as DuckDB's own SQL
SERVER_OWNED_SETTINGS = frozenset({
    "max_streaming_buffer_size", "streaming_buffer_size", "current_dialect",
    "active_grammar_extensions",
})


def _setting_names(stmt: Any, exp: Any) -> list[str]:
    """The settings a SET or RESET names (a ``SET VARIABLE`` names none)."""
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
    return names


#: the on/off switches among :data:`SERVER_OUTPUT_SETTINGS`, which may be switched off
_OUTPUT_SWITCHES = frozenset({"enable_progress_bar", "enable_progress_bar_print",
                              "enable_print_progress_bar"})


def _switches_off(stmt: Any, exp: Any) -> bool:
    """A SET of false to switches only (``SET enable_progress_bar = false``, which clients
    send); ``SET profiling_output = 0`` names a file, and ``progress_bar_time = 0`` prints
    at once."""
    if any(name.lower() not in _OUTPUT_SWITCHES for name in _setting_names(stmt, exp)):
        return False
    values = [item.this.expression for item in stmt.expressions if isinstance(item.this, exp.EQ)]
    return len(values) == len(stmt.expressions) and all(
        (isinstance(v, exp.Boolean) and not v.this)
        or (isinstance(v, exp.Literal) and str(v.this).strip().lower() in ("false", "0", "off"))
        for v in values)


def _fixed(stmt: Any, exp: Any, fixed: frozenset[str]) -> str | None:
    """Why ``stmt`` may not run: it changes a setting the configuration fixes, or one that
    makes the server print or write what statements do."""
    for name in _setting_names(stmt, exp):
        if name.lower() in fixed:
            return (f"{name} is fixed by the server's configuration; it cannot be changed "
                    "in a session")
        if isinstance(stmt, exp.Set) and name.lower() in SERVER_OUTPUT_SETTINGS \
                and not _switches_off(stmt, exp):
            return (f"{name} makes the server print or write what your statements do (their "
                    "text, plans and values), where other people read it; it cannot be set "
                    "on a shared server. EXPLAIN ANALYZE returns a statement's profile to you")
        if isinstance(stmt, exp.Set) and name.lower() in SERVER_OWNED_SETTINGS:
            return (f"{name} is the shared server's own (the memory it holds for answers, or "
                    "how it reads SQL); it cannot be changed in a session")
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


# -- the shared catalog ------------------------------------------------------------------
#: DuckDB's table functions that change, or show, what every connection to the database
#: shares: the log (``enable_logging()`` logs every user's statements, which
#: ``duckdb_logs`` then shows to anyone), grammar extensions, encryption keys, external
#: resources, what a checkpoint or the object cache does, and copying databases (into the
#: sources catalog too). Refused wherever the name stands, string literals included.
DATABASE_WIDE_FUNCTIONS = frozenset({
    "enable_logging", "disable_logging", "truncate_duckdb_logs", "duckdb_logs",
    "duckdb_log_contexts", "add_grammar_extension", "remove_grammar_extension",
    "duckdb_grammar_extensions", "add_parquet_key", "create_external_resource",
    "register_external_resource", "deregister_external_resource",
    "destroy_external_resource", "register_external_resource_type",
    "enable_checkpoint_on_shutdown", "disable_checkpoint_on_shutdown",
    "enable_object_cache", "disable_object_cache", "copy_database", "import_database",
    "json_execute_serialized_sql",  # runs a statement hidden from these checks
    "force_checkpoint",  # aborts every other connection's transaction
    "duckdb_logs_parsed",  # (DuckDB 1.5) the log again
    "ducklake_set_option",  # the lake's options are its configuration's
})
#: DuckDB's pragmas that change a setting, called as functions (``SELECT * FROM
#: enable_profiling()``): refused as their ``PRAGMA`` form is (:func:`session_scoped`)
SETTING_PRAGMAS = frozenset({
    "enable_profiling", "disable_profiling", "enable_profile", "disable_profile",
    "enable_optimizer", "disable_optimizer", "enable_progress_bar", "disable_progress_bar",
    "enable_print_progress_bar", "disable_print_progress_bar", "enable_verification",
    "disable_verification", "verify_parallelism", "disable_verify_parallelism",
    "verify_external", "disable_verify_external", "verify_fetch_row",
    "disable_verify_fetch_row", "verify_serializer", "disable_verify_serializer",  # 1.5
})
#: The rest of DuckDB 2.0.1's table and pragma functions: they read, or act on the
#: connection's own state. tests/test_shared_catalog.py fails on a function of the
#: installed DuckDB in none of the three sets, so a new one is judged before it is allowed.
SHARED_FUNCTIONS = READ_PRAGMAS | frozenset({
    "arrow_scan", "arrow_scan_dumb", "checkpoint", "collations", "duckdb_approx_database_count",
    "duckdb_available_metrics", "duckdb_columns", "duckdb_connection_count",
    "duckdb_constraints", "duckdb_coordinate_systems", "duckdb_databases",
    "duckdb_dependencies", "duckdb_dialects", "duckdb_eviction_queues",
    "duckdb_extension_repositories", "duckdb_extensions", "duckdb_external_file_cache",
    "duckdb_external_resource_types", "duckdb_external_resources", "duckdb_functions",
    "duckdb_indexes", "duckdb_keywords", "duckdb_live_query_metrics", "duckdb_memory",
    "duckdb_optimizers", "duckdb_prepared_statements", "duckdb_schemas",
    "duckdb_secret_type_parameters", "duckdb_secret_types", "duckdb_secrets",
    "duckdb_sequences", "duckdb_settings", "duckdb_table_sample", "duckdb_tables",
    "duckdb_temporary_files", "duckdb_triggers", "duckdb_types", "duckdb_variables",
    "duckdb_views", "extension_versions", "generate_series", "glob", "icu_calendar_names",
    "json_each", "json_tree", "pandas_scan", "parquet_bloom_probe", "parquet_file_metadata",
    "parquet_full_metadata", "parquet_kv_metadata", "parquet_metadata", "parquet_page_index",
    "parquet_scan", "parquet_schema", "pg_timezone_names", "pragma_collations",
    "pragma_database_size", "pragma_metadata_info", "pragma_platform", "pragma_show",
    "pragma_storage_info", "pragma_table_info", "pragma_user_agent", "pragma_version",
    "python_arrow_scan", "python_map_function", "query", "query_table", "range",
    "read_blob", "read_csv", "read_csv_auto", "read_duckdb", "read_json", "read_json_auto",
    "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_parquet", "read_single_csv_file", "read_single_json_file",
    "read_single_parquet_file", "read_text", "repeat", "repeat_row", "seq_scan", "sniff_csv",
    "summary", "test_all_types", "test_vector_types", "unnest", "which_secret",
    # DuckDB 1.5.5, which the ducklake engine runs, and its ducklake extension: the
    # writers among them are no reads (gateway.sql.nondeterminism.SIDE_EFFECT_NAMES)
    "all_profiling_output", "duckdb_profiling_settings", "histogram", "histogram_values",
    "ducklake_add_data_files", "ducklake_cleanup_old_files", "ducklake_commit",
    "ducklake_current_snapshot", "ducklake_delete_orphaned_files",
    "ducklake_expire_snapshots", "ducklake_flush_inlined_data",
    "ducklake_last_committed_snapshot", "ducklake_list_files",
    "ducklake_merge_adjacent_files", "ducklake_options", "ducklake_rewrite_data_files",
    "ducklake_scan", "ducklake_set_commit_message", "ducklake_settings", "ducklake_snapshots",
    "ducklake_table_changes", "ducklake_table_deletions", "ducklake_table_info",
    "ducklake_table_insertions",
})
#: DuckDB 2.0.1's system views read without a schema (its ``main`` and ``pg_catalog``):
#: a table or view of the same name in ``main`` stands for one in everyone's statements
#: (``FROM duckdb_tables`` read a user's table); tests/test_shared_catalog.py checks
#: the installed DuckDB has no other
SYSTEM_VIEWS = frozenset({
    "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_indexes",
    "duckdb_logs", "duckdb_schemas", "duckdb_tables", "duckdb_types", "duckdb_views",
    "pragma_database_list", "sqlite_master", "sqlite_schema", "sqlite_temp_master",
    "sqlite_temp_schema", "pg_am", "pg_attrdef", "pg_attribute", "pg_class",
    "pg_collation", "pg_constraint", "pg_database", "pg_depend", "pg_description",
    "pg_enum", "pg_index", "pg_indexes", "pg_namespace", "pg_prepared_statements",
    "pg_proc", "pg_sequence", "pg_sequences", "pg_settings", "pg_tables", "pg_tablespace",
    "pg_type", "pg_views",
})
#: names no shared user's table or view may take
_SYSTEM_NAMES = SYSTEM_VIEWS | DATABASE_WIDE_FUNCTIONS | SETTING_PRAGMAS | SHARED_FUNCTIONS
_REFUSED_NAMES = "|".join(sorted(DATABASE_WIDE_FUNCTIONS | SETTING_PRAGMAS))
#: a call (``name(``, ``CALL name``); several are also settings' names, which
#: ``current_setting('enable_logging')`` and ``SET SESSION enable_progress_bar`` may read
_REFUSED_FUNCTION = re.compile(rf"(?i)(?<![\w$])({_REFUSED_NAMES})\s*\(|\bCALL\s+({_REFUSED_NAMES})\b")
#: the log's views, read without parentheses
_LOG_VIEWS = re.compile(r"(?i)(?<![\w$])(duckdb_logs|duckdb_log_contexts)(?![\w$])")
_CHANGE_HEAD = re.compile(r"(?is)\A\s*(?:CREATE|ALTER|DROP|COMMENT)\b")
_CHANGE_WORD = re.compile(r"(?i)\b(?:CREATE|ALTER|DROP|COMMENT|RENAME)\b")
_TEMPORARY = re.compile(r"(?i)\b(?:TEMP|TEMPORARY)\b")
_MACRO = re.compile(r"(?i)\b(?:MACRO|FUNCTION)\b")


#: the catalog DuckLake attaches for a lake's metadata (``__ducklake_metadata_<lake>``)
_LAKE_METADATA = re.compile(r"(?i)(?<![\w$])__ducklake_metadata_[\w$]*")


def shared_catalog(sql: str, dialect: str, sources: Iterable[str],
                   catalog: str = "_arrowgate") -> str | None:
    """What in ``sql`` would change, for the other users of a shared DuckDB database,
    what their SQL means or reads, or None.

    - a function of :data:`DATABASE_WIDE_FUNCTIONS` or :data:`SETTING_PRAGMAS`;
    - a change naming ``catalog``, where the configured sources are mounted as views
      (``CREATE OR REPLACE VIEW _arrowgate.main.trips``, ``USE _arrowgate``) (a lake's
      metadata catalog is refused to them whole, :func:`hidden_reach`);
    - a table or view (not TEMP) named as a source or as one of DuckDB's system views
      and table functions, in any schema, made or renamed to: ``main`` comes first on
      the search path, so it would stand for the source or the view;
    - a macro or function that is not TEMP: DuckDB lets one named ``lower`` replace the
      built-in for every connection.

    A TEMP object is the creating connection's own. A change sqlglot cannot read is
    refused when it names a source or a macro and is not TEMP.
    """
    if dialect != "duckdb":
        return None
    found = _REFUSED_FUNCTION.search(sql) or _LOG_VIEWS.search(sql)
    if found is not None:
        word = (found.group(1) or found.group(2)).lower()
        if word in SETTING_PRAGMAS:
            return (f"{word}() changes a setting, as PRAGMA {word} does; use SET SESSION "
                    "where the setting allows it")
        return f"{word} changes or shows what every user of this server shares"
    names_catalog = re.search(rf"(?i)(?<![\w$]){re.escape(catalog)}(?![\w$])", sql)
    if not (names_catalog or _CHANGE_WORD.search(sql)):
        return None  # nothing below can refuse it: a query is not parsed again here
    from gateway.sql.kinds import is_read

    if is_read(sql, dialect):
        return None
    if names_catalog:
        return (f"{catalog} is where the configuration mounts the sources; a statement "
                "may only read it")
    names = {name.lower() for name in sources}
    try:
        statements = parse(sql, dialect)
    except Unparsed:
        statements = []
    from sqlglot import exp

    for stmt in statements or [None]:
        if stmt is None or isinstance(stmt, exp.Command):
            text = sql if stmt is None else f"{stmt.name} {stmt.expression}"
            # unread, the text may hold several statements: a change anywhere in it counts
            # ("CREATE TABLE x (...) <syntax sqlglot lacks>; CREATE MACRO lower ...")
            changes = _CHANGE_HEAD.match(text) if stmt is not None else _CHANGE_WORD.search(text)
            several = stmt is None and ";" in text.strip().rstrip(";")
            if not changes or (_TEMPORARY.search(text) and not several):
                continue
            if _MACRO.search(text):
                return _macro_refusal()
            for name in names:
                if re.search(rf"(?i)(?<![\w$]){re.escape(name)}(?![\w$])", text):
                    return _shadow_refusal(name)
            continue
        refusal = _created(stmt, exp, names)
        if refusal is not None:
            return refusal
    return None


def _created(stmt: Any, exp: Any, sources: set[str]) -> str | None:
    """Why ``stmt``, read by sqlglot, may not run on a shared database, or None."""
    targets: list[Any] = []
    if isinstance(stmt, exp.Create):
        props = stmt.args.get("properties")
        if props is not None and any(isinstance(p, exp.TemporaryProperty)
                                     for p in props.expressions):
            return None
        kind = str(stmt.args.get("kind") or "").upper()
        target = stmt.this
        while isinstance(target, (exp.Schema, exp.UserDefinedFunction)):
            target = target.this
        if isinstance(target, exp.Table) and target.catalog.lower() == "temp":
            return None
        if kind in ("MACRO", "FUNCTION"):
            return _macro_refusal()
        if kind in ("TABLE", "VIEW"):
            targets.append(target)
    elif isinstance(stmt, exp.Alter):
        targets += [action.this for action in stmt.args.get("actions") or []
                    if isinstance(action, exp.AlterRename)]
    if isinstance(stmt, (exp.Drop, exp.Alter, exp.Comment)):
        # DROP VIEW trips, unqualified, found the source's view on the search path and
        # dropped it for every user (and ALTER VIEW trips RENAME moved it)
        for target in [stmt.this, *(stmt.args.get("tables") or [])]:  # (DROP's are "tables")
            if isinstance(target, exp.Table) and target.catalog.lower() != "temp" and \
                    target.name.lower() in sources:
                return (f"{target.name} is the configuration's source, which every user of "
                        "this server reads; a statement may only read it")
    for target in targets:
        name = getattr(target, "name", "") or ""
        if name.lower() in sources:
            return _shadow_refusal(name)
        if name.lower() in _SYSTEM_NAMES:
            return (f"a table or view named {name} would stand for DuckDB's own {name} in "
                    "every user's statements; choose another name, or make it TEMP")
    return None


def _macro_refusal() -> str:
    return ("a macro of the shared database would change the SQL of every user of this "
            "server (one named as a built-in, lower say, replaces it); use CREATE TEMP MACRO, which "
            "is your session's own")


def _shadow_refusal(name: str) -> str:
    return (f"a table or view named {name} would stand for the source {name} in every "
            "user's statements; choose another name, or make it TEMP")


# -- other sessions ------------------------------------------------------------------------
#: What shows or acts on the other sessions of the server an engine logs in to. Every user
#: of the gateway reaches a server engine as its one role, and a role sees the statement
#: text of its own other sessions (PostgreSQL's pg_stat_activity) and may cancel or end
#: them: one user read another's statements, and cancelled them.
OTHER_SESSIONS = frozenset({
    # PostgreSQL
    "pg_stat_activity", "pg_stat_get_activity", "pg_stat_get_backend_activity",
    "pg_stat_statements", "pg_stat_statements_info", "pg_cancel_backend",
    "pg_terminate_backend",
    # SQL Server
    "dm_exec_requests", "dm_exec_sessions", "dm_exec_connections", "dm_exec_sql_text",
    "dm_exec_query_stats", "dm_exec_cached_plans", "dm_exec_input_buffer", "sysprocesses",
    # MySQL, MariaDB
    "processlist",
})
_OTHER_SESSIONS = re.compile(
    r"(?i)(?<![\w$])(" + "|".join(sorted(OTHER_SESSIONS)) + r")(?![\w$])|\A\s*(KILL)\b")


def other_sessions(sql: str) -> str | None:
    """What in ``sql`` shows or acts on another session of the engine's server, or None.

    Names are matched in the whole text, string literals included, whatever the dialect
    (a function that runs SQL from a string cannot hide one)."""
    found = _OTHER_SESSIONS.search(head(sql))  # (comments cut: KILL is a statement's start)
    if found is None:
        return None
    return (found.group(1) or found.group(2)).lower()


# -- what only the engine itself may reach ---------------------------------------------------
#: a string literal, or a list of them: what ``query()`` and ``query_table()`` may be given
_LITERAL_ARGUMENT = r"\s*(?:'(?:[^']|'')*'|\[\s*'(?:[^']|'')*'(?:\s*,\s*'(?:[^']|'')*')*\s*\])\s*[,)]"
_DYNAMIC_SQL = re.compile(rf"(?i)(?<![\w$])(query|query_table)\s*\((?!{_LITERAL_ARGUMENT})")


#: what shows the server's folders: the settings holding a path, the temporary files,
#: every setting at once
_SERVER_PATHS = re.compile(
    r"(?i)(?<![\w$])(temp_directory|home_directory|secret_directory|extension_directory|"
    r"extension_repository_directory|log_query_path|profiling_output|duckdb_temporary_files|"
    r"duckdb_settings)(?![\w$])")


def hidden_reach(sql: str) -> str | None:
    """What in ``sql`` reaches past what the configuration exposes, or None.

    - a lake's metadata catalog (``__ducklake_metadata_<lake>``): DuckLake attaches
      the catalog's database through it, so every table the catalog role can read in
      that database answered there (another application's tables, ``pg_shadow``'s
      password hashes), reads included; and a write there (DELETE FROM its
      ducklake_snapshot) destroyed the lake for every user;
    - the server's folders (``duckdb_settings()``, ``current_setting('temp_directory')``,
      ``duckdb_temporary_files()``): DuckDB lets SQL read and write its temporary folder
      whatever its file lockdown says, so its path is kept from users who share it;
    - ``query()`` or ``query_table()`` of anything but string literals: SQL built at
      run time (``'__duck' || 'lake_metadata_lake...'``, ``getvariable('q')``) would
      reach what every check here reads in the statement's text.

    Names are matched in the whole text, string literals included.
    """
    found = _LAKE_METADATA.search(sql)
    if found is not None:
        return (f"{found.group(0)} is the lake's catalog database, which only the lake "
                "reads: query the lake's tables, or ducklake_snapshots() and the other "
                "ducklake_ functions for its history")
    found = _SERVER_PATHS.search(sql)
    if found is not None:
        return (f"{found.group(1).lower()} shows the server's folders (where DuckDB spills "
                "other users' intermediate answers, among them), which users of this "
                "service do not reach")
    found = _DYNAMIC_SQL.search(sql)
    if found is not None:
        return (f"{found.group(1).lower()}() of SQL built at run time is not allowed here: "
                "the service checks what a statement reaches from its text; write the "
                "statement itself, or give it a string literal")
    return None


# -- SQLite's pragmas ----------------------------------------------------------------------
#: SQLite pragmas that take an argument and only read (PRAGMA table_info(t))
_SQLITE_READ_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    "function_list", "module_list", "pragma_list", "collation_list", "database_list",
    "compile_options",
})
_SQLITE_PRAGMA = re.compile(
    r"(?is)(?:\A|;)(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*PRAGMA\s+(?:[\w$]+\s*\.\s*)?([\w$]+)\s*(=|\()?")


def sqlite_pragma(sql: str, dialect: str) -> str | None:
    """A SQLite pragma in ``sql`` that sets something (``PRAGMA writable_schema = 1``,
    which lets ``UPDATE sqlite_master`` leave the file unreadable for every user;
    ``PRAGMA journal_mode = OFF``), or None: one file is every user's database."""
    if dialect != "sqlite":
        return None
    for found in _SQLITE_PRAGMA.finditer(head(sql)):
        name, sets = found.group(1).lower(), found.group(2)
        if sets == "=" or (sets == "(" and name not in _SQLITE_READ_PRAGMAS):
            return f"PRAGMA {name}"
    return None
