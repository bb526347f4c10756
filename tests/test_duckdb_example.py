"""examples/duckdb-versions works out of the box: three releases answer the taxi queries alike."""

from __future__ import annotations

from pathlib import Path

import gateway
from gateway.sql.corpus import read_queries
from gateway.verify.compare import compare_tables
from tests.duckdb_support import use_shared_home

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "duckdb-versions"


def test_the_example_releases_agree_on_the_taxi_queries(tmp_path_factory):
    use_shared_home(tmp_path_factory)
    queries = read_queries([EXAMPLE / "queries.sql"])
    assert [q.name for q in queries][:4] == ["q01_count_by_cab", "q02_avg_by_passengers",
                                             "q03_count_by_passengers_year",
                                             "q04_count_by_passengers_year_distance"]
    with gateway.connect(EXAMPLE / "arrowgate.toml") as gw:
        assert gw.config.shadow["primary"] == "duck20"
        for query in queries:
            reference = gw.execute(query.sql, engine="duck155").to_arrow()
            for engine in ("duck144", "duck20", "duck155_worker"):
                verdict = compare_tables(gw.execute(query.sql, engine=engine).to_arrow(),
                                         reference, sql=query.sql)
                assert verdict.category == "match", f"{engine} {query.name}: {verdict.message}"
        versions = {gw.execute("SELECT version() AS v", engine=e).to_arrow().to_pylist()[0]["v"]
                    for e in ("duck144", "duck155", "duck20")}
        assert versions == {"v1.4.4", "v1.5.5", "v2.0.1"}
