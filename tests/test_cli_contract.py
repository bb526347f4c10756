"""The command line as users and CI scripts write it.

Options before and after positional arguments, ``--config`` before and after
the command, ``-`` for stdin, a configuration from the environment, and
``--help`` of every command and action: each exits with its documented code
and never prints a traceback.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from gateway.cli.main import _subcommands, build_parser
from tests.conftest import QUICKSTART, ROOT, run_arrowgate

CORPUS = ROOT / "examples" / "quickstart" / "queries.sql"
CONFIG = str(QUICKSTART)
SHADOW = ["--primary", "scan", "--reference", "duck"]


def _every_command() -> list[str]:
    return [parser.prog.removeprefix("arrowgate ") for parser in _subcommands(build_parser())]


@pytest.fixture
def two_engines(tmp_path: Path) -> str:
    config = tmp_path / "two.toml"
    config.write_text('[engines.a]\ntype = "duckdb"\n[engines.b]\ntype = "duckdb"\n')
    return str(config)


def _clean(err: str) -> None:
    assert "Traceback" not in err, err


@pytest.mark.parametrize("command", _every_command())
def test_every_command_and_action_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*command.split(), "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: arrowgate {command}")
    assert "example" in shown, f"arrowgate {command} --help shows no example"


def test_data_taxi_help_is_the_data_sets_own(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["data", "taxi", "--help"])
    assert capsys.readouterr().out.startswith("usage: arrowgate data taxi")


@pytest.mark.parametrize("argv", [
    [*SHADOW, str(CORPUS), "--json", "{out}", "--no-store"],  # the CI script's order
    [str(CORPUS), *SHADOW, "--json", "{out}", "--no-store"],
    ["--json", "{out}", str(CORPUS), *SHADOW, "--no-store"],
    ["run", str(CORPUS), *SHADOW, "--json", "{out}", "--no-store"],
], ids=["options-around-path", "options-after-path", "options-before-path", "run-action"])
@pytest.mark.parametrize("where", ["config-first", "config-last"])
def test_shadow_takes_its_options_before_and_after_the_paths(cli, tmp_path, argv, where):
    out = tmp_path / "out.json"
    argv = [a.replace("{out}", str(out)) for a in argv]
    args = (["--config", CONFIG, "shadow", *argv] if where == "config-first"
            else ["shadow", *argv, "--config", CONFIG])
    done = cli(*args)
    assert done.code == 0, done.err
    _clean(done.err)
    assert json.loads(out.read_text())["summary"]["queries"] == 5


def test_shadow_report_still_is_an_action(cli, tmp_path, two_engines):
    store = tmp_path / "store"
    assert cli("shadow", "--primary", "a", "--reference", "b", str(one_query_corpus(tmp_path)),
               "--store", str(store), "--config", two_engines).code == 0
    for argv in (["shadow", "report", "--store", str(store)],
                 ["shadow", "--store", str(store), "report", "--top", "1"],
                 ["shadow", "report", "--store", str(store), "--config", two_engines]):
        done = cli(*argv)
        assert done.code == 0, done.err
        assert done.out.startswith(f"1 records in {store}")


def one_query_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "one.sql"
    path.write_text("SELECT 42 AS answer;\n")
    return path


def test_shadow_reads_its_corpus_from_stdin(two_engines):
    done = run_arrowgate("shadow", "--primary", "a", "--reference", "b", "-", "--no-store",
                         "--config", two_engines, input="-- name: one\nSELECT 1;\n")
    assert done.returncode == 0, done.stderr
    assert " one  match" in done.stdout


@pytest.mark.parametrize("argv", [
    ["--config", CONFIG, "query", "SELECT 1 AS a", "--format", "csv"],
    ["query", "--format", "csv", "SELECT 1 AS a", "--config", CONFIG],
    ["query", "-", "--format", "csv"],
    ["query", "--format", "csv", "-f", "-"],
])
def test_query_takes_options_and_config_anywhere_and_dash_for_stdin(argv):
    done = run_arrowgate(*argv, input="SELECT 1 AS a")
    assert (done.returncode, done.stdout) == (0, "a\n1\n"), done.stderr
    _clean(done.stderr)


def test_the_configuration_from_the_environment(tmp_path):
    done = run_arrowgate("sources", env={"ARROWGATE_CONFIG": CONFIG}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "trips" in done.stdout


@pytest.mark.parametrize("command", [
    "query", "query --format nope 'SELECT 1'", "query --max-rows x 'SELECT 1'",
    "shadow", "shadow report --top x", "bench --rounds 0", "data", "data taxi", "data taxi --rows x",
    "tui -c 'SELECT 1'", "tui --headless", "nosuchcommand", "engines --nope",
    "query -p n:blob=1 'SELECT ?'",
])
def test_usage_errors_exit_2_without_a_traceback(command):
    done = run_arrowgate(*shlex.split(command), input="")
    assert done.returncode == 2, done.stderr
    _clean(done.stderr)
    assert "error" in done.stderr


def test_a_usage_error_of_the_console_names_the_command(cli):
    done = cli("tui", "-c", "SELECT 1")
    assert done.code == 2
    assert done.err.startswith("arrowgate tui: error: -c runs only with --headless")


def test_a_plugin_name_not_installed_is_reported_as_such(cli, monkeypatch):
    monkeypatch.setenv("ARROWGATE_PLUGINS", "duckdb,nosuch")
    done = cli("engines")
    assert done.code == 2
    assert done.err.startswith("configuration error: ARROWGATE_PLUGINS names plugins that are "
                               "not installed: nosuch (installed: ")
    assert "failed to add its commands" not in done.err


@pytest.mark.parametrize(("value", "duckdb_type"), [
    ("42", "INTEGER"), ("-7", "INTEGER"), ("4.20", "DECIMAL(3,2)"), ("true", "BOOLEAN"),
    ("FALSE", "BOOLEAN"), ("NULL", "NULL"), ("hello", "VARCHAR"), ("zip:text=02139", "VARCHAR"),
    (":date=2024-01-02", "DATE"), ("n:int=5", "INTEGER"), ("x:float=1.5", "DOUBLE"),
])
def test_parameters_are_typed(cli, value, duckdb_type):
    done = cli("query", "--format", "csv", "SELECT typeof(?) AS t", "-p", value)
    assert done.code == 0, done.err
    assert done.out.splitlines()[1].strip('"') == duckdb_type


def test_an_integer_parameter_compares_with_an_integer_column(cli):
    done = cli("query", "--format", "csv",
               "SELECT x FROM (VALUES (1), (2)) t(x) WHERE x = ? AND ? IS NULL", "-p", "2",
               "-p", "NULL")
    assert (done.code, done.out) == (0, "x\n2\n"), done.err


def test_sqlglot_warnings_never_reach_the_terminal():
    done = run_arrowgate("--config", CONFIG, "query", "-e", "scan", "PREPARE p AS SELECT 1")
    assert "Falling back to parsing" not in done.stderr
    _clean(done.stderr)


def test_an_answer_without_columns_says_so():
    import io

    import pyarrow as pa

    from gateway.output.writers import write

    out = io.BytesIO()
    write(pa.RecordBatchReader.from_batches(pa.schema([]), []), "table", out)
    assert out.getvalue() == b"(no columns)\n"


def test_one_row_is_one_row(cli, tmp_path):
    done = cli("data", "taxi", "--rows", "1", "--out", str(tmp_path / "t.csv"))
    assert done.code == 0
    assert done.err.startswith(f"wrote 1 row to {tmp_path / 't.csv'}")


@pytest.mark.postgres
def test_an_integer_parameter_reaches_postgresql_as_an_integer(cli, postgres, tmp_path):
    from tests import sql_databases as db

    name = db.new_pg_database(postgres)
    postgres.psql("CREATE TABLE t (id int, zip text); INSERT INTO t VALUES (1, '02139'), "
                  "(2, '10001')", dbname=name)
    config = tmp_path / "pg.toml"
    config.write_text(f'[engines.pg]\ntype = "adbc"\ndriver = "postgresql"\n'
                      f'uri = "{postgres.uri(name)}"\n')
    done = cli("--config", str(config), "query", "--format", "csv",
               "SELECT id FROM t WHERE id = ? AND zip = ?", "-p", "1", "-p", "zip:text=02139")
    assert (done.code, done.out) == (0, "id\n1\n"), done.err


@pytest.mark.parametrize(("argv", "expected"), [
    (["bench", "q.sql", "--engines", "a,b", "--rounds", "3"], {"paths": ["q.sql"], "rounds": 3}),
    (["bench", "--engines", "a,b", "q.sql", "--config", "c.toml"], {"config": "c.toml"}),
    (["lake", "check", "lake", "--format", "json", "--config", "c.toml"],
     {"engine": "lake", "config": "c.toml"}),
    (["engines", "install", "duckdb==1.5.5", "--config", "c.toml"], {"config": "c.toml"}),
    (["serve", "--port", "0", "--config", "c.toml"], {"port": 0, "config": "c.toml"}),
    (["--config", "c.toml", "fuzz", "--primary", "a", "--reference", "b", "--source", "t"],
     {"config": "c.toml", "source": "t"}),
    (["--config", "c.toml", "shadow", "report"], {"config": "c.toml"}),
    (["data", "taxi", "--rows", "5", "--out", "t.csv", "--config", "c.toml"],
     {"rows": 5, "config": "c.toml"}),
    (["query", "-p", "7", "SELECT ?", "-p", "x:text=7"], {"param": [7, "7"]}),
])
def test_options_and_config_parse_in_any_position(argv, expected):
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected


def test_a_missing_extra_names_the_packages_to_install(cli, monkeypatch):
    """There is no arrowgate release on a package index: 'pip install arrowgate[tui]' fails."""
    import sys

    monkeypatch.setitem(sys.modules, "textual", None)
    monkeypatch.delitem(sys.modules, "gateway.tui.app", raising=False)
    done = cli("tui")
    assert done.code == 2
    # the packages by name (arrowgate is on no package index), and the extra's name
    assert "pip install textual textual-fastdatatable textual-textarea" in done.err
    assert "tui extra" in done.err

    from gateway.benchmark.chart import latency_chart
    from gateway.benchmark.runner import BenchReport
    from gateway.errors import GatewayError

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    report = BenchReport(engines=["a"], baseline="a", rounds=1, warmup=0, queries=[])
    with pytest.raises(GatewayError) as failed:
        latency_chart(report, Path("chart"))
    assert failed.value.hint == \
        "pip install matplotlib (arrowgate's chart extra), or leave out --chart"
