"""A SELECT with side effects (nextval, setval) is not shadowed, and the record says why."""

from __future__ import annotations

import gateway
from gateway.sql.kinds import statement_kind


def test_nextval_in_a_select_runs_only_on_the_primary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"default_engine": "primary",
              "engines": {"primary": {"type": "duckdb"}, "reference": {"type": "duckdb"}}}
    with gateway.connect(config) as gw:
        for engine in ("primary", "reference"):
            gw.execute("CREATE SEQUENCE s", engine=engine, shadow=False).to_arrow()
        record = gw.execute("SELECT nextval('s') AS n", shadow="reference").shadow
        assert record.status == "skipped" and record.category is None
        assert "nextval()" in record.skip_reason and "shadow_writes" in record.skip_reason
        # the reference's sequence never moved
        after = gw.execute("SELECT nextval('s') AS n", engine="reference", shadow=False)
        assert after.to_arrow().to_pylist() == [{"n": 1}]


def test_statement_kind_names_the_side_effect():
    assert statement_kind("SELECT nextval('s')") == "SELECT calling nextval()"
    assert statement_kind("SELECT a, setval('s', 9) FROM t") == "SELECT calling setval()"
    assert statement_kind("INSERT INTO t SELECT nextval('s')") == "INSERT"
    assert statement_kind("SELECT random()") == "read"
