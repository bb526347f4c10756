"""The engines the conformance suite runs on, each with its small test configuration.

One suite, every engine (ibis's backend tests): an engine joins by adding an
:class:`EngineUnderTest` to :data:`ENGINES`. What an engine cannot do yet is
a :class:`Gap` with a required reason; the suite turns it into a strict xfail
(a gap that starts passing fails the run, so the list stays true), never a skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from gateway.errors import QueryError, Unsupported


@dataclass(frozen=True)
class Gap:
    """A known difference from the DuckDB reference.

    kind: ``notimpl`` (not built yet), ``notyet`` (waits on an upstream
    change) or ``never`` (by design). ``raises``: the exception expected,
    or None when the answer is wrong rather than an error.
    """

    kind: Literal["notimpl", "notyet", "never"]
    reason: str
    raises: type[BaseException] | tuple[type[BaseException], ...] | None = None

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("a Gap needs a reason")


@dataclass
class EngineUnderTest:
    """One engine configuration the suite runs.

    Attributes:
        name: the test id and the engine's name in the gateway.
        section: the ``[engines.NAME]`` section (``type`` and options).
        gaps: case name -> known gap.
        marks: pytest marks applied to every test of this engine (e.g. a
            marker selecting tests that need PostgreSQL).
    """

    name: str
    section: dict[str, Any]
    gaps: dict[str, Gap] = field(default_factory=dict)
    marks: tuple[Any, ...] = ()

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """The section to configure; override to start what the engine needs first."""
        return self.section

    def engine_sources(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """The ``[sources]`` the engine mounts: the corpus' own, unless it needs them in
        another form."""
        from tests.conformance.corpus import SOURCES

        return SOURCES

    def param(self) -> Any:
        return pytest.param(self, id=self.name, marks=self.marks)


@dataclass
class DuckLakeUnderTest(EngineUnderTest):
    """A ducklake engine on a fresh catalog (``postgres`` or ``sqlite``), the sources copied in."""

    catalog: str = "sqlite"

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        from tests.lakes import conformance_lake

        return conformance_lake(self.name, self.catalog, request)


@dataclass
class DuckDBReleaseUnderTest(EngineUnderTest):
    """A duckdb engine on another release, a worker process or the CLI (installed per run)."""

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        from tests.duckdb_support import release_section

        return release_section(self.section, request)


#: Differences between DuckDB releases and the installed reference (2.x), observed here.
_ROUND_BEFORE_2_0_1 = Gap("never", "DuckDB up to 2.0.0 rounds the double 19.45 to 19.5 "
                          "with round(x, 1); the 2.0.1 reference gives 19.4 (values divergence)")
_BEFORE_2_0_1_GAPS = {"numeric_functions": _ROUND_BEFORE_2_0_1}
_DUCKDB_1_4_GAPS = {
    "numeric_functions": _ROUND_BEFORE_2_0_1,
    "date_trunc_strftime": Gap("never", "DuckDB 1.4 returns DATE from date_trunc('month', "
                               "timestamp); 1.5 and later return TIMESTAMP (schema divergence)"),
}


#: DuckLake runs on DuckDB 1.5.5 (the newest release whose extensions exist offline); these
#: are differences between 1.5.5 and the installed reference DuckDB, not DuckLake's.
_DUCKLAKE_GAPS = {
    "numeric_functions": Gap("never", "DuckDB 1.5.5 rounds the double 19.45 to 19.5 with "
                             "round(x, 1); the 2.x reference gives 19.4"),
}

#: error kinds (tests/conformance/test_conformance.py ERROR_KINDS) an engine does not classify
_ERROR_KIND_CASES = ("error_kind_syntax", "error_kind_unknown_column", "error_kind_unknown_table",
                     "error_kind_conversion", "error_kind_out_of_range", "error_kind_comparison",
                     "error_kind_grouping")
_CSV_ERROR_KINDS = {case: Gap("never", "a cast pyarrow cannot do is Unsupported on the csv "
                              "engine, so that its fallback (DuckDB) answers or fails with "
                              "its own kind")
                    for case in ("error_kind_conversion", "error_kind_out_of_range")}
#: what SQLite accepts where DuckDB refuses
_SQLITE_ACCEPTS = {
    "error_kind_conversion": Gap("never", "SQLite casts without failing ('green' becomes 0)"),
    "error_kind_out_of_range": Gap("never", "SQLite casts without failing (1400 stays 1400)"),
    "error_kind_comparison": Gap("never", "SQLite compares values of any two types "
                                 "(a number sorts before text)"),
    "error_kind_grouping": Gap("never", "SQLite takes a bare column beside an aggregate "
                               "(its value from some row)"),
}
_SQLITE_ERROR_KINDS = {
    **{case: Gap("never", "the example plugin does not classify its errors (kind stays query)")
       for case in _ERROR_KIND_CASES[:3]},
    **_SQLITE_ACCEPTS,
}


@dataclass
class SqlDatabaseUnderTest(EngineUnderTest):
    """An adbc or odbc engine on a fresh PostgreSQL database or SQLite file holding the sources.

    The queries are DuckDB's dialect, transpiled by the engine (``transpile_from``).
    """

    database: Literal["postgres", "sqlite"] = "sqlite"

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        from tests import sql_databases as db
        from tests.conformance.corpus import SOURCES

        options = {"transpile_from": "duckdb", **self.section}
        if self.database == "postgres":
            postgres = request.getfixturevalue("postgres")
            name = db.new_pg_database(postgres)
            db.load_sources(db.adbc_pg(postgres, name), SOURCES)
            make = db.adbc_pg if self.section["type"] == "adbc" else db.odbc_pg
            return make(postgres, name, **options)
        path = request.getfixturevalue("tmp_path_factory").mktemp(self.name) / "corpus.sqlite"
        db.load_sources(db.adbc_sqlite(path), SOURCES)
        make_file = db.adbc_sqlite if self.section["type"] == "adbc" else db.odbc_sqlite
        return make_file(path, **options)


@dataclass
class FlightSqlUnderTest(EngineUnderTest):
    """The adbc engine with the Flight SQL driver, in front of ``arrowgate serve`` (a DuckDB
    engine mounting the sources): a gateway in front of a gateway."""

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        from tests import sql_databases as db

        return db.adbc_flight(request.getfixturevalue("served_sources").location,
                              **self.section)


@dataclass
class SparkUnderTest(EngineUnderTest):
    """The spark engine on the suite's local Spark Connect server (tests/spark.py), the
    corpus transpiled from DuckDB's dialect; its sources are the corpus' files written as
    Parquet by the reference DuckDB, so that both engines read the same types (Spark's
    CSV inference types them otherwise)."""

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return {**self.section, "remote": request.getfixturevalue("spark").remote}

    def engine_sources(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        from tests.conformance.corpus import SOURCES

        folder = request.getfixturevalue("tmp_path_factory").mktemp("spark-sources")
        reference = request.getfixturevalue("reference")
        for name in SOURCES:
            reference.execute(f"COPY (SELECT * FROM {name}) TO '{folder / name}.parquet' "
                              "(FORMAT parquet)").to_arrow()
        return {name: {"path": str(folder / f"{name}.parquet")} for name in SOURCES}


_SQLITE_NO_DATE_FUNCS = Gap("never", "SQLite has no year()/month()/date_trunc()",
                            raises=QueryError)

#: The corpus is DuckDB's dialect, transpiled by sqlglot for PostgreSQL and SQLite.
_PG_ROUNDS_HALF_EVEN = Gap("never", "PostgreSQL's round() of a double rounds half to even "
                           "(2.5 -> 2); DuckDB rounds half away from zero (values divergence)")
_PG_GAPS = {
    "error_kind_out_of_range": Gap("never", "PostgreSQL has no 1-byte integer: sqlglot writes "
                                   "TINYINT as SMALLINT, where 1400 fits, so nothing fails"),
    "q04_count_by_passengers_year_distance": _PG_ROUNDS_HALF_EVEN,
    "group_by_expression": _PG_ROUNDS_HALF_EVEN,
    "numeric_functions": Gap("notyet", "sqlglot writes round(double, 1) unchanged; PostgreSQL "
                             "has round(numeric, int) only", raises=QueryError),
    "timestamp_parts": Gap("notyet", "sqlglot writes DuckDB's hour(ts) unchanged for "
                           "PostgreSQL, which has no hour()", raises=QueryError),
}
_SQLITE_NO_YEAR = Gap("notyet", "sqlglot writes DuckDB's year()/month() unchanged for SQLite, "
                      "which has no such functions", raises=QueryError)
_SQL_SQLITE_GAPS = {
    **_SQLITE_ACCEPTS,
    "q03_count_by_passengers_year": _SQLITE_NO_YEAR,
    "q04_count_by_passengers_year_distance": _SQLITE_NO_YEAR,
    "timestamp_parts": _SQLITE_NO_YEAR,
    "date_trunc_strftime": Gap("notyet", "sqlglot writes date_trunc as TIMESTAMP_TRUNC for "
                               "SQLite, which has no such function", raises=QueryError),
    "all_aggregates": Gap("never", "SQLite keeps timestamps as text, so max() of one is a "
                          "string (schema divergence)"),
    "empty_result_aggregate": Gap("never", "SQLite types values, not columns: an empty "
                                  "answer's columns have no type to report (schema divergence)"),
    "select_literal": Gap("never", "NOTHING is a keyword in SQLite (ON CONFLICT DO NOTHING), "
                          "so it cannot be a bare alias", raises=QueryError),
    "case_coalesce_cast": Gap("never", "SQLite's CAST(x AS INTEGER) truncates 4.9 to 4; "
                              "DuckDB rounds to 5 (values divergence)"),
}
_ODBC_SQLITE_GAPS = {
    **_SQL_SQLITE_GAPS,
    "global_aggregate_on_empty": Gap("never", "SQLite's ODBC driver reports an expression "
                                     "column of no rows as text (schema divergence)"),
    "numeric_functions": Gap("never", "SQLite's ODBC driver hands round(19.45, 1) over as "
                             "19.5; DuckDB rounds the double 19.4499... to 19.4"),
}

#: Where Spark SQL (4.x, ANSI mode) answers the DuckDB-dialect corpus otherwise.
_SPARK_GAPS: dict[str, Gap] = {
    "case_coalesce_cast": Gap("never", "Spark's CAST(4.9 AS INT) truncates to 4; DuckDB rounds "
                              "to 5 (values divergence)"),
    "numeric_functions": Gap("never", "Spark's round(double, 1) rounds the double's shortest "
                             "decimal text half up (19.45 -> 19.5); DuckDB rounds the double "
                             "19.4499... to 19.4 (values divergence)"),
}

ENGINES: list[EngineUnderTest] = [
    EngineUnderTest("duckdb", {"type": "duckdb", "settings": {"threads": 2}}),
    # The native CSV scanner (plugins/gateway_csv); one table per query by design.
    EngineUnderTest(
        "csv",
        {"type": "csv", "threads": 2},
        gaps={
            "join_inner": Gap("never", "one table per query; fallback = \"duckdb\" routes "
                              "joins", raises=Unsupported),
            "join_left_unmatched": Gap("never", "one table per query; fallback = \"duckdb\" "
                                       "routes joins", raises=Unsupported),
            "subquery_in": Gap("never", "no subqueries; fallback = \"duckdb\" routes them",
                               raises=Unsupported),
            "select_literal": Gap("never", "1.5 is a DECIMAL in DuckDB, which the csv engine "
                                  "holds as a double: answering it is left to the fallback "
                                  "(docs/csv.md, native operations)", raises=Unsupported),
            "case_coalesce_cast": Gap("never", "DuckDB's read_csv parses a DOUBLE column cast "
                                      "to INTEGER from its text (2.5 is 3, or 2 when the "
                                      "column is also selected): left to the fallback",
                                      raises=Unsupported),
            **_CSV_ERROR_KINDS,
        },
    ),
    # The outside example plugin (examples/plugin_minimal), installed by dev.py.
    EngineUnderTest(
        "sqlite",
        {"type": "sqlite"},
        gaps={
            "select_literal": Gap("never", "NOTHING is a keyword in SQLite (ON CONFLICT DO "
                                  "NOTHING), so it cannot be a bare alias", raises=QueryError),
            "timestamp_parts": _SQLITE_NO_DATE_FUNCS,
            "date_trunc_strftime": _SQLITE_NO_DATE_FUNCS,
            "q03_count_by_passengers_year": _SQLITE_NO_DATE_FUNCS,
            "q04_count_by_passengers_year_distance": _SQLITE_NO_DATE_FUNCS,
            "all_aggregates": Gap("never", "SQLite keeps timestamps as text, so max() of "
                                  "one is a string (schema divergence)"),
            "integer_division": Gap("never", "SQLite's / on integers truncates; DuckDB's / "
                                    "returns a double (values divergence)"),
            "case_coalesce_cast": Gap("never", "SQLite's CAST(x AS INTEGER) truncates 4.9 to "
                                      "4; DuckDB rounds to 5 (values divergence)"),
            "numeric_functions": Gap("never", "SQLite's round(19.45, 1) rounds the decimal "
                                     "text to 19.5; DuckDB rounds the double 19.4499... to 19.4"),
            **_SQLITE_ERROR_KINDS,
        },
    ),
    # DuckDB releases side by side (ADBC in process), a worker process and the CLI.
    DuckDBReleaseUnderTest("duckdb_1_4_4", {"type": "duckdb", "version": "1.4.4",
                                            "settings": {"threads": 2}}, gaps=_DUCKDB_1_4_GAPS),
    DuckDBReleaseUnderTest("duckdb_1_5_5", {"type": "duckdb", "version": "1.5.5",
                                            "settings": {"threads": 2}}, gaps=_BEFORE_2_0_1_GAPS),
    # 2.0.0: the installed module is 2.0.1, which a version = "2.0.1" engine would run instead
    DuckDBReleaseUnderTest("duckdb_2_0", {"type": "duckdb", "version": "2.0.0",
                                          "settings": {"threads": 2}}, gaps=_BEFORE_2_0_1_GAPS),
    DuckDBReleaseUnderTest("duckdb_worker", {"type": "duckdb", "version": "1.5.5",
                                             "isolation": "process", "settings": {"threads": 2}},
                           gaps=_BEFORE_2_0_1_GAPS),
    # duckdb-cli ships a 1.5 binary
    DuckDBReleaseUnderTest("duckdb_cli", {"type": "duckdb", "cli": "duckdb-cli",
                                          "settings": {"threads": 2}}, gaps=_BEFORE_2_0_1_GAPS),
    DuckLakeUnderTest("ducklake_pg", {"type": "ducklake"}, catalog="postgres",
                      gaps=_DUCKLAKE_GAPS, marks=(pytest.mark.postgres,)),
    DuckLakeUnderTest("ducklake_sqlite", {"type": "ducklake"}, catalog="sqlite",
                      gaps=_DUCKLAKE_GAPS),
    SqlDatabaseUnderTest("adbc_pg", {"type": "adbc"}, database="postgres", gaps=_PG_GAPS,
                         marks=(pytest.mark.postgres, pytest.mark.adbc)),
    SqlDatabaseUnderTest("adbc_sqlite", {"type": "adbc"}, database="sqlite",
                         gaps=_SQL_SQLITE_GAPS, marks=(pytest.mark.adbc,)),
    FlightSqlUnderTest("adbc_flightsql", {"type": "adbc"}, marks=(pytest.mark.adbc,)),
    SqlDatabaseUnderTest("odbc_pg", {"type": "odbc"}, database="postgres", gaps=_PG_GAPS,
                         marks=(pytest.mark.postgres, pytest.mark.odbc)),
    SqlDatabaseUnderTest("odbc_sqlite", {"type": "odbc"}, database="sqlite",
                         gaps=_ODBC_SQLITE_GAPS, marks=(pytest.mark.odbc,)),
    SparkUnderTest("spark", {"type": "spark", "transpile_from": "duckdb"},
                   gaps=_SPARK_GAPS, marks=(pytest.mark.spark,)),
]
