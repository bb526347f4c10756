"""The Python API and the in-process DuckDB engine behind it."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import gateway
from tests.conftest import DATA, QUICKSTART


def test_connect_without_arguments_gives_one_duckdb_engine():
    with gateway.connect() as gw:
        assert list(gw.config.engines) == ["duckdb"]
        result = gw.execute("SELECT 42 AS answer")
        assert result.engine == "duckdb"
        assert result.to_arrow().to_pylist() == [{"answer": 42}]
        assert result.rows == 1
        assert result.elapsed > 0


def test_connect_with_a_toml_path_and_a_dict():
    with gateway.connect(QUICKSTART) as gw:
        assert gw.default_engine == "scan"
        assert gw.execute("SELECT count(*) AS n FROM zones").to_arrow()["n"][0].as_py() == 8
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw:
        assert gw.execute("SELECT 1 AS x", engine="duck").engine == "duck"


def test_reader_streams_batches_with_the_schema_first():
    with gateway.connect() as gw:
        result = gw.execute("SELECT range AS x, range * 2 AS y FROM range(1000000)")
        assert result.schema == pa.schema([("x", pa.int64()), ("y", pa.int64())])
        reader = result.reader()
        first = reader.read_next_batch()
        assert 0 < first.num_rows < 1000000
        rest = sum(b.num_rows for b in reader)
        assert first.num_rows + rest == result.rows == 1000000
        assert result.finished


def test_a_large_answer_streams_in_bounded_memory():
    # 30M rows x 8 bytes is 240 MB if it ever sat in memory at once.
    def rss_mb():
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 / 2**20

    with gateway.connect({"engines": {"d": {"type": "duckdb", "settings": {"threads": 2}}}}) as gw:
        before = rss_mb()
        peak = before
        total = 0
        for batch in gw.execute("SELECT range AS x FROM range(30000000)").reader():
            total += batch.num_rows
            peak = max(peak, rss_mb())
    assert total == 30_000_000
    assert peak - before < 120, f"RSS grew by {peak - before:.0f} MB while streaming"


def test_result_is_read_once_as_a_stream_but_to_arrow_repeats():
    with gateway.connect() as gw:
        result = gw.execute("SELECT 1 AS x")
        assert result.to_arrow() is result.to_arrow()
        assert result.reader().read_all().num_rows == 1
        streamed = gw.execute("SELECT 1 AS x")
        streamed.reader().read_all()
        with pytest.raises(RuntimeError, match="already read"):
            streamed.to_arrow()


def test_statements_without_rows_and_writes():
    with gateway.connect() as gw:
        gw.execute("CREATE TABLE t (a INTEGER)").to_arrow()
        gw.execute("INSERT INTO t VALUES (?), (?)", parameters=[1, 2]).to_arrow()
        assert gw.execute("SELECT sum(a) AS s FROM t").to_arrow()["s"][0].as_py() == 3


def test_settings_are_applied_to_every_query():
    config = {"engines": {"d": {"type": "duckdb", "settings": {
        "threads": 1, "integer_division": True, "memory_limit": "512MB"}}}}
    with gateway.connect(config) as gw:
        row = gw.execute("SELECT current_setting('threads') AS t, 7 / 2 AS q").to_arrow()
        assert row.to_pylist() == [{"t": 1, "q": 3}]


def test_database_file_and_read_only(tmp_path):
    db = str(tmp_path / "lake.duckdb")
    sources = {"trips": {"path": str(DATA / "trips.csv")}}
    with gateway.connect({"engines": {"rw": {"type": "duckdb", "database": db}},
                          "sources": sources}) as gw:
        gw.execute("CREATE TABLE kept AS SELECT * FROM trips WHERE cab_type = 'fhv'").to_arrow()
    config = {"engines": {"ro": {"type": "duckdb", "database": db, "read_only": True}},
              "sources": sources}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT count(*) AS n FROM kept").to_arrow()["n"][0].as_py() == 33
        # sources are mounted even though the database file is read-only
        assert gw.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py() == 400
        with pytest.raises(gateway.QueryError, match="read-only"):
            gw.execute("INSERT INTO kept SELECT * FROM kept").to_arrow()
        tables = {c.table for c in gw.catalog()}
        assert {"kept", "trips"} <= tables


def test_missing_read_only_database_is_a_connection_error(tmp_path):
    config = {"engines": {"ro": {"type": "duckdb", "database": str(tmp_path / "none.duckdb"),
                                 "read_only": True}}}
    with gateway.connect(config) as gw, pytest.raises(gateway.EngineConnectionError) as info:
        gw.execute("SELECT 1")
    assert info.value.engine == "ro"


def test_cancel_interrupts_a_running_query():
    with gateway.connect() as gw:
        engine = gw.engine()
        errors = []

        def run():
            try:
                gw.execute("SELECT count(*) FROM range(10000000000) a, range(10) b").to_arrow()
            except gateway.GatewayError as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.5)
        engine.cancel()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], gateway.Cancelled)
        # the engine is still usable afterwards
        assert gw.execute("SELECT 1 AS x").to_arrow().num_rows == 1


def test_concurrent_queries_on_one_engine():
    with gateway.connect() as gw:
        results = {}

        def run(i):
            results[i] = gw.execute(f"SELECT sum(range) + {i} AS s FROM range(200000)").to_arrow()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert {i: r["s"][0].as_py() for i, r in results.items()} == {
        i: 19999900000 + i for i in range(8)}


def test_closed_gateway_refuses_queries():
    gw = gateway.connect()
    gw.execute("SELECT 1").to_arrow()
    gw.close()
    gw.close()
    with pytest.raises(gateway.GatewayError, match="closed"):
        gw.execute("SELECT 1")


def test_parameters_refused_by_an_engine_without_them():
    from gateway.engine import Engine, EngineResult

    class NoParams(Engine):
        type_name = "noparams"

        def execute(self, sql, parameters=None):
            table = pa.table({"x": [1]})
            return EngineResult(pa.RecordBatchReader.from_batches(table.schema,
                                                                  table.to_batches()))

    class Plugin:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [NoParams]

    config = {"engines": {"n": {"type": "noparams"}, "d": {"type": "duckdb"}}}
    with gateway.connect(config, plugins=[Plugin()]) as gw:
        with pytest.raises(gateway.Unsupported) as info:
            gw.execute("SELECT ?", parameters=[1])
        assert "engines that can run it: d" in str(info.value)


def test_a_gateway_without_shadowing_does_not_load_the_shadow_machinery():
    import subprocess
    import sys

    code = ("import sys, gateway; gateway.connect().execute('SELECT 1').to_arrow(); "
            "print(sorted(m for m in ('gateway.shadow.settings', 'sqlglot') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
