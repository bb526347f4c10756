"""``arrowgate data taxi``: the 51-column taxi layout, deterministic, read alike by both engines."""

from __future__ import annotations

import subprocess
import sys

from gateway.cli.commands.data import TAXI_COLUMNS
from tests.csv_support import assert_same, gateway_for


def generate(path, rows, seed=0):
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "data", "taxi", "--rows",
                           str(rows), "--out", str(path), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return path.read_bytes()


def test_taxi_header_rows_and_determinism(tmp_path):
    first = generate(tmp_path / "a.csv", 2500)
    again = generate(tmp_path / "b.csv", 2500)
    other = generate(tmp_path / "c.csv", 2500, seed=1)
    assert first == again
    assert first != other
    lines = first.decode().splitlines()
    assert lines[0].split(",") == TAXI_COLUMNS and len(TAXI_COLUMNS) == 51
    assert len(lines) == 2501
    assert all(line.count(",") == 50 for line in lines[1:])


def test_taxi_queries_match_duckdb(tmp_path):
    path = tmp_path / "taxi.csv"
    generate(path, 3000)
    with gateway_for(path, chunk_bytes=64 << 10) as gw:
        assert_same(gw, "SELECT cab_type, count(*) FROM t GROUP BY cab_type")
        assert_same(gw, "SELECT passenger_count, year(pickup_datetime), round(trip_distance), "
                        "count(*) FROM t GROUP BY 1, 2, 3 ORDER BY 2, 4 DESC, 1, 3")
        assert_same(gw, "SELECT count(*) AS n, count(store_and_fwd_flag) AS flagged, "
                        "count(trip_type) AS typed, sum(total_amount) AS total FROM t")


def test_rows_must_not_be_negative(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "data", "taxi", "--rows", "-1",
                           "--out", str(tmp_path / "x.csv")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--rows" in done.stderr
