"""Every Arrow type DuckDB produces goes through every --format, and a stopped write leaves
nothing behind.

The documented text forms (gateway/output/writers.py): an INTERVAL is an ISO 8601
duration, a VARINT its digits, binary hex, NaN and the infinities in JSON the
strings "NaN", "Infinity" and "-Infinity".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.output.writers import FORMATS
from tests.conftest import ROOT
from tests.hang_guard import HANG_GUARD

#: One column of each type DuckDB hands to Arrow, and nested combinations among them.
TYPES = {
    "interval": "INTERVAL 1 DAY + INTERVAL 3 HOUR",
    "negative_interval": "INTERVAL '-1 year 2 months'",
    "bit": "'101'::BIT",
    "varint": "12345678901234567890123456789::VARINT",
    "negative_varint": "(-12345678901234567890123456789)::VARINT",
    "union": "union_value(num := 2)::UNION(num INT, str VARCHAR)",
    "uuid": "'9082c014-8e23-48cc-9ee6-edcc1ea7e546'::UUID",
    "enum": "'a'::ENUM('a', 'b')",
    "decimal38": "12345678901234567890.123456789012345678::DECIMAL(38, 18)",
    "timetz": "'12:00:00+02'::TIMETZ",
    "timestamptz": "TIMESTAMPTZ '2024-01-01 00:00:00+00'",
    "hugeint": "170141183460469231731687303715884105727::HUGEINT",
    "uhugeint": "1::UHUGEINT",
    "blob": "'\\xFF\\x00'::BLOB",
    "infinity": "'inf'::DOUBLE",
    "nan": "'nan'::DOUBLE",
    "list_of_intervals": "[INTERVAL 1 DAY, NULL]",
    "array": "[1, 2]::INT[2]",
    "struct_of_bit_and_union": "{'b': '1'::BIT, 'u': union_value(num := 2)::UNION(num INT, str VARCHAR)}",
    "map_of_intervals": "MAP {'k': INTERVAL 2 DAY}",
    "list_of_varints": "[1::VARINT, NULL]",
    "map_keyed_by_lists": "MAP {[1, 2]: 3}",  # histogram() of a list column
    "empty_maps_in_a_list": "[MAP {}]",  # typed MAP(NULL, NULL)
    "null": "NULL",
}
SQL = "SELECT " + ", ".join(f"{sql} AS {name}" for name, sql in TYPES.items())


def arrowgate(*args: str, **kwargs):
    env = {k: v for k, v in os.environ.items() if k != "ARROWGATE_CONFIG"}
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True,
                          cwd=ROOT, env=env, timeout=120, **kwargs)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("column", list(TYPES))
def test_every_type_in_every_format(cli, tmp_path, fmt, column):
    out = tmp_path / f"out.{fmt}"
    done = cli("query", "--format", fmt, "--output", str(out),
               f"SELECT {TYPES[column]} AS {column} FROM range(3)")
    assert done.code == 0, done.err
    assert "Traceback" not in done.err
    assert out.stat().st_size > 0


def test_the_documented_text_forms(cli):
    done = cli("query", "--format", "json", SQL)
    assert done.code == 0, done.err
    row = json.loads(done.out)[0]
    assert row["interval"] == "P1DT3H"
    assert row["negative_interval"] == "P-10M"
    assert row["varint"] == 12345678901234567890123456789
    assert row["negative_varint"] == -12345678901234567890123456789
    assert row["blob"] == "ff00"
    assert row["union"] == 2
    assert row["enum"] == "a"
    assert row["decimal38"] == "12345678901234567890.123456789012345678"
    assert (row["infinity"], row["nan"]) == ("Infinity", "NaN")
    assert row["list_of_intervals"] == ["P1D", None]
    assert row["map_of_intervals"] == {"k": "P2D"}
    assert row["list_of_varints"] == [1, None]
    assert row["map_keyed_by_lists"] == {"[1, 2]": 3}
    assert row["empty_maps_in_a_list"] == [{}]

    done = cli("query", "--format", "csv",
               "SELECT INTERVAL 90 MINUTE AS i, (-5)::VARINT AS v, '\\xFF'::BLOB AS b")
    assert done.out == 'i,v,b\nPT1H30M,-5,ff\n'  # quoted only as needed


def test_parquet_keeps_what_it_can_hold_and_writes_the_rest_as_text(cli, tmp_path):
    out = tmp_path / "out.parquet"
    assert cli("query", "--format", "parquet", "--output", str(out), SQL).code == 0
    table = pq.read_table(out)
    assert table.schema.field("interval").type == pa.string()
    assert table.column("interval").to_pylist() == ["P1DT3H"]
    assert table.schema.field("decimal38").type == pa.decimal128(38, 18)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_write_leaves_no_partial_file(tmp_path, signum):
    out = tmp_path / "out.csv"
    env = {k: v for k, v in os.environ.items() if k != "ARROWGATE_CONFIG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "query", "--format", "csv", "--output", str(out),
         "SELECT i, repeat('x', 100) AS pad FROM range(100000000) t(i)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    deadline = time.monotonic() + HANG_GUARD
    while not any(p.name.endswith(".partial") and p.stat().st_size > 0
                  for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err.decode()
    assert err.decode().strip().splitlines()[-1] == f"terminated by {signal.Signals(signum).name}"
    assert list(tmp_path.iterdir()) == []


def test_output_onto_a_symlink_writes_its_target(cli, tmp_path):
    target = tmp_path / "real" / "answer.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert cli("query", "--format", "csv", "--output", str(link), "SELECT 1 AS a").code == 0
    assert link.is_symlink()
    assert target.read_text() == "a\n1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real"]
