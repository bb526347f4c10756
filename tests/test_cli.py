"""The arrowgate command: output formats, input modes, exit codes and help."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.cli.main import COMMANDS, build_parser
from tests.conftest import QUICKSTART, run_arrowgate


def test_query_prints_a_table(cli):
    run = cli("query", "SELECT 42 AS answer")
    assert run.code == 0
    assert "| answer |" in run.out
    assert "|     42 |" in run.out
    assert "1 row from duckdb" in run.err


def test_query_csv(cli):
    run = cli("query", "--format", "csv", "SELECT 42 AS answer")
    assert run.code == 0
    assert run.out == "answer\n42\n"


def test_query_csv_round_trips_awkward_values(cli):
    import csv

    run = cli("query", "--format", "csv",
              "SELECT 'a,b' AS \"x,y\", 'say \"hi\"' AS q, E'two\\nlines' AS nl, NULL AS n")
    assert run.out.startswith('"x,y",q,nl,n\n')
    rows = list(csv.reader(io.StringIO(run.out)))
    assert rows == [["x,y", "q", "nl", "n"], ["a,b", 'say "hi"', "two\nlines", ""]]


def test_query_json_and_ndjson(cli):
    sql = "SELECT * FROM (VALUES (1, 'x'), (2, NULL)) t(a, b) ORDER BY a"
    assert json.loads(cli("query", "--format", "json", sql).out) == [
        {"a": 1, "b": "x"}, {"a": 2, "b": None}]
    lines = cli("query", "--format", "ndjson", sql).out.splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]


def test_query_arrow_stream_to_stdout(capsysbinary, monkeypatch, tmp_path):
    from gateway.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["query", "--format", "arrows", "SELECT range AS x FROM range(5)"]) == 0
    table = pa.ipc.open_stream(io.BytesIO(capsysbinary.readouterr().out)).read_all()
    assert table.column("x").to_pylist() == [0, 1, 2, 3, 4]


def test_query_parquet_to_file(cli, tmp_path):
    out = tmp_path / "answer.parquet"
    run = cli("query", "--format", "parquet", "--output", str(out),
              "SELECT range AS x FROM range(1000)")
    assert run.code == 0
    assert pq.read_table(out).num_rows == 1000
    assert "1000 rows" in run.err


def test_failed_query_leaves_no_output_file(cli, tmp_path):
    out = tmp_path / "answer.csv"
    run = cli("query", "--format", "csv", "--output", str(out), "SELECT * FROM missing_table")
    assert run.code == 1
    assert not out.exists()


def test_query_from_file_and_stdin(cli, tmp_path):
    sql_file = tmp_path / "q.sql"
    sql_file.write_text("SELECT 7 AS seven")
    assert cli("query", "--format", "csv", "-f", str(sql_file)).out == "seven\n7\n"
    done = run_arrowgate("query", "--format", "csv", input="SELECT 8 AS eight")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "eight\n8\n"


def test_query_parameters(cli):
    run = cli("query", "--format", "csv", "-p", "5", "SELECT CAST(? AS INTEGER) * 2 AS doubled")
    assert run.out == "doubled\n10\n"


def test_sql_error_exits_1_with_the_engines_message(cli):
    run = cli("query", "SELECT * FROM no_such_table")
    assert run.code == 1
    assert "[duckdb]" in run.err
    assert "no_such_table" in run.err
    assert "Traceback" not in run.err


def test_usage_errors_exit_2(cli, tmp_path):
    assert cli("query", "SELECT 1", "-f", "x.sql").code == 2
    assert cli("query", "   ").code == 2
    missing = cli("query", "-f", str(tmp_path / "nope.sql"))
    assert missing.code == 2 and "cannot read" in missing.err
    with pytest.raises(SystemExit) as info:
        cli("query", "--format", "xml", "SELECT 1")
    assert info.value.code == 2


def test_unknown_engine_is_a_configuration_error(cli):
    run = cli("query", "--engine", "nope", "SELECT 1")
    assert run.code == 2
    assert "no engine named 'nope'" in run.err
    assert "configured engines: duckdb" in run.err


def test_config_from_flag_env_and_working_directory(cli, monkeypatch, tmp_path):
    sql = "SELECT count(*) AS n FROM trips"
    assert cli("--config", str(QUICKSTART), "query", "--format", "csv", sql).out == "n\n400\n"
    monkeypatch.setenv("ARROWGATE_CONFIG", str(QUICKSTART))
    assert cli("query", "--format", "csv", sql).out == "n\n400\n"
    monkeypatch.delenv("ARROWGATE_CONFIG")
    (tmp_path / "arrowgate.toml").write_text(
        f'[engines.here]\ntype = "duckdb"\n[sources.trips]\npath = "{QUICKSTART.parent.parent}/data/trips.csv"\n')
    run = cli("query", "--format", "csv", sql)
    assert run.out == "n\n400\n"


def test_engines_lists_without_importing_the_driver():
    code = (f"import sys; from gateway.cli.main import main; main(['--config', {str(QUICKSTART)!r}, "
            "'engines']); "
            "print('DRIVER-IMPORTED' if 'duckdb' in sys.modules else 'driver-not-imported')")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "driver-not-imported" in done.stdout
    assert "scan *" in done.stdout  # the default engine is marked
    assert "streaming,parameters,cancel,write,catalog" in done.stdout


def test_engines_types_lists_entry_points(cli):
    run = cli("engines", "--types")
    assert run.code == 0
    assert "duckdb" in run.out and "gateway_duckdb" in run.out


def test_sources_lists_files(cli):
    run = cli("--config", str(QUICKSTART), "sources")
    assert run.code == 0
    assert "trips" in run.out and "zones" in run.out


def _all_commands() -> dict[str, argparse.ArgumentParser]:
    """The core commands and those the installed plugins register."""
    return next(a for a in build_parser()._actions if a.dest == "command").choices


def test_the_core_commands_come_first():
    assert list(_all_commands())[:len(COMMANDS)] == COMMANDS


@pytest.mark.parametrize("command", list(_all_commands()))
def test_every_command_has_help_with_an_example(command):
    text = _all_commands()[command].format_help()
    assert "example" in text
    assert "exit codes" in text


def test_no_command_prints_help_and_exits_2(cli):
    run = cli()
    assert run.code == 2
    assert "query" in run.err


def _run_entry(prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = (f"import sys, atexit, threading, gateway.cli.main\n{prelude}\n"
            f"sys.argv = ['arrowgate', *{list(args)!r}]\ngateway.cli.main.entry()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


TEARDOWN_WITNESS = """
class Witness:
    def __del__(self):
        print('module teardown ran', flush=True)
witness = Witness()
atexit.register(lambda: print('exit handler ran', flush=True))
"""


def test_the_console_script_skips_module_teardown_but_runs_exit_handlers():
    done = _run_entry(TEARDOWN_WITNESS, "query", "--format", "csv", "SELECT 42 AS answer")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer", "42", "exit handler ran"]


def test_the_console_script_keeps_its_exit_code():
    done = _run_entry("", "query", "SELECT * FROM no_such_table")
    assert done.returncode == 1
    assert "no_such_table" in done.stderr


def test_the_console_script_waits_for_a_running_thread():
    prelude = TEARDOWN_WITNESS + (
        "import time\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', flush=True)))"
        ".start()\n")
    done = _run_entry(prelude, "query", "--format", "csv", "SELECT 1 AS one")
    assert done.returncode == 0, done.stderr
    assert "thread done" in done.stdout and "exit handler ran" in done.stdout
