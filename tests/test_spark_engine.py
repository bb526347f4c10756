"""The spark engine against a real local Spark Connect server (tests/spark.py starts it)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import gateway
from tests.conformance.corpus import SOURCES
from tests.hang_guard import HANG_GUARD

pytestmark = pytest.mark.spark


def spark_config(spark, **options) -> dict:
    return {"engines": {"spark": {"type": "spark", "remote": spark.remote, **options}},
            "sources": SOURCES}


def test_query_answers_arrow_streamed_with_schema_first(spark):
    with gateway.connect(spark_config(spark)) as gw:
        result = gw.execute("SELECT id, id * 2 AS twice FROM range(100000) ORDER BY id")
        assert result.schema == pa.schema([pa.field("id", pa.int64(), False),
                                           pa.field("twice", pa.int64(), False)])
        batches = list(result.reader())
        assert sum(b.num_rows for b in batches) == 100000
        assert batches[-1].column(1)[-1].as_py() == 199998


def test_sources_mounted_as_views(spark):
    with gateway.connect(spark_config(spark)) as gw:
        answer = gw.execute("SELECT count(*) AS n FROM trips WHERE cab_type = 'green'")
        assert answer.to_arrow().column(0).to_pylist() == [113]


def test_parameters(spark):
    with gateway.connect(spark_config(spark)) as gw:
        answer = gw.execute("SELECT ? + 1 AS a, ? AS b", parameters=[41, "x"]).to_arrow()
        assert answer.to_pylist() == [{"a": 42, "b": "x"}]


def test_transpile_from_duckdb(spark):
    with gateway.connect(spark_config(spark, transpile_from="duckdb")) as gw:
        answer = gw.execute("SELECT list_value(1, 2) AS l, 7 // 2 AS d").to_arrow()
        assert answer.to_pylist() == [{"l": [1, 2], "d": 3}]


def test_errors_are_translated_with_spark_message_and_kind(spark):
    with gateway.connect(spark_config(spark)) as gw:
        with pytest.raises(gateway.QueryError) as info:
            gw.execute("SELECT no_such_column FROM range(1)").to_arrow()
        assert info.value.kind == "unknown_object"
        assert "no_such_column" in str(info.value) and info.value.engine == "spark"


def test_session_keeps_settings_and_temp_views_apart_from_others(spark):
    with gateway.connect(spark_config(spark)) as gw, gw.session("spark") as one, \
            gw.session("spark") as two:
        one.execute("CREATE TEMPORARY VIEW mine AS SELECT 1 AS x").to_arrow()
        assert one.execute("SELECT x FROM mine").to_arrow().column(0).to_pylist() == [1]
        with pytest.raises(gateway.QueryError) as info:
            two.execute("SELECT x FROM mine").to_arrow()
        assert info.value.kind == "unknown_object"


def test_cancel_interrupts_the_spark_job(spark):
    """A query of minutes (a cross join counted) is interrupted on the server, in seconds."""
    slow = "SELECT count(*) AS n FROM range(1000000000) a CROSS JOIN range(1000) b"
    with gateway.connect(spark_config(spark)) as gw, gw.session("spark") as session:
        failure: list[BaseException] = []

        def run() -> None:
            try:
                session.execute(slow).to_arrow()
            except BaseException as exc:
                failure.append(exc)

        worker = threading.Thread(target=run)
        started = time.monotonic()
        worker.start()
        time.sleep(3)
        for query in gw.running():
            assert gw.cancel(query.query_id)
        worker.join(HANG_GUARD)
        assert not worker.is_alive()
        assert failure and isinstance(failure[0], gateway.Cancelled), failure
        assert time.monotonic() - started < HANG_GUARD  # a hang guard, not a speed claim
        # the session still answers after its query was interrupted
        assert session.execute("SELECT 1 AS a").to_arrow().num_rows == 1


def test_missing_server_is_a_connection_error():
    config = {"engines": {"spark": {"type": "spark", "remote": "sc://127.0.0.1:9",
                                    "connect_timeout": 2}}}
    with gateway.connect(config) as gw, pytest.raises(gateway.EngineConnectionError):
        gw.execute("SELECT 1").to_arrow()


def test_timeout_interrupts_the_spark_job(spark):
    slow = "SELECT count(*) AS n FROM range(1000000000) a CROSS JOIN range(1000) b"
    with gateway.connect(spark_config(spark, timeout=3)) as gw:
        started = time.monotonic()
        with pytest.raises(gateway.QueryTimeout):
            gw.execute(slow).to_arrow()
        assert time.monotonic() - started < HANG_GUARD  # a hang guard, not a speed claim


def test_shadow_duckdb_with_spark_as_reference(spark, tmp_path, monkeypatch):
    """Both engines read the same Parquet files; DuckDB's SQL runs on Spark transpiled."""
    monkeypatch.chdir(tmp_path)  # shadow records go to ./.arrowgate
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}, "sources": SOURCES}) as gw:
        for name in SOURCES:
            gw.execute(f"COPY (SELECT * FROM {name}) TO '{tmp_path / name}.parquet' "
                       "(FORMAT parquet)").to_arrow()
    sources = {name: {"path": str(tmp_path / f"{name}.parquet")} for name in SOURCES}
    engines = {"duck": {"type": "duckdb"},
               "spark": {"type": "spark", "remote": spark.remote, "transpile_from": "duckdb"}}
    sql = ("SELECT z.borough, year(t.pickup_datetime) AS y, count(*) AS n, "
           "round(avg(t.trip_distance), 3) AS dist, count(DISTINCT t.cab_type) AS cab_kinds "
           "FROM trips t JOIN zones z ON t.pickup_zone = z.zone "
           "GROUP BY z.borough, y ORDER BY n DESC, z.borough, y")
    with gateway.connect({"engines": engines, "sources": sources}) as gw:
        result = gw.execute(sql, engine="duck", shadow="spark")
        answer = result.to_arrow()
        record = result.shadow
        record.wait(HANG_GUARD)
    assert answer.num_rows > 1
    assert record.category == "match", record.message


def test_missing_pyspark_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyspark", None)  # what an install without it sees
    config = {"engines": {"spark": {"type": "spark", "remote": "sc://127.0.0.1:9"}}}
    with gateway.connect(config) as gw, pytest.raises(gateway.ConfigError) as info:
        gw.execute("SELECT 1").to_arrow()
    assert "spark extra" in str(info.value.hint) and "pyspark" in str(info.value.hint)


def test_served_through_flight_sql(spark):
    """``arrowgate serve`` with the spark engine as its default: the ADBC Flight SQL driver
    reads Spark's answer, parameters included, like any engine's."""
    import adbc_driver_flightsql.dbapi as dbapi

    from tests.flight_support import serving

    config = {"default_engine": "spark", **spark_config(spark)}
    with serving(config) as server, dbapi.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT cab_type, count(*) AS n FROM trips GROUP BY cab_type "
                    "ORDER BY cab_type")
        table = cur.fetch_arrow_table()
        assert table.column("cab_type").to_pylist() == ["fhv", "green", "yellow"]
        cur.execute("SELECT count(*) AS n FROM trips WHERE cab_type = ?", parameters=["green"])
        assert cur.fetch_arrow_table().column(0).to_pylist() == [113]
