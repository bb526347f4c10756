"""The query command meets DuckDB's CLI and psql habits: the output file's extension picks
the format, ``-c`` and several statements in one session, CSV quoted as needed with a
chosen null text, and errors named with the engine's own words."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.output.writers import EXTENSIONS

SQL = "SELECT range AS x FROM range(3)"


def _read(path, fmt):
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "arrow":
        return pa.ipc.open_file(path).read_all()  # the IPC file format, as .arrow means
    if fmt == "arrows":
        return pa.ipc.open_stream(path).read_all()
    if fmt == "csv":
        return path.read_text().splitlines()
    if fmt == "json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("extension", sorted(EXTENSIONS))
def test_the_extension_picks_the_format(cli, tmp_path, extension):
    out = tmp_path / f"answer{extension}"
    done = cli("query", "-o", str(out), SQL)
    assert done.code == 0, done.err
    answer = _read(out, EXTENSIONS[extension])
    if isinstance(answer, pa.Table):
        assert answer.column("x").to_pylist() == [0, 1, 2]
    elif extension == ".csv":
        assert answer == ["x", "0", "1", "2"]
    else:
        assert [row["x"] for row in answer] == [0, 1, 2]


def test_an_uppercase_extension_counts_and_none_writes_the_table(cli, tmp_path):
    assert cli("query", "-o", str(tmp_path / "A.PARQUET"), SQL).code == 0
    assert pq.read_table(tmp_path / "A.PARQUET").num_rows == 3
    assert cli("query", "-o", str(tmp_path / "plain"), SQL).code == 0
    assert "| x " in (tmp_path / "plain").read_text()


def test_an_unknown_extension_is_refused_naming_the_known_ones(cli, tmp_path):
    done = cli("query", "-o", str(tmp_path / "answer.xlsx"), SQL)
    assert done.code == 2
    assert "cannot tell the format of" in done.err and ".parquet, .arrow, .feather" in done.err
    assert "--format" in done.err
    assert list(tmp_path.iterdir()) == []
    assert cli("query", "--format", "csv", "-o", str(tmp_path / "answer.xlsx"), SQL).code == 0


def test_a_format_that_contradicts_the_extension_is_refused(cli, tmp_path):
    done = cli("query", "--format", "csv", "-o", str(tmp_path / "x.parquet"), SQL)
    assert done.code == 2
    assert "--format csv contradicts" in done.err and "parquet" in done.err
    assert list(tmp_path.iterdir()) == []
    assert cli("query", "--format", "arrow", "-o", str(tmp_path / "x.feather"), SQL).code == 0
    assert cli("query", "--format", "arrows", "-o", str(tmp_path / "x.arrow"), SQL).code == 2


def test_format_arrow_writes_what_open_file_reads(capsysbinary, monkeypatch, tmp_path):
    from gateway.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["query", "--format", "arrow", SQL]) == 0
    data = capsysbinary.readouterr().out
    assert pa.ipc.open_file(pa.BufferReader(data)).read_all().column("x").to_pylist() == [0, 1, 2]
    assert main(["query", "--format", "arrows", SQL]) == 0
    data = capsysbinary.readouterr().out
    assert pa.ipc.open_stream(io.BytesIO(data)).read_all().num_rows == 3


def test_dash_c_runs_the_sql(cli):
    done = cli("query", "--format", "csv", "-c", "SELECT 42 AS answer")
    assert done.code == 0 and done.out == "answer\n42\n"


def test_several_statements_run_in_order_in_one_session(cli):
    # a temporary table lives in its session alone: the second statement sees it only there
    done = cli("query", "--format", "csv", "-c", "CREATE TEMP TABLE t AS SELECT 7 AS a",
               "-c", "SELECT a FROM t; SELECT a + 1 AS b FROM t")
    assert done.code == 0, done.err
    assert done.out == "Count\n1\na\n7\nb\n8\n"  # each answer, DuckDB's CREATE one too
    done = cli("query", "--format", "csv",
               "SET threads = 1; SELECT current_setting('threads') AS n")
    assert done.code == 0, done.err
    assert done.out == "n\n1\n"


def test_several_statements_stop_at_the_first_error_with_its_exit_code(cli, tmp_path):
    done = cli("query", "--format", "csv", "-c", "SELECT 1 AS a", "-c", "SELECT nope",
               "-c", "SELECT 3 AS c")
    assert done.code == 1
    assert done.out == "a\n1\n"
    assert "nope" in done.err
    out = tmp_path / "x.csv"
    assert cli("query", "-o", str(out), "-c", "SELECT 1 AS a; SELECT nope").code == 1
    assert not out.exists()  # whole or not at all


def test_several_statements_into_a_binary_file_keep_the_last_answer(cli, tmp_path):
    out = tmp_path / "x.parquet"
    done = cli("query", "-o", str(out), "-c",
               "CREATE TEMP TABLE t AS SELECT 5 AS a; SELECT 1 AS first; SELECT a FROM t")
    assert done.code == 0, done.err
    assert pq.read_table(out).to_pydict() == {"a": [5]}
    assert "1 row from duckdb" in done.err  # the earlier answer is still reported


def test_dash_c_and_other_sql_or_parameters_for_several_are_refused(cli):
    both = cli("query", "-c", "SELECT 1", "SELECT 2")
    assert both.code == 2 and "give the SQL one way" in both.err
    params = cli("query", "-p", "1", "-c", "SELECT ?; SELECT 2")
    assert params.code == 2 and "-p gives values to one statement" in params.err


def test_csv_quotes_only_what_needs_quoting(cli):
    done = cli("query", "--format", "csv",
               "SELECT 'abc' AS s, 'a,b' AS t, 'say \"hi\"' AS q, NULL AS n, '' AS e, 1.5 AS f")
    assert done.code == 0, done.err
    assert done.out == 's,t,q,n,e,f\nabc,"a,b","say ""hi""",,"",1.5\n'


def test_csv_nullvalue(cli):
    done = cli("query", "--format", "csv", "--nullvalue", "NULL",
               "SELECT NULL AS n, 'NULL' AS s, 2 AS i")
    assert done.code == 0, done.err
    assert done.out == 'n,s,i\nNULL,"NULL",2\n'  # the text NULL stays apart from a NULL


@pytest.mark.parametrize(("sql", "label"), [
    ("SELECT a FROM (SELECT 1 AS a, 2 AS b) GROUP BY b", "Binder Error"),
    ("SELECT nope", "Binder Error"),
    ("SELECT * FROM no_such_table", "Catalog Error"),
    ("SELEC 1", "Parser Error"),
])
def test_errors_are_named_in_the_engines_own_words(cli, sql, label):
    done = cli("query", sql)
    assert done.code == 1
    assert done.err.startswith(f"{label}: [duckdb] ")
    assert done.err.count(label) == 1
    assert "syntax error:" not in done.err
