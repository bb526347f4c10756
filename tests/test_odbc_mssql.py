"""SQL Server through the odbc engine: finding Microsoft's driver here, a real server when given.

No SQL Server runs on these machines. The driver discovery and registration
are tested for real (the ``mssql-python-odbc`` package is a dev dependency);
the type mappings of docs/odbc.md run only when ``ARROWGATE_TEST_MSSQL``
holds a connection string (``Server=host,1433;Database=db;UID=...;PWD=...;
TrustServerCertificate=yes``), and the skip says so in the test summary.
"""

from __future__ import annotations

import datetime
import decimal
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import gateway
from gateway_odbc.mssql import find_driver, register, system_odbcinst
from tests.pg import free_port

pytestmark = [pytest.mark.odbc, pytest.mark.mssql]


@pytest.fixture
def own_odbcsysini(monkeypatch):
    """ODBCSYSINI as it was before the test, restored after it."""
    monkeypatch.delenv("ODBCSYSINI", raising=False)


def test_find_driver_in_the_installed_package():
    library = find_driver()
    assert library.name.startswith("libmsodbcsql-18")
    assert library.is_file()


def test_find_driver_says_which_builds_the_package_has(tmp_path):
    (tmp_path / "libs" / "linux" / "plan9" / "mips" / "lib").mkdir(parents=True)
    with pytest.raises(gateway.ConfigError, match="plan9/mips/lib"):
        find_driver(tmp_path)


def test_register_keeps_the_system_drivers_and_touches_no_system_file(tmp_path):
    system = system_odbcinst()
    before = system.read_bytes() if system else None
    script = textwrap.dedent(f"""
        import os, pyodbc
        from gateway_odbc.mssql import find_driver, register
        register(find_driver(), folder=__import__("pathlib").Path({str(tmp_path)!r}))
        print(os.environ["ODBCSYSINI"])
        print("|".join(pyodbc.drivers()))
    """)
    env = {k: v for k, v in os.environ.items() if k != "ODBCSYSINI"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    folder, drivers = done.stdout.strip().splitlines()
    assert folder == str(tmp_path)
    assert "ODBC Driver 18 for SQL Server" in drivers.split("|")
    assert "PostgreSQL Unicode" in drivers.split("|")
    assert (system.read_bytes() if system else None) == before


def test_register_twice_reuses_the_folder(tmp_path, own_odbcsysini):
    first = register(find_driver(), folder=tmp_path)
    assert register(find_driver()) == first
    assert (tmp_path / "odbcinst.ini").read_text().count("[ODBC Driver 18 for SQL Server]") == 1


def test_the_driver_loads_and_an_unreachable_server_fails_within_the_login_timeout(
        own_odbcsysini):
    section = {"type": "odbc", "driver": "mssql", "login_timeout": 3,
               "connection": f"SERVER=127.0.0.1,{free_port()};DATABASE=x;UID=sa;PWD=secret-pw;"
                             "TrustServerCertificate=yes"}
    started = time.monotonic()
    with gateway.connect({"engines": {"ms": section}}) as gw:
        assert gw.engine_types["odbc"](  # the dialect comes from the driver's name
            "ms", gw.engine_config("ms").options, {}).dialect == "tsql"
        with pytest.raises(gateway.EngineConnectionError) as info:
            gw.execute("SELECT 1")
    assert time.monotonic() - started < 20
    assert "ODBC Driver 18 for SQL Server" in str(info.value)  # the Microsoft driver answered
    assert "secret-pw" not in str(info.value)


# -- a real SQL Server -------------------------------------------------------------
MSSQL = os.environ.get("ARROWGATE_TEST_MSSQL")
needs_server = pytest.mark.skipif(
    not MSSQL, reason="ARROWGATE_TEST_MSSQL is not set: no SQL Server test ran")

TYPES_QUERY = """SELECT CAST(N'héllo' AS NVARCHAR(10)) AS nv, CAST('abc' AS VARCHAR(10)) AS v,
 CAST('2024-01-02 03:04:05.123' AS DATETIME) AS dt,
 CAST('2024-01-02 03:04:05.1234567' AS DATETIME2(7)) AS dt2,
 CAST('2024-01-02 03:04:05.123456 +02:00' AS DATETIMEOFFSET(6)) AS dto,
 CAST(123456.789 AS DECIMAL(12,3)) AS dec, CAST(1 AS BIT) AS bit,
 CAST('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11' AS UNIQUEIDENTIFIER) AS guid,
 CAST(12.3456 AS MONEY) AS money"""


@needs_server
def test_sql_server_type_mappings(own_odbcsysini):
    section = {"type": "odbc", "driver": "mssql", "connection": MSSQL}
    with gateway.connect({"engines": {"ms": section}}) as gw:
        got = gw.execute(TYPES_QUERY).to_arrow()
        typed = gw.execute(TYPES_QUERY + " WHERE 1 = ?", parameters=[1]).to_arrow()
    row = got.to_pylist()[0]
    assert got.schema.field("nv").type == pa.string() and row["nv"] == "héllo"
    assert got.schema.field("v").type == pa.string() and row["v"] == "abc"
    assert pa.types.is_timestamp(got.schema.field("dt").type)
    assert row["dt2"] == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert got.schema.field("dto").type.tz == "UTC"
    assert row["dto"] == datetime.datetime(2024, 1, 2, 1, 4, 5, 123456, tzinfo=datetime.UTC)
    assert got.schema.field("dec").type == pa.decimal128(12, 3)
    assert row["dec"] == decimal.Decimal("123456.789")
    assert got.schema.field("bit").type == pa.bool_() and row["bit"] is True
    assert row["guid"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert row["money"] == decimal.Decimal("12.3456")
    assert typed.to_pylist() == got.to_pylist()


def test_system_odbcinst_is_found():
    path = system_odbcinst()
    assert path is None or Path(path).is_file()
