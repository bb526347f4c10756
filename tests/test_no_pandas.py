"""No query path imports pandas (about 0.2 s of a one-row ``arrowgate query``).

pyarrow imports pandas, where it is installed, on the first ``pa.array`` or
``pa.scalar`` of a process (:mod:`gateway.drivers.arrow_values` says more). The dev
extra installs pandas, so these tests see what a data engineer's machine does.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import DATA

pytest.importorskip("pandas")


def _pandas_after(config: dict, *commands: list[str]) -> bool:
    """Run each ``arrowgate`` command in one fresh process; whether pandas was imported."""
    code = ("import json, sys, tempfile\n"
            "from gateway.cli.main import main\n"
            "with tempfile.NamedTemporaryFile('w', suffix='.toml', delete=False) as f:\n"
            f"    f.write({_toml(config)!r})\n"
            f"for args in {list(commands)!r}:\n"
            "    assert main(['--config', f.name, *args]) == 0, args\n"
            "print('pandas' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()[-1] == "True"


def _toml(config: dict) -> str:
    lines = []
    for section, entries in config.items():
        for name, values in entries.items():
            lines.append(f"[{section}.{name}]")
            lines.extend(f"{key} = {value!r}" for key, value in values.items())
    return "\n".join(lines).replace("'", '"') + "\n"


def _queries(out: str) -> list[list[str]]:
    sqls = ["SELECT count(*) AS n FROM trips",
            "SELECT passenger_count, count(*) AS n, sum(trip_distance) AS d FROM trips "
            "GROUP BY 1 ORDER BY 1",
            "SELECT STRFTIME('%Y', pickup_datetime) AS y, count(*) AS n FROM trips "
            "GROUP BY 1 ORDER BY 1",
            "SELECT * FROM trips WHERE 1 = 0"]
    return [["query", "--format", fmt, *(["--output", f"{out}.{fmt}"] if fmt in ("arrow", "parquet")
                                         else []), sql]
            for sql in sqls for fmt in ("table", "csv", "json", "arrow", "parquet")]


def test_a_duckdb_query_imports_no_pandas_in_any_format(tmp_path):
    """Columns a format cannot hold (LIST, STRUCT, INTERVAL, BLOB) are written as text."""
    nested = ("SELECT [1, NULL] AS l, {'a': 1} AS s, INTERVAL 1 DAY AS i, "
              "'x'::BLOB AS b, 1.5::DECIMAL(10, 2) AS d")
    config = {"engines": {"duck": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    commands = [*_queries(str(tmp_path / "out")),
                *[["query", "--format", fmt, *(["--output", str(tmp_path / f"n.{fmt}")]
                                              if fmt == "parquet" else []), nested]
                  for fmt in ("table", "csv", "json", "parquet")]]
    assert not _pandas_after(config, *commands)


CSV = {"engines": {"scan": {"type": "csv"}},
       "sources": {"trips": {"path": str(DATA / "trips.csv")}}}


def test_a_csv_query_imports_no_pandas(tmp_path):
    assert not _pandas_after(CSV, *_queries(str(tmp_path / "out")))


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM trips",
    "SELECT count(*) FROM trips WHERE passenger_count > 2",
    "SELECT passenger_count, sum(trip_distance), avg(total_amount), "
    "count(DISTINCT payment_type) FROM trips GROUP BY passenger_count",
    "SELECT cab_type, min(tip_amount), max(tip_amount) FROM trips GROUP BY cab_type "
    "HAVING count(*) > 1",
    "SELECT trip_id FROM trips WHERE tip_amount = 'nan' OR tip_amount IS NULL "
    "OR tip_amount > 1.5 OR fare_amount IN (5.97, NULL) OR NULL",
    "SELECT passenger_count, STRFTIME('%Y', pickup_datetime) AS y, count(*) FROM trips "
    "GROUP BY passenger_count, y",
    "SELECT strftime(pickup_datetime, '%-d %-I %p %f') AS t, "
    "date_part('century', pickup_datetime) AS c FROM trips",
    "SELECT trip_id, round(trip_distance, 1) AS r FROM trips ORDER BY trip_distance DESC, "
    "trip_id LIMIT 5",
    "SELECT DISTINCT cab_type, CASE WHEN tip_amount > 1 THEN 'tip' END AS t FROM trips",
    "SELECT * FROM trips WHERE 1 = 0",
], ids=["fused-count", "fused-count-where", "group-by", "having-min-max", "where-null-nan",
        "strftime-group-by", "strftime", "order-limit", "distinct", "empty"])
def test_each_csv_query_shape_imports_no_pandas(sql):
    assert not _pandas_after(CSV, ["query", "--format", "csv", sql])
