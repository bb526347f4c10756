"""DuckDB SQL for mounting the config's sources as views, shared by every DuckDB-based engine."""

from __future__ import annotations

from typing import Any

from gateway.config import Source

#: The in-memory catalog that holds the source views, so they never land in a
#: user's database file and work on read-only databases.
SOURCES_CATALOG = "_arrowgate"

_CSV_OPTION_NAMES = {
    "delimiter": "delim",
    "quote": "quote",
    "escape": "escape",
    "header": "header",
    "null": "nullstr",
    "timestamp_format": "timestampformat",
    "columns": "columns",
    "encoding": "encoding",
    "compression": "compression",
}


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """A DuckDB SQL literal for a config value (string, number, boolean, list, table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as a DuckDB literal")


def scan_expression(source: Source) -> str:
    """``read_csv(...)`` or ``read_parquet(...)`` over a source, with its options."""
    pattern = literal(source.scan_pattern())
    if source.format == "parquet":
        return f"read_parquet({pattern})"
    args = [pattern]
    for key, duck_key in _CSV_OPTION_NAMES.items():
        if key in source.options:
            args.append(f"{duck_key} = {literal(source.options[key])}")
    if source.options.get("on_error") == "skip":
        args.append("ignore_errors = true")
    return f"read_csv({', '.join(args)})"


def mount_statements(sources: dict[str, Source],
                     unreadable: dict[str, str] | None = None) -> list[str]:
    """The statements that attach the sources catalog and create one view per source.

    A source in ``unreadable`` (name -> why DuckDB could not mount it) becomes a
    view whose every use fails with that reason and the source's name, so only
    the statements that read it fail, never the engine.
    """
    stmts = [f"ATTACH IF NOT EXISTS ':memory:' AS {SOURCES_CATALOG} (READ_WRITE)"]
    for name, source in sources.items():
        stmts.append(view_statement(source, (unreadable or {}).get(name)))
    return stmts


def view_statement(source: Source, unreadable: str | None = None) -> str:
    """The ``CREATE OR REPLACE VIEW`` mounting ``source`` in the sources catalog; with
    ``unreadable`` (why DuckDB cannot read it), a view every use of which fails with that."""
    name = source.name
    if unreadable is not None:
        # a filter, not a column: no projection (count(*)) prunes the error away
        body = (f"SELECT NULL AS {quote_ident(name)} FROM range(1) "
                f"WHERE error({literal(unmountable(source, unreadable))}) IS NULL")
    else:
        body = f"SELECT * FROM {scan_expression(source)}"
    return f"CREATE OR REPLACE VIEW {SOURCES_CATALOG}.main.{quote_ident(name)} AS " + body


def unmountable(source: Source, why: str) -> str:
    """The error of a statement reading a source DuckDB cannot mount."""
    return (f"cannot mount the source {source.name} ({source.path}): {why} "
            f"(check [sources.{source.name}]; arrowgate sources --check)")
