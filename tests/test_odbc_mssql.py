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
from gateway_odbc.types import datetimeoffset_from_bytes, offset_timestamps
from tests.hang_guard import HANG_GUARD
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
    assert time.monotonic() - started < HANG_GUARD
    assert "ODBC Driver 18 for SQL Server" in str(info.value)  # the Microsoft driver answered
    assert "secret-pw" not in str(info.value)


# -- DATETIMEOFFSET, offline -----------------------------------------------------------
def test_datetimeoffset_text_from_arrow_odbc_becomes_utc_nanoseconds():
    got = offset_timestamps(pa.array(["2024-01-02 03:04:05.1234567 +02:00", None,
                                      "2024-01-02 03:04:05 -05:30"]))
    assert got.type == pa.timestamp("ns", tz="UTC")
    assert got.cast(pa.int64()).to_pylist() == [
        1704157445123456700, None, 1704184445000000000]
    with pytest.raises(ValueError, match="not a DATETIMEOFFSET"):
        offset_timestamps(pa.array(["yesterday"]))


def test_datetimeoffset_struct_from_pyodbc_keeps_its_offset():
    import struct

    raw = struct.pack("<6hI2h", 2024, 1, 2, 3, 4, 5, 123456700, -5, -30)
    got = datetimeoffset_from_bytes(raw)
    assert got.utcoffset() == -datetime.timedelta(hours=5, minutes=30)
    assert got.astimezone(datetime.UTC) == datetime.datetime(2024, 1, 2, 8, 34, 5, 123456,
                                                             tzinfo=datetime.UTC)


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
    types = {f.name: f.type for f in got.schema}
    assert types["nv"] == pa.string() and types["v"] == pa.string()
    assert types["dt"] == pa.timestamp("ms") and types["dt2"] == pa.timestamp("ns")
    assert types["dto"] == pa.timestamp("ns", tz="UTC")
    assert types["dec"] == pa.decimal128(12, 3) and types["money"] == pa.decimal128(19, 4)
    assert types["bit"] == pa.bool_() and types["guid"] == pa.string()
    row = got.select(["nv", "v", "dec", "bit", "guid", "money"]).to_pylist()[0]
    assert row == {"nv": "héllo", "v": "abc", "dec": decimal.Decimal("123456.789"),
                   "bit": True, "guid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                   "money": decimal.Decimal("12.3456")}
    assert got.column("dto").cast(pa.int64())[0].as_py() == 1704157445123456000
    assert typed.select(["nv", "dec", "bit", "guid"]).to_pylist() == \
        got.select(["nv", "dec", "bit", "guid"]).to_pylist()


def test_system_odbcinst_is_found():
    path = system_odbcinst()
    assert path is None or Path(path).is_file()
