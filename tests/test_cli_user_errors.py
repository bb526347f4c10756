"""No user error ends in a traceback: every command, given bad arguments, says what was wrong in
a line or two and exits non-zero; Ctrl-C exits 130 on every engine type."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.hang_guard import HANG_GUARD
from tests.lakes import DUCKDB

CONFIG = f'''
[engines.duck]
type = "duckdb"
[engines.scan]
type = "csv"
[engines.lake]
type = "ducklake"
duckdb = "{DUCKDB}"
catalog = "sqlite:lake.sqlite"
data_path = "lake-data/"
'''

BAD = [
    ("query", "-f", "{missing}"),
    ("query", "-f", "{latin1}"),
    ("query", "-f", "{folder}"),
    ("query", "--format", "xml", "SELECT 1"),
    ("query", "--max-rows", "many", "SELECT 1"),
    ("query", "-e", "nosuch", "SELECT 1"),
    ("query", "--shadow", "nosuch", "SELECT 1"),
    ("query", "SELEC 1"),
    ("query", "   "),
    ("query", "SELECT 1", "-f", "{latin1}"),
    ("query", "--output", "{folder}/no/such/dir/x.csv", "SELECT 1"),
    ("query", "--output", "{folder}", "SELECT 1"),
    ("query", "-e", "scan", "SELECT * FROM nothing_here"),
    ("query", "-p", "1", "SELECT ? + ?"),
    ("engines", "--bogus"),
    ("engines", "install", "postgres==1.0"),
    ("sources", "extra"),
    ("lake",),
    ("lake", "check"),
    ("lake", "check", "nosuch"),
    ("lake", "check", "duck"),
    ("lake", "check", "lake", "--format", "xml"),
    ("lakebench", "nosuch"),
    ("lakebench", "--tables", "-1"),
    ("data", "taxi", "--rows", "-1", "--out", "x.csv"),
    ("data", "taxi", "--rows", "10", "--out", "{folder}/no/such/dir/x.csv"),
    ("data", "nope", "--rows", "1", "--out", "x.csv"),
    ("shadow", "{missing}"),
    ("shadow", "{latin1}", "--reference", "duck"),
    ("shadow", "report", "--store", "/nonexistent"),
    ("shadow", "{folder}", "--reference", "nosuch"),
    ("shadow", "--top", "x", "report"),
    ("bench", "{missing}", "--engines", "duck"),
    ("bench", "{latin1}", "--engines", "duck"),
    ("bench", "{folder}", "--engines", "nosuch"),
    ("bench", "{folder}", "--engines", "duck", "--rounds", "0"),
    ("--config", "{missing}", "engines"),
    ("--config", "{latin1}", "engines"),
    ("nocommand",),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "arrowgate.toml").write_text(CONFIG)
    latin1 = tmp_path / "latin1.sql"
    latin1.write_bytes("SELECT 'caf\xe9' AS x".encode("latin-1"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "q.sql").write_text("SELECT 1 AS one\n")
    return {"missing": str(tmp_path / "missing.sql"), "latin1": str(latin1),
            "folder": str(folder)}


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) for a in BAD])
def test_bad_arguments_give_a_message_not_a_traceback(args, files, cli):
    argv = [a.format(**files) for a in args]
    try:
        run = cli(*argv)
        code, err = run.code, run.err
    except SystemExit as exc:  # argparse's own usage errors
        code, err = exc.code, ""
    assert code not in (0, None), err
    assert "Traceback" not in err
    assert "error error" not in err
    if err:  # DuckDB's parser errors add the line and a caret under it
        assert len(err.strip().splitlines()) <= 4, err


def test_a_file_that_is_not_utf8_names_the_file_and_the_byte(files, cli):
    run = cli("query", "-f", files["latin1"])
    assert run.code == 2
    assert f"{files['latin1']}: not UTF-8: byte 0xe9 at line 1, column 12" in run.err


def test_a_missing_shadow_store_is_one_plain_error(cli):
    run = cli("shadow", "report", "--store", "/nonexistent")
    assert run.code != 0
    assert run.err.startswith("error: no shadow records in /nonexistent"), run.err


ENGINES = {
    "duckdb_in_process": '[engines.e]\ntype = "duckdb"\n',
    "duckdb_adbc": f'[engines.e]\ntype = "duckdb"\nversion = "{DUCKDB}"\n',
    "duckdb_worker": '[engines.e]\ntype = "duckdb"\nisolation = "process"\n',
    "ducklake": f'[engines.e]\ntype = "ducklake"\nduckdb = "{DUCKDB}"\n'
                'catalog = "sqlite:lake.sqlite"\ndata_path = "lake-data/"\n',
}


def _child_env() -> dict[str, str]:
    """The environment of an arrowgate child process: this checkout, no ARROWGATE_CONFIG."""
    env = {k: v for k, v in os.environ.items() if k != "ARROWGATE_CONFIG"}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_ctrl_c_exits_130_on_every_engine_type(kind, tmp_path):
    (tmp_path / "arrowgate.toml").write_text(ENGINES[kind])
    env = _child_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "query",
         "SELECT count(*) FROM range(100000000000) a"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(5)  # the engine is (mostly) started; a signal during its setup counts too
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert err.decode().strip().splitlines()[-1] == "interrupted"


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
@pytest.mark.parametrize("after", [0.2, 0.7, 1.5])
def test_ctrl_c_while_duckdb_runs_stops_it_every_time(after, tmp_path):
    """DuckDB 2.0's Python client often swallows the KeyboardInterrupt while a query
    runs (about 6 times in 10 here), and the query then ran to its end: the CLI now
    also cancels the running queries from a thread of its own."""
    (tmp_path / "arrowgate.toml").write_text(ENGINES["duckdb_in_process"])
    env = _child_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "query",
         "SELECT count(*) FROM range(100000000000) a"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while _threads(proc.pid) < 3 and time.monotonic() < deadline:  # DuckDB's pool is up
            time.sleep(0.02)
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err.decode()
    assert err.decode().strip().splitlines()[-1] == "interrupted"


def test_a_source_duckdb_cannot_read_is_named_with_its_file_and_line(tmp_path, cli):
    big = tmp_path / "oneline.csv"
    big.write_text("a\n" + "x" * (3 << 20) + "\n")  # a field over DuckDB's 2 MB line limit
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'[engines.d]\ntype = "duckdb"\n[sources.big]\npath = "{big}"\n')
    run = cli("--config", str(config), "query", "SELECT count(*) FROM big")
    assert run.code == 1
    assert f"cannot mount the source big ({big}): " in run.err and "Line: 1" in run.err
    assert len(run.err) < 500


def test_config_may_follow_the_command(tmp_path, cli):
    """`arrowgate serve --config F` is what serve's own help shows; it was refused as an
    unrecognized argument, since --config was an option of `arrowgate` only."""
    config = tmp_path / "mine.toml"
    config.write_text('[engines.mine]\ntype = "duckdb"\n')
    after = cli("query", "--config", str(config), "SELECT 1 AS x")
    before = cli("--config", str(config), "query", "SELECT 1 AS x")
    assert after.code == before.code == 0, after.err
    assert "from mine" in after.err and "from mine" in before.err


def test_the_console_script_is_the_guarded_entry():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["arrowgate"] == "gateway.cli:console"


@pytest.mark.parametrize("after", [0.005, 0.02, 0.04, 0.08])
def test_ctrl_c_while_the_command_starts_is_no_traceback(after, tmp_path):
    """A Ctrl-C while the command's modules import (pluggy's alone took 35 ms) came before
    the CLI's handler and printed a KeyboardInterrupt traceback."""
    env = _child_env()
    # -X importtime writes a line as each import ends: once gateway.cli.startup's is out,
    # console() runs (a signal before it, in the interpreter's own start and the ~7 ms
    # of `import gateway`, is as any Python program's)
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-c",
         "from gateway.cli import console; console()", "query", "SELECT 42"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.rstrip().endswith(b"| gateway.cli.startup"):
                break
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # -X importtime's lines, which an import still running in another thread (an
    # engine's start) may write into the middle of "interrupted" and its line end
    err = re.sub(r"import time:[^\n]*", "", (b"".join(seen) + err).decode())
    assert "Traceback" not in err, err[-2000:]
    assert proc.returncode in (0, 130), err[-2000:]
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1] == "interrupted", err[-2000:]
