"""SQL Server catalogs, against a real server: runs only where one is configured.

No SQL Server can run on the machines this project is built on, so these tests
need ``ARROWGATE_TEST_MSSQL`` (an ADO-style connection string to an empty
database: ``Server=host,1433;Database=lake;User Id=...;Password=...;
TrustServerCertificate=yes``). The engine tests also need
``ARROWGATE_TEST_MSSQL_EXTENSIONS``: the mssql and mssql_ducklake extension
files built for DuckDB 1.5.5, separated by ``:``. Without them the tests are
reported as skipped, with the reason, in the test summary (``-ra``).
What can be checked without a server is in ``test_ducklake_health.py``.
"""

from __future__ import annotations

import os
import secrets

import pytest

import gateway
from gateway_ducklake.catalog import CatalogSpec
from gateway_ducklake.health import check_catalog

CONN = os.environ.get("ARROWGATE_TEST_MSSQL", "")
EXTENSIONS = [p for p in os.environ.get("ARROWGATE_TEST_MSSQL_EXTENSIONS", "").split(":") if p]

NO_SERVER = ("SQL Server catalog tests not run: ARROWGATE_TEST_MSSQL is not set (no SQL Server "
             "on this machine; set it to Server=...;Database=... to run them)")
pytestmark = pytest.mark.skipif(not CONN, reason=NO_SERVER)
needs_extensions = pytest.mark.skipif(
    not CONN or not EXTENSIONS,
    reason=NO_SERVER if not CONN else "SQL Server lake tests not run: "
    "ARROWGATE_TEST_MSSQL_EXTENSIONS does not name the mssql and mssql_ducklake extension files")


def lake_section(tmp_path, schema: str) -> dict:
    return {"type": "ducklake", "catalog": f"mssql:{CONN}", "duckdb": "1.5.5",
            "extension_path": EXTENSIONS, "metadata_schema": schema,
            "data_path": str(tmp_path / "data") + "/"}


@needs_extensions
def test_a_lake_on_sql_server(tmp_path):
    schema = f"arrowgate_{secrets.token_hex(3)}"
    with gateway.connect({"engines": {"lake": lake_section(tmp_path, schema)}}) as gw:
        gw.execute("CREATE TABLE t (v INTEGER)").to_arrow()
        gw.execute("INSERT INTO t VALUES (1), (2)").to_arrow()
        first = gw.execute("SELECT max(snapshot_id) AS s FROM ducklake_snapshots('lake')") \
            .to_arrow().column(0)[0].as_py()
        gw.execute("DELETE FROM t WHERE v = 1").to_arrow()
        assert gw.execute("SELECT v FROM t").to_arrow().to_pylist() == [{"v": 2}]
        assert gw.execute(f"SELECT count(*) AS n FROM t AT (VERSION => {first})") \
            .to_arrow().to_pylist() == [{"n": 2}]
    report = check_catalog(CatalogSpec.parse(f"mssql:{CONN}"), "lake", schema=schema,
                           duckdb_version="1.5.5")
    assert report.value("tables") == "1"
    assert report.value("forced_parameterization") in ("on", "off")
    assert report.value("catalog_collation") is not None


def test_lake_check_reaches_the_server():
    from gateway_ducklake.health import connect_catalog

    con = connect_catalog(CatalogSpec.parse(f"mssql:{CONN}"), "lake")
    try:
        cur = con.cursor()
        cur.execute("SELECT DB_NAME()")
        assert cur.fetchone()[0]
    finally:
        con.close()
