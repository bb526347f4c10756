"""Shadow a PostgreSQL-catalog lake against a SQLite-catalog lake holding the same data."""

from __future__ import annotations

import pytest

import gateway
from tests.conformance.corpus import SOURCES, all_cases
from tests.lakes import load_sources, pg_lake, sqlite_lake

LAKE_QUERIES = [
    "SELECT count(*) AS snapshots FROM ducklake_snapshots('{lake}')",
    "SELECT table_name, file_count FROM ducklake_table_info('{lake}') ORDER BY table_name",
    "SELECT cab_type, count(*) AS n FROM trips AT (VERSION => 1) GROUP BY cab_type ORDER BY 1",
    "SELECT count(*) AS n FROM zones AT (VERSION => 2)",
]


@pytest.mark.postgres
def test_postgres_and_sqlite_catalogs_answer_alike(postgres, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # shadow records go to ./.arrowgate
    sections = {"pg": pg_lake(postgres, tmp_path), "lite": sqlite_lake(tmp_path)}
    for name, section in sections.items():
        load_sources(name, section, SOURCES)
    cases = [c.sql for c in all_cases()]
    with gateway.connect({"engines": sections}) as gw:
        records = []
        for sql in cases:
            result = gw.execute(sql, engine="pg", shadow="lite")
            result.to_arrow()  # the record is final once the answer is read
            records.append(result.shadow)
        for sql in LAKE_QUERIES:
            # each lake is named after its engine; the same text asks each about itself
            pg = gw.execute(sql.format(lake="pg"), engine="pg").to_arrow()
            lite = gw.execute(sql.format(lake="lite"), engine="lite").to_arrow()
            assert pg.equals(lite), sql
    diverged = [(r.sql, r.category, r.message) for r in records if r.category != "match"]
    assert not diverged
    assert len(records) == len(cases)
