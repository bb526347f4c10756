"""Outputs are atomic: a failed write leaves nothing behind and says why in one line; a reader
that goes away ends the command quietly."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT

BIG = "SELECT i, repeat('x', 50) AS pad FROM range(400000) t(i)"


def arrowgate(*args: str, stdout=subprocess.PIPE, limit: int | None = None, cwd=None):
    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if k != "ARROWGATE_CONFIG"}
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], stdout=stdout,
                          stderr=subprocess.PIPE, cwd=cwd or ROOT, env=env, timeout=120,
                          preexec_fn=limit_file_size if limit else None)


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "ndjson", "csv"])
def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(fmt, tmp_path):
    out = tmp_path / f"out.{fmt}"
    out.write_bytes(b"the previous answer")
    done = arrowgate("query", "--format", fmt, "--output", str(out), BIG, limit=200_000)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert f"cannot write {out}: File too large: nothing written" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert out.read_bytes() == b"the previous answer"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary file left


def test_a_complete_write_replaces_the_file(tmp_path):
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old")
    done = arrowgate("query", "--format", "parquet", "--output", str(out), BIG)
    assert done.returncode == 0, done.stderr.decode()
    assert pq.read_table(out).num_rows == 400_000
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # not the temporary file's mode
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_disk_full_on_a_device_output(tmp_path):
    done = arrowgate("query", "--format", "csv", "--output", "/dev/full", BIG)
    err = done.stderr.decode()
    assert done.returncode == 1 and "disk full writing /dev/full" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("fmt", ["table", "csv", "parquet"])
def test_disk_full_on_stdout_is_one_line(fmt):
    with open("/dev/full", "wb") as full:
        done = arrowgate("query", "--format", fmt, BIG, stdout=full)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.strip() == "output error: disk full writing standard output"


def test_a_reader_that_goes_away_ends_the_command_quietly():
    env = {k: v for k, v in os.environ.items() if k != "ARROWGATE_CONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "query", "--format", "csv",
                             BIG], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()  # what head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def test_csv_writes_nested_columns_as_json_text(cli):
    import csv
    import io
    import json

    run = cli("query", "--format", "csv",
              "SELECT [1, 2] AS l, {'a': 1, 'b': 'x,y'} AS s, MAP {'k': 1.5::DOUBLE} AS m, "
              "[{'q': ['a\"b']}] AS deep, NULL::INT[] AS n, 7 AS plain")
    assert run.code == 0, run.err
    header, row = list(csv.reader(io.StringIO(run.out)))
    assert header == ["l", "s", "m", "deep", "n", "plain"]
    assert [json.loads(v) for v in row[:4]] == [[1, 2], {"a": 1, "b": "x,y"}, {"k": 1.5},
                                                  [{"q": ['a"b']}]]
    assert row[4:] == ["", "7"]


def test_csv_of_duckdb_databases(cli):
    run = cli("query", "--format", "csv", "SELECT * FROM duckdb_databases()")
    assert run.code == 0 and "Traceback" not in run.err, run.err
    assert run.out.startswith("database_name,")
