"""What engines keep between statements is given back once a service is at rest
(``Engine.at_rest``; issue 36: bench/client_model.py's service grew ~1.4 KB an action).

DuckDB keeps the versions of deleted rows, in an in-memory database too, until a
checkpoint; its own checkpoint after a commit gave up under the model's four clients, so
a ledger table that clients DELETE and INSERT grew the service without end.
"""

from __future__ import annotations

import ctypes
import sys

import gateway
from gateway.flight.serve_config import ServeSettings
from gateway.flight.server import FlightSqlServer
from tests.lakes import sqlite_lake

MiB = 2**20


def table_versions(gw: gateway.Gateway, engine: str) -> float:
    """MiB DuckDB holds for tables (``duckdb_memory()``'s table tags)."""
    got = gw.execute("SELECT coalesce(sum(memory_usage_bytes), 0) AS n FROM duckdb_memory() "
                     "WHERE tag IN ('BASE_TABLE', 'IN_MEMORY_TABLE')", engine=engine).to_arrow()
    return float(got.column(0)[0].as_py()) / MiB


def churn(gw: gateway.Gateway, engine: str, rounds: int = 120, rows: int = 1000) -> None:
    """What the model's ``many`` does: a table emptied and filled again, over and over
    (by default fewer rounds than DuckDB's own checkpoint would come after)."""
    gw.execute("CREATE OR REPLACE TABLE ledger (a INTEGER)", engine=engine).to_arrow()
    for n in range(rounds):
        gw.execute("DELETE FROM ledger", engine=engine).to_arrow()
        gw.execute(f"INSERT INTO ledger SELECT range FROM range({rows + n})",
                   engine=engine).to_arrow()


def duckdb_resident() -> float:
    """MiB resident in the installed DuckDB's own jemalloc (``stats.resident``)."""
    mallctl = ctypes.CDLL(sys.modules["_duckdb"].__file__).duckdb_je_mallctl
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                        ctypes.c_void_p, ctypes.c_size_t]
    epoch = ctypes.c_uint64(1)
    mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
    value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
    assert mallctl(b"stats.resident", ctypes.byref(value), ctypes.byref(size), None, 0) == 0
    return value.value / MiB


def test_at_rest_a_duckdb_engine_drops_the_versions_of_deleted_rows():
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw:
        churn(gw, "duck")
        kept = table_versions(gw, "duck")
        assert kept > 1.5, kept  # ~17 KB a round: the deleted rows' versions
        gw.at_rest()
        assert table_versions(gw, "duck") < 0.5 * kept, (kept, table_versions(gw, "duck"))
        got = gw.execute("SELECT count(*) AS n, sum(a) AS s FROM ledger").to_arrow().to_pylist()
        assert got == [{"n": 1119, "s": 1119 * 1118 // 2}]  # the table itself is whole


def test_at_rest_a_duckdb_engine_gives_back_the_pages_duckdb_freed():
    """DuckDB's jemalloc keeps freed pages until later allocations: at rest, for good."""
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw:
        churn(gw, "duck", rounds=300, rows=5000)
        gw.execute("CHECKPOINT").to_arrow()  # the versions freed, their pages kept
        kept = duckdb_resident()
        gw.at_rest()
        assert duckdb_resident() < kept - 10, (kept, duckdb_resident())


def test_a_service_at_rest_gives_back_what_its_engines_keep():
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw, \
            FlightSqlServer(gw, ServeSettings(port=0)) as server:
        churn(gw, "duck")
        kept = table_versions(gw, "duck")
        server.at_rest.seen(10, 0, now=1000.0)
        server.at_rest.seen(10, 0, now=1000.0 + server.at_rest.quiet + 1)  # at rest
        assert table_versions(gw, "duck") < 0.5 * kept, (kept, table_versions(gw, "duck"))


def test_at_rest_a_lake_is_left_as_it_is(tmp_path):
    """On a lake, CHECKPOINT is DuckLake's maintenance (it writes the rows inlined in the
    catalog out to files, as a snapshot of its own): at rest is no time for it."""
    with gateway.connect({"engines": {"lake": sqlite_lake(tmp_path)}}) as gw:
        gw.execute("CREATE TABLE small (v INTEGER)").to_arrow()
        for v in range(3):
            gw.execute(f"INSERT INTO small VALUES ({v})").to_arrow()
        snapshots = "SELECT count(*) AS n FROM ducklake_snapshots('lake')"
        before = gw.execute(snapshots).to_arrow().to_pylist()
        gw.at_rest()
        assert gw.execute(snapshots).to_arrow().to_pylist() == before
        assert gw.execute("SELECT sum(v) AS s FROM small").to_arrow().to_pylist() == [{"s": 3}]
