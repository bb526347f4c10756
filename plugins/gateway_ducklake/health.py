"""Catalog health: what ``arrowgate lake check`` reads from a lake's catalog database.

The check talks to the catalog database itself, not through DuckDB: the
ADBC PostgreSQL driver for PostgreSQL, pyodbc for SQL Server, the standard
library for SQLite. It needs no DuckDB install and never writes.

What it reports is the same for every kind of catalog (format version, live
schemas and tables, snapshots, data and delete files, files waiting for
cleanup, inlined-data tables and the rows they still hold), plus the server
settings that matter for that database: for SQL Server forced
parameterization, the catalog's string collation and the statistics options.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gateway.drivers.odbc import mssql_odbc_string
from gateway.errors import (
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    install_extra,
)
from gateway.masking import mask_text
from gateway_ducklake.catalog import CatalogSpec

#: The catalog format each DuckDB release line writes (and the newest it reads).
CATALOG_FORMATS = {"1.4": "0.3", "1.5": "1.0"}
#: Inlined-data tables whose rows are counted one query each; beyond this the count is skipped.
MAX_INLINED_COUNTED = 2000
#: The collation DuckLake's SQL Server catalog needs on its string columns (DuckDB's byte order).
MSSQL_CATALOG_COLLATION = "Latin1_General_100_BIN2_UTF8"
DEFAULT_SCHEMA = {"postgres": "public", "mssql": "dbo", "sqlite": "main"}

OK, WARN, INFO = "ok", "warn", "info"


@dataclass(frozen=True)
class Finding:
    """One line of a health report.

    Attributes:
        name: what was checked (``catalog_version``, ``forced_parameterization``).
        value: what was found, as text.
        status: ``ok``, ``warn`` (worth acting on) or ``info``.
        advice: what to do, for a ``warn``.
    """

    name: str
    value: str
    status: str = INFO
    advice: str = ""


@dataclass
class HealthReport:
    engine: str
    catalog: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == WARN]

    def value(self, name: str) -> str | None:
        return next((f.value for f in self.findings if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "catalog": self.catalog,
                "findings": [asdict(f) for f in self.findings]}


# -- dialects ----------------------------------------------------------------
@dataclass(frozen=True)
class Dialect:
    """How to name a catalog table in one database's SQL."""

    kind: str
    quote: Callable[[str], str]

    def table(self, schema: str | None, name: str) -> str:
        return f"{self.quote(schema)}.{self.quote(name)}" if schema else self.quote(name)


