"""Starting the csv engine pays for the planner, not the first query; a bad source fails alone."""

from __future__ import annotations

import subprocess
import sys

import gateway
from tests.conftest import DATA


def test_a_bad_source_fails_its_queries_not_the_engine(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\r\n1,2\n3,4\r\n")  # mixed line ends: no dialect reads it
    config = {"engines": {"scan": {"type": "csv"}},
              "sources": {"bad": {"path": str(bad)},
                          "trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py() == 400
        try:
            gw.execute("SELECT count(*) FROM bad").to_arrow()
        except gateway.GatewayError as exc:
            assert exc.engine == "scan"
        else:
            raise AssertionError("a malformed file answered a query")


#: a program's first lines: pandas cannot be imported (when it is installed, as the dev
#: extra has it for a Flight SQL client, pyarrow imports it, and pyarrow.compute with it,
#: on the first ``pa.array(list)`` of any program: pyarrow's cost, not the scanner's)
NO_PANDAS = ("import sys\n"
             "class NoPandas:\n"
             "    def find_spec(self, name, *args):\n"
             "        if name.split('.')[0] == 'pandas':\n"
             "            raise ModuleNotFoundError(name)\n"
             "sys.meta_path.insert(0, NoPandas())\n")


def test_a_sorted_aggregation_leaves_pyarrow_compute_unimported():
    """Importing pyarrow.compute costs ~100 ms of a one-shot ``arrowgate query``."""
    code = (
        NO_PANDAS +
        "import gateway\n"
        f"config = {{'engines': {{'scan': {{'type': 'csv'}}}}, "
        f"'sources': {{'trips': {{'path': {str(DATA / 'trips.csv')!r}}}}}}}\n"
        "with gateway.connect(config) as gw:\n"
        "    table = gw.execute('SELECT passenger_count, round(trip_distance) AS d, count(*) AS n '\n"
        "                       'FROM trips GROUP BY 1, 2 ORDER BY 2 DESC NULLS FIRST, 3, 1'"
        ").to_arrow()\n"
        "print(table.num_rows > 1, 'pyarrow.compute' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]


def test_a_shadowed_statement_is_timed_after_the_engines_imports():
    """A shadow compares the engines' latencies: the csv engine's first statement must
    not carry pyarrow.compute's and the planner's import (60-120 ms), which made the
    README's first shadowed query show the scanner at 4x DuckDB's time on 400 rows
    (Engine.warm runs untimed before both sides). Unshadowed, nothing is warmed."""
    code = (
        NO_PANDAS +
        "import gateway\n"
        "from gateway_csv.engine import CsvEngine\n"
        "seen = []\n"
        "plain = CsvEngine.execute\n"
        "def execute(self, *args, **kwargs):\n"
        "    seen.append('pyarrow.compute' in sys.modules and 'sqlglot' in sys.modules)\n"
        "    return plain(self, *args, **kwargs)\n"
        "CsvEngine.execute = execute\n"
        f"config = {{'engines': {{'scan': {{'type': 'csv'}}, 'duck': {{'type': 'duckdb'}}}}, "
        f"'sources': {{'trips': {{'path': {str(DATA / 'trips.csv')!r}}}}}}}\n"
        "sql = 'SELECT cab_type, round(avg(total_amount), 2) FROM trips GROUP BY 1'\n"
        "with gateway.connect(config) as gw:\n"
        "    result = gw.execute(sql, engine='scan', shadow='duck')\n"
        "    result.to_arrow()\n"
        "    print(seen, result.shadow.category)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[True]", "match"], done.stdout + done.stderr
