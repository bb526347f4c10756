"""Shadow the adbc engine on PostgreSQL against DuckDB over the conformance corpus.

The corpus is DuckDB's dialect; the adbc engine transpiles it. Every
divergence the shadow comparator reports must be a documented semantic
difference: a conformance Gap of the adbc_pg engine, with its reason. And
every such Gap must still show up here, so the list stays true.
"""

from __future__ import annotations

import pytest

import gateway
from tests import sql_databases as db
from tests.conformance.corpus import SOURCES, all_cases
from tests.conformance.engines import ENGINES

pytestmark = [pytest.mark.postgres, pytest.mark.adbc]


def test_shadow_adbc_postgres_against_duckdb(postgres, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # shadow records go to ./.arrowgate
    cases = all_cases()
    names = {c.name for c in cases}
    gaps = {k: g for k, g in next(e for e in ENGINES if e.name == "adbc_pg").gaps.items()
            if k in names}  # the corpus' gaps, not those of the error-kind cases
    name = db.new_pg_database(postgres)
    db.load_sources(db.adbc_pg(postgres, name), SOURCES)
    config = {"engines": {"pg": db.adbc_pg(postgres, name, transpile_from="duckdb"),
                          "duck": {"type": "duckdb"}}, "sources": SOURCES}
    diverged: dict[str, str] = {}
    with gateway.connect(config) as gw:
        for case in cases:
            try:
                record = gw.execute(case.sql, engine="pg", shadow="duck").shadow
            except gateway.QueryError as exc:  # the primary failed: the reference did not
                diverged[case.name] = f"error: {exc.message.splitlines()[0]}"
                continue
            record.wait(60)
            if record.diverged:
                diverged[case.name] = f"{record.category}: {record.message}"
    undocumented = {k: v for k, v in diverged.items() if k not in gaps}
    assert not undocumented, "divergences that are no conformance Gap"
    assert set(gaps) == set(diverged), "gaps the shadow no longer sees"