def _dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _bracket(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


DIALECTS = {"postgres": Dialect("postgres", _dq), "sqlite": Dialect("sqlite", _dq),
            "mssql": Dialect("mssql", _bracket)}


def catalog_queries(dialect: Dialect, schema: str | None) -> dict[str, str]:
    """The portable queries over DuckLake's own tables, named by what they count."""
    def t(name: str) -> str:
        return dialect.table(schema, name)

    return {
        "metadata": f"SELECT {dialect.quote('key')}, {dialect.quote('value')} "
                    f"FROM {t('ducklake_metadata')} WHERE scope IS NULL",
        "schemas": f"SELECT count(*) FROM {t('ducklake_schema')} WHERE end_snapshot IS NULL",
        "tables": f"SELECT count(*) FROM {t('ducklake_table')} WHERE end_snapshot IS NULL",
        "snapshots": f"SELECT count(*), max(snapshot_id) FROM {t('ducklake_snapshot')}",
        "data_files": f"SELECT count(*) FROM {t('ducklake_data_file')} WHERE end_snapshot IS NULL",
        "delete_files": f"SELECT count(*) FROM {t('ducklake_delete_file')} "
                        "WHERE end_snapshot IS NULL",
        "files_scheduled_for_deletion":
            f"SELECT count(*) FROM {t('ducklake_files_scheduled_for_deletion')}",
        "inlined_tables": f"SELECT i.table_name FROM {t('ducklake_inlined_data_tables')} i "
                          f"JOIN {t('ducklake_table')} tb ON tb.table_id = i.table_id "
                          "WHERE tb.end_snapshot IS NULL ORDER BY i.table_name",
    }


#: SQL Server's database options that matter for a DuckLake catalog, in one row.
MSSQL_SETTINGS_QUERY = (
    "SELECT CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)) AS product_version, "
    "d.compatibility_level, d.collation_name, d.is_parameterization_forced, "
    "d.is_auto_create_stats_on, d.is_auto_update_stats_on, d.is_auto_update_stats_async_on, "
    "d.is_read_committed_snapshot_on "
    "FROM sys.databases d WHERE d.name = DB_NAME()"
)


def mssql_collation_query(schema: str) -> str:
    """The collations of the catalog tables' string columns (one row per collation)."""
    literal = "N'" + schema.replace("'", "''") + "'"
    return (
        "SELECT c.collation_name, count(*) FROM sys.columns c "
        "JOIN sys.tables t ON t.object_id = c.object_id "
        "JOIN sys.schemas s ON s.schema_id = t.schema_id "
        f"WHERE s.name = {literal} AND t.name LIKE 'ducklake[_]%' "
        "AND c.collation_name IS NOT NULL GROUP BY c.collation_name"
    )


POSTGRES_SETTINGS_QUERY = (
    "SELECT current_setting('server_version'), pg_database_size(current_database()), "
    "current_setting('autovacuum')"
)


def mssql_findings(row: dict[str, Any], collations: dict[str, int]) -> list[Finding]:
    """Findings from SQL Server's settings row and the catalog columns' collations.

    Args:
        row: the columns of :data:`MSSQL_SETTINGS_QUERY` by name.
        collations: collation name -> number of catalog string columns using it.
    """
    def flag(value: Any) -> bool:
        return bool(int(value)) if value is not None else False

    out = [Finding("server_version", str(row.get("product_version"))),
           Finding("compatibility_level", str(row.get("compatibility_level"))),
           Finding("database_collation", str(row.get("collation_name")))]
    forced = flag(row.get("is_parameterization_forced"))
    out.append(Finding(
        "forced_parameterization", "on" if forced else "off", OK if forced else WARN,
        "" if forced else "every catalog query carries its ids as literals, so without it SQL "
        "Server compiles a plan per table; run ALTER DATABASE CURRENT SET PARAMETERIZATION "
        "FORCED"))
    wrong = {c: n for c, n in collations.items() if c != MSSQL_CATALOG_COLLATION}
    if not collations:
        out.append(Finding("catalog_collation", "no catalog string columns found", WARN,
                           "the login may not see the catalog tables, or the catalog is empty"))
    elif wrong:
        listed = ", ".join(f"{c} ({n} columns)" for c, n in sorted(wrong.items()))
        out.append(Finding("catalog_collation", listed, WARN,
                           f"string min/max statistics must compare in DuckDB's byte order: "
                           f"recreate the catalog with the SQL Server catalog extension, which "
                           f"declares {MSSQL_CATALOG_COLLATION}"))
    else:
        out.append(Finding("catalog_collation", MSSQL_CATALOG_COLLATION, OK))
    for name, column, advice in (
        ("auto_create_statistics", "is_auto_create_stats_on",
         "ALTER DATABASE CURRENT SET AUTO_CREATE_STATISTICS ON"),
        ("auto_update_statistics", "is_auto_update_stats_on",
         "ALTER DATABASE CURRENT SET AUTO_UPDATE_STATISTICS ON"),
        ("auto_update_statistics_async", "is_auto_update_stats_async_on",
         "the first read after many commits waits for statistics to rebuild; "
         "ALTER DATABASE CURRENT SET AUTO_UPDATE_STATISTICS_ASYNC ON"),
    ):
        on = flag(row.get(column))
        out.append(Finding(name, "on" if on else "off", OK if on else WARN, "" if on else advice))
    rcsi = flag(row.get("is_read_committed_snapshot_on"))
    out.append(Finding("read_committed_snapshot", "on" if rcsi else "off"))
    return out


# -- connecting ------------------------------------------------------------------
def connect_catalog(spec: CatalogSpec, engine: str, *, odbc_driver: str | None = None) -> Any:
    """A DB-API connection to the catalog database.

    Raises:
        ConfigError: the catalog kind has no health check, or its driver is not installed.
        EngineConnectionError: the database refused or could not be reached.
    """
    if spec.kind == "postgres":
        try:
            import adbc_driver_postgresql.dbapi as pgdb
        except ImportError:
            raise ConfigError("the ADBC PostgreSQL driver is not installed", engine=engine,
                              hint=install_extra("ducklake")) from None
        try:
            return pgdb.connect(spec.target)
        except Exception as exc:
            raise EngineConnectionError(
                f"cannot connect to the PostgreSQL catalog {spec.printable()}: "
                + mask_text(str(exc).strip()), engine=engine,
                hint=_pg_hint(str(exc))) from None
    if spec.kind == "mssql":
        try:
            import pyodbc
        except ImportError as exc:
            raise ConfigError(f"pyodbc cannot be imported ({exc})", engine=engine,
                              hint=install_extra("ducklake") + ", and apt-get install unixodbc plus "
                                   "Microsoft's ODBC Driver 18 for SQL Server") from None
        odbc = mssql_odbc_string(spec.target, *([odbc_driver] if odbc_driver else []))
        try:
            return pyodbc.connect(odbc, timeout=15, autocommit=True)
        except pyodbc.Error as exc:
            raise EngineConnectionError(
                f"cannot connect to the SQL Server catalog {spec.printable()}: "
                + mask_text(str(exc)), engine=engine,
                hint="check Server=, the login and that the ODBC driver is registered "
                     "(odbcinst -q -d)") from None
    if spec.kind == "sqlite":
        import sqlite3
        from pathlib import Path

        if not Path(spec.target).is_file():
            raise EngineConnectionError(f"the SQLite catalog file {spec.target} does not exist",
                                        engine=engine,
                                        hint="check the path in catalog = \"sqlite:...\"")
        return sqlite3.connect(f"file:{spec.target}?mode=ro", uri=True)
    raise ConfigError(f"lake check does not read {spec.kind} catalogs", engine=engine,
                      hint="it reads PostgreSQL, SQL Server and SQLite catalogs; a DuckDB-file "
                           "catalog can be inspected with ducklake_snapshots() through the engine")


def _pg_hint(message: str) -> str:
    lower = message.lower()
    if "password" in lower:
        return "check the password (in the catalog string, ${VAR} or PGPASSWORD/.pgpass)"
    if "does not exist" in lower:
        return "create the database first (createdb), or fix dbname="
    return "check host=, port= and that the server accepts connections"


# -- the check ---------------------------------------------------------------------
def check_catalog(spec: CatalogSpec, engine: str, *, schema: str | None = None,
                  duckdb_version: str | None = None,
                  odbc_driver: str | None = None) -> HealthReport:
    """Connect to the catalog database and report on it.

    Args:
        spec: the engine's catalog.
        engine: the engine's name, for messages.
        schema: the schema holding the catalog tables (DuckLake's METADATA_SCHEMA);
            the database's default when None.
        duckdb_version: the DuckDB version the engine runs, to compare the
            catalog's format with the one it writes.

    Raises:
        ConfigError, EngineConnectionError: see :func:`connect_catalog`.
        GatewayError: the database holds no DuckLake catalog.
    """
    dialect = DIALECTS.get(spec.kind)
    con = connect_catalog(spec, engine, odbc_driver=odbc_driver)
    report = HealthReport(engine, spec.printable())
    schema = schema or (None if spec.kind == "sqlite" else DEFAULT_SCHEMA[spec.kind])
    assert dialect is not None  # connect_catalog refused the other kinds
    try:
        with _closing_cursor(con) as cur:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()]

            _catalog_findings(report, rows, dialect, schema, duckdb_version)
            if spec.kind == "postgres":
                version, size, autovacuum = rows(POSTGRES_SETTINGS_QUERY)[0]
                report.findings += [
                    Finding("server_version", str(version)),
                    Finding("catalog_database_size", _size(int(size))),
                    Finding("autovacuum", str(autovacuum), OK if autovacuum == "on" else WARN,
                            "" if autovacuum == "on" else
                            "the catalog's tables churn with every commit; turn autovacuum on"),
                ]
            elif spec.kind == "mssql":
                cur.execute(MSSQL_SETTINGS_QUERY)
                names = [d[0] for d in cur.description]
                first = cur.fetchone()
                settings = dict(zip(names, first, strict=True)) if first else {}
                collations = {str(c): int(n) for c, n in rows(mssql_collation_query(
                    schema or "dbo"))}
                report.findings += mssql_findings(settings, collations)
    except GatewayError:
        raise
    except Exception as exc:
        raise _translate(exc, spec, engine) from None
    finally:
        with contextlib.suppress(Exception):
            con.close()
    return report


