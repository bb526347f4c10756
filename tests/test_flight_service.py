"""``arrowgate serve`` as a process: it listens, logs one line per query, stops on SIGTERM.

Also shadowing inside the service: with ``[shadow]`` configured, a client can
fetch the verdict of its own query.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from gateway.flight import protobuf as M
from tests.conftest import ROOT
from tests.flight_support import CONFIG, action, serving
from tests.hang_guard import HANG_GUARD

CONFIG_TOML = """
default_engine = "duck"
[engines.duck]
type = "duckdb"
[serve]
shutdown_grace = 1
"""


def query(sql: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(M.pack(M.CommandStatementQuery(query=sql)))


@pytest.fixture
def process(tmp_path):
    (tmp_path / "arrowgate.toml").write_text(CONFIG_TOML)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--port", "0"], cwd=tmp_path,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stderr.readline()
    match = re.search(r"listening on (\S+)", line)
    assert match, line
    yield proc, match.group(1)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_sigterm_cancels_running_streams_after_the_grace_period(process):
    proc, location = process
    with flight.connect(location) as client:
        info = client.get_flight_info(query("SELECT range FROM range(100000000)"))
        reader = client.do_get(info.endpoints[0].ticket)
        reader.read_chunk()
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(flight.FlightCancelledError):
            while True:
                reader.read_chunk()
                time.sleep(0.01)  # a slow reader: it would not finish within the grace period
        assert proc.wait(timeout=30) == 0
    assert time.monotonic() - started < HANG_GUARD
    log = proc.stderr.read()
    assert "stopping: 1 running queries get 1 s to finish" in log
    lines = [json.loads(line.split("arrowgate.flight.query ", 1)[1])
             for line in log.splitlines() if "arrowgate.flight.query" in line]
    assert [line["outcome"] for line in lines] == ["cancelled"]


def test_a_crash_leaves_every_threads_stack_in_the_log(process):
    """A segfault in a library took the service down with nothing logged (issue 36); the
    log now holds each thread's Python stack, which is how the client watch's was found."""
    proc, location = process
    with flight.connect(location) as client:
        assert action(client, "health")["running_queries"] == 0
    proc.send_signal(signal.SIGSEGV)
    assert proc.wait(timeout=HANG_GUARD) == -signal.SIGSEGV
    log = proc.stderr.read()
    assert "Fatal Python error: Segmentation fault" in log
    assert "gateway/flight/service.py" in log  # the main thread, serving


def test_one_log_line_per_query(caplog):
    caplog.set_level(logging.INFO, logger="arrowgate.flight.query")
    with serving() as server, flight.connect(server.location) as client:
        for sql in ("SELECT 1 AS x", "SELECT 2 AS x", "SELECT * FROM missing_table"):
            try:
                info = client.get_flight_info(query(sql))
                client.do_get(info.endpoints[0].ticket).read_all()
            except pa.ArrowInvalid:
                assert "missing_table" in sql
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "arrowgate.flight.query"]
    assert [line["outcome"] for line in lines] == ["ok", "ok", "unknown_object"]  # the failure's kind
    assert lines[0]["fingerprint"] == lines[1]["fingerprint"]  # the same query, other literals
    assert lines[0]["rows"] == 1 and lines[0]["bytes"] > 0 and lines[0]["user"] == "anonymous"
    assert set(lines[0]) == {"query_id", "user", "engine", "fingerprint", "rows", "bytes",
                             "ms", "outcome", "shadow"}


def test_shadowed_queries_and_their_verdicts(tmp_path):
    config = {**CONFIG, "shadow": {"primary": "duck", "reference": "other", "sample": 1.0,
                                   "store": str(tmp_path / "shadow")}}
    with serving(config) as server, flight.connect(server.location) as client:
        info = client.get_flight_info(query("SELECT 42 AS answer"))
        assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"answer": 42}]
        query_id = json.loads(info.app_metadata)["query_id"]
        verdict = action(client, "shadow-verdict", str(query_id).encode())
        assert verdict["shadow"]["status"] == "compared"
        assert verdict["shadow"]["category"] == "match"
        summary = action(client, "shadow-summary")
        assert summary["configured"] and summary["records"] >= 1


def test_shadow_verdict_of_an_unknown_query_is_not_found():
    with serving() as server, flight.connect(server.location) as client, \
            pytest.raises(pa.ArrowKeyError, match="no query 999999"):
        action(client, "shadow-verdict", b"999999")


#: Two DuckDB engines a setting apart: 7 / 2 is 3.5 on one and 3 on the other.
DIVERGING = {"default_engine": "duck",
             "engines": {"duck": {"type": "duckdb"},
                         "floor": {"type": "duckdb", "settings": {"integer_division": True}}}}


def test_prepared_statements_are_shadowed_like_statements(tmp_path):
    config = {**DIVERGING, "shadow": {"primary": "duck", "reference": "floor", "sample": 1.0,
                                      "store": str(tmp_path / "shadow")}}
    with serving(config) as server:
        with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute("SELECT ? / 2 AS half", parameters=(7,))  # prepared, bound by DoPut
            assert cur.fetchall() == [(3.5,)]
            cur.execute("SELECT ? + 1 AS next", parameters=(7,))
            assert cur.fetchall() == [(8,)]
        with flight.connect(server.location) as client:
            request = M.ActionCreatePreparedStatementRequest(query="SELECT ? / 2 AS half")
            (created,) = client.do_action(flight.Action("CreatePreparedStatement",
                                                        M.pack(request)))
            prepared = M.ActionCreatePreparedStatementResult()
            any_pb2.Any.FromString(created.body.to_pybytes()).Unpack(prepared)
            descriptor = flight.FlightDescriptor.for_command(M.pack(
                M.CommandPreparedStatementQuery(
                    prepared_statement_handle=prepared.prepared_statement_handle)))
            params = pa.record_batch({"p": [9]})
            writer, _ = client.do_put(descriptor, params.schema)
            writer.write_batch(params)
            writer.close()
            info = client.get_flight_info(descriptor)
            assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == \
                [{"half": 4.5}]
            query_id = json.loads(info.app_metadata)["query_id"]
            verdict = action(client, "shadow-verdict", str(query_id).encode())
            assert verdict["shadow"]["status"] == "compared"
            assert verdict["shadow"]["category"] == "values"
            summary = action(client, "shadow-summary")
    assert summary["by_category"] == {"values": 2, "match": 1}
