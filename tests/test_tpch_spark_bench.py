"""bench/tpch_spark.py's pieces on a small TPC-H-shaped lineitem and part, against the
suite's Spark Connect server: the query file holds the 22 queries, and the one semantic
difference the SF 0.1 and SF 1 runs found (docs/scale-out.md) shows the same here: a
quotient of DECIMAL sums is a DOUBLE in DuckDB and a DECIMAL of scale 6 in Spark, so
q14 is ``values``, and ``match`` within half a unit of the 6th decimal.
"""

from __future__ import annotations

import duckdb
import pytest

import gateway
from bench.tpch_spark import QUERIES, SCALE_6, config, verdict
from gateway.sql.corpus import read_queries


def test_the_query_file_holds_the_22_queries_in_order():
    assert [q.name for q in read_queries([QUERIES])] == [f"q{n:02d}" for n in range(1, 23)]


@pytest.mark.spark
def test_q14_differs_by_spark_decimal_scale_only_and_q06_matches(spark, tmp_path):
    con = duckdb.connect()
    con.sql(f"""COPY (SELECT range % 50 AS l_partkey,
                             CAST(1 + (range * 7919 % 100000) / 100 AS DECIMAL(15,2))
                                 AS l_extendedprice,
                             CAST((range % 11) / 100 AS DECIMAL(15,2)) AS l_discount,
                             CAST(range % 50 AS DECIMAL(15,2)) AS l_quantity,
                             DATE '1994-06-01' + CAST(range % 500 AS INTEGER) AS l_shipdate
                      FROM range(3000))
                TO '{tmp_path}/lineitem.parquet' (FORMAT parquet)""")
    con.sql(f"""COPY (SELECT range AS p_partkey,
                             CASE WHEN range % 3 = 0 THEN 'PROMO BRUSHED TIN'
                                  ELSE 'STANDARD PLATED BRASS' END AS p_type
                      FROM range(50))
                TO '{tmp_path}/part.parquet' (FORMAT parquet)""")
    queries = {q.name: q.sql for q in read_queries([QUERIES])}
    with gateway.connect(config(tmp_path, spark.remote, 2)) as gw:
        assert verdict(gw, queries["q06"], "duck", "spark")["category"] == "match"
        plain = verdict(gw, queries["q14"], "duck", "spark")
        assert plain["category"] == "values", plain
        (difference,) = plain["evidence"]["differences"]
        assert round(difference["primary"], 6) == pytest.approx(difference["reference"])
        loose = verdict(gw, f"-- arrowgate: abs_tol={SCALE_6}\n{queries['q14']}", "duck",
                        "spark")
        assert loose["category"] == "match", loose