def _catalog_findings(report: HealthReport, rows: Callable[[str], list[tuple[Any, ...]]],
                      dialect: Dialect, schema: str | None,
                      duckdb_version: str | None) -> None:
    lake = report.engine
    queries = catalog_queries(dialect, schema)
    metadata = {str(k): str(v) for k, v in rows(queries["metadata"])}
    fmt = metadata.get("version", "unknown")
    expected = CATALOG_FORMATS.get(".".join((duckdb_version or "").split(".")[:2]))
    if expected is None:
        report.findings.append(Finding("catalog_version", fmt))
    elif _version_key(fmt) > _version_key(expected):
        report.findings.append(Finding(
            "catalog_version", fmt, WARN,
            f"written by a newer DuckLake than DuckDB {duckdb_version} reads ({expected}); "
            "set duckdb = \"...\" to a newer release"))
    elif _version_key(fmt) < _version_key(expected):
        report.findings.append(Finding(
            "catalog_version", fmt, WARN,
            f"DuckDB {duckdb_version} writes {expected}: the engine attaches it with "
            "AUTOMATIC_MIGRATION only when automatic_migration = true"))
    else:
        report.findings.append(Finding("catalog_version", fmt, OK))
    for key in ("created_by", "data_path", "encrypted"):
        if key in metadata:
            report.findings.append(Finding(key, metadata[key]))
    report.findings.append(Finding("schemas", str(rows(queries["schemas"])[0][0])))
    report.findings.append(Finding("tables", str(rows(queries["tables"])[0][0])))
    count, latest = rows(queries["snapshots"])[0]
    report.findings.append(Finding("snapshots", str(count)))
    report.findings.append(Finding("latest_snapshot", str(latest)))
    report.findings.append(Finding("data_files", str(rows(queries["data_files"])[0][0])))
    report.findings.append(Finding("delete_files", str(rows(queries["delete_files"])[0][0])))
    pending = int(rows(queries["files_scheduled_for_deletion"])[0][0])
    report.findings.append(Finding(
        "files_scheduled_for_deletion", str(pending), WARN if pending else OK,
        f"run CALL ducklake_cleanup_old_files('{lake}') to delete them" if pending else ""))
    inlined = [str(r[0]) for r in rows(queries["inlined_tables"])]
    held = 0
    if len(inlined) <= MAX_INLINED_COUNTED:
        for name in inlined:
            held += int(rows(f"SELECT count(*) FROM {dialect.table(schema, name)} "
                             "WHERE end_snapshot IS NULL")[0][0])
        report.findings.append(Finding(
            "inlined_data_tables", f"{len(inlined)} holding {held} live rows",
            WARN if held else OK,
            f"run CALL ducklake_flush_inlined_data('{lake}') to write them to Parquet"
            if held else ""))
    else:
        report.findings.append(Finding("inlined_data_tables", f"{len(inlined)} (rows not counted)"))


def _version_key(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return (0,)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@contextlib.contextmanager
def _closing_cursor(con: Any) -> Iterator[Any]:
    cur = con.cursor()
    try:
        yield cur
    finally:
        with contextlib.suppress(Exception):
            cur.close()


def _translate(exc: Exception, spec: CatalogSpec, engine: str) -> GatewayError:
    message = mask_text(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
    lower = message.lower()
    if "ducklake_" in lower and ("does not exist" in lower or "no such table" in lower
                                 or "invalid object name" in lower):
        return QueryError(f"{spec.printable()} holds no DuckLake catalog ({message})",
                            engine=engine,
                            hint="query the lake once through the engine to create it, or "
                                 "set metadata_schema if the catalog lives in another schema")
    return QueryError(f"reading the catalog failed: {message}", engine=engine)
