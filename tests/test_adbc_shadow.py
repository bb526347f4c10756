"""Shadow the adbc engine against DuckDB over the conformance corpus.

On PostgreSQL the corpus (DuckDB's dialect) is transpiled by the engine. In
front of ``arrowgate serve`` (a gateway in front of a gateway, its DuckDB
engine mounting the sources) it runs as written. Every divergence the shadow
comparator reports must be a documented semantic difference: a conformance
Gap of the engine, with its reason. And every such Gap must still show up
here, so the list stays true.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import gateway
from tests import sql_databases as db
from tests.conformance.corpus import SOURCES, all_cases
from tests.conformance.engines import ENGINES
from tests.flight_support import serving

pytestmark = pytest.mark.adbc


def shadow_divergences(primary: dict[str, Any]) -> dict[str, str]:
    """Every corpus case run on ``primary`` shadowed by DuckDB: case -> how it diverged."""
    config = {"engines": {"primary": primary, "duck": {"type": "duckdb"}}, "sources": SOURCES}
    diverged: dict[str, str] = {}
    with gateway.connect(config) as gw:
        for case in all_cases():
            try:
                record = gw.execute(case.sql, engine="primary", shadow="duck").shadow
            except gateway.QueryError as exc:  # the primary failed: the reference did not
                diverged[case.name] = f"error: {exc.message.splitlines()[0]}"
                continue
            record.wait(60)
            if record.diverged:
                diverged[case.name] = f"{record.category}: {record.message}"
    return diverged


def corpus_gaps(engine: str) -> dict[str, Any]:
    """The engine's conformance gaps of corpus cases (not those of the error-kind cases)."""
    names = {c.name for c in all_cases()}
    return {k: g for k, g in next(e for e in ENGINES if e.name == engine).gaps.items()
            if k in names}


def check_only_gaps(diverged: dict[str, str], gaps: dict[str, Any]) -> None:
    undocumented = {k: v for k, v in diverged.items() if k not in gaps}
    assert not undocumented, "divergences that are no conformance Gap"
    assert set(gaps) == set(diverged), "gaps the shadow no longer sees"


@pytest.mark.postgres
def test_shadow_adbc_postgres_against_duckdb(postgres, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # shadow records go to ./.arrowgate
    name = db.new_pg_database(postgres)
    db.load_sources(db.adbc_pg(postgres, name), SOURCES)
    diverged = shadow_divergences(db.adbc_pg(postgres, name, transpile_from="duckdb"))
    check_only_gaps(diverged, corpus_gaps("adbc_pg"))


def test_shadow_adbc_flightsql_against_duckdb(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with serving({"engines": {"duck": {"type": "duckdb"}}, "sources": SOURCES}) as server:
        diverged = shadow_divergences(db.adbc_flight(server.location))
    check_only_gaps(diverged, corpus_gaps("adbc_flightsql"))


#: Where Spark (local mode, through adbc-driver-spark) answers the corpus otherwise than DuckDB.
SPARK_GAPS = {
    "case_coalesce_cast": "Spark's CAST(4.9 AS INT) truncates to 4; DuckDB rounds to 5",
    "numeric_functions": "Spark reads the literal 19.45 as DECIMAL and rounds it half up to "
                         "19.5; DuckDB rounds the double 19.4499... to 19.4",
}


@pytest.mark.skipif(not os.environ.get("ARROWGATE_TEST_SPARK"),
                    reason="ARROWGATE_TEST_SPARK is not set (a Spark Connect URI, sc://host:port; "
                           "docs/scale-out.md says how to start one): no Spark test ran")
def test_shadow_adbc_spark_against_duckdb(tmp_path, monkeypatch):
    """Opt-in: Spark Connect reads the sources as Parquet files DuckDB wrote (so both see
    the same types); the corpus runs transpiled from DuckDB's dialect to Spark's."""
    pytest.importorskip("adbc_driver_spark", reason="pip install adbc-driver-spark")
    monkeypatch.chdir(tmp_path)
    uri = os.environ["ARROWGATE_TEST_SPARK"]
    spark = {"type": "adbc", "driver": "spark", "uri": uri}
    with gateway.connect({"engines": {"spark": spark, "duck": {"type": "duckdb"}},
                          "sources": SOURCES}) as gw:
        for name in SOURCES:
            path = tmp_path / f"{name}.parquet"
            gw.execute(f"COPY (SELECT * FROM \"{name}\") TO '{path}' (FORMAT parquet)",
                       engine="duck").to_arrow()
            gw.execute(f"DROP TABLE IF EXISTS {name}", engine="spark").to_arrow()
            gw.execute(f"CREATE TABLE {name} USING parquet LOCATION '{path}'",
                       engine="spark").to_arrow()
    diverged = shadow_divergences({**spark, "transpile_from": "duckdb"})
    check_only_gaps(diverged, SPARK_GAPS)
