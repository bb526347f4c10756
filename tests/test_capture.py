"""Capturing what clients send through `arrowgate serve` ([serve.capture]), over a real
ADBC Flight SQL client."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.flight as flight

from gateway.capture import read_capture
from gateway.flight.settings import hash_password
from tests.flight_support import CONFIG, action, serving

USERS = {"dave": {"password_hash": hash_password("dave-pw")},
         "erin": {"password_hash": hash_password("erin-pw")}}


def _config(folder: Path, **capture: Any) -> dict[str, Any]:
    return {**CONFIG, "serve": {"users": USERS,
                                "capture": {"folder": str(folder), **capture}}}


def connect(server: Any, user: str) -> Any:
    return dbapi.connect(server.location, autocommit=True, db_kwargs={
        "username": user, "password": f"{user}-pw",
        "adbc.flight.sql.rpc.with_cookie_middleware": "true"})


def run(server: Any, user: str, *statements: Any) -> None:
    with connect(server, user) as conn, conn.cursor() as cur:
        for sql in statements:
            if isinstance(sql, tuple):
                cur.execute(*sql)
            else:
                cur.execute(sql)
            cur.fetchall()


def captured(server: Any, folder: Path) -> list[Any]:
    server.capture.flush()
    return list(read_capture(folder)) if folder.exists() else []


def test_capture_keeps_the_statements_of_the_chosen_engines_and_users(tmp_path):
    folder = tmp_path / "capture"
    with serving(_config(folder, engines=["duck"], users=["dave"])) as server:
        run(server, "dave", "SELECT 1 AS a", "SELECT 2 AS b")
        run(server, "erin", "SELECT 3 AS c")
        with connect(server, "dave") as conn:
            conn.adbc_connection.set_options(**{"adbc.flight.sql.session.option.engine": "other"})
            with conn.cursor() as cur:
                cur.execute("SELECT 4 AS d")
                cur.fetchall()
        entries = captured(server, folder)
    assert [e.sql for e in entries] == ["SELECT 1 AS a", "SELECT 2 AS b"]
    first = entries[0]
    assert (first.engine, first.user, first.rows, first.outcome) == ("duck", "dave", 1, "ok")
    assert first.ms is not None and first.ms >= 0 and first.time.endswith("+00:00")


def test_capture_samples(tmp_path):
    for sample, low, high in ((0.0, 0, 0), (0.5, 40, 160), (1.0, 200, 200)):
        folder = tmp_path / f"capture-{sample}"
        with serving(_config(folder, sample=sample)) as server:
            run(server, "dave", *[f"SELECT {i} AS v" for i in range(200)])
            entries = captured(server, folder)
        assert low <= len(entries) <= high, (sample, len(entries))


def test_prepared_parameters_and_session_settings_are_recorded(tmp_path):
    folder = tmp_path / "capture"
    with serving(_config(folder)) as server:
        run(server, "dave", "SET default_order = 'DESC'",
            ("SELECT ?::INTEGER + 1 AS answer, ? AS label", (41, "x")))
        entries = captured(server, folder)
    # the SET is no statement of its own in the capture: it travels with what follows it
    assert [e.sql for e in entries] == ["SELECT ?::INTEGER + 1 AS answer, ? AS label"]
    prepared = entries[0]
    assert prepared.parameters is not None
    assert [list(r.values()) for r in prepared.parameters.to_pylist()] == [[41, "x"]]
    assert prepared.settings == ["SET default_order = 'DESC'"]


def test_writes_are_kept_only_when_asked(tmp_path):
    for include, expected in ((False, ["SELECT count(*) AS n FROM t"]),
                              (True, ["CREATE OR REPLACE TABLE t AS SELECT 1 AS x",
                                      "INSERT INTO t VALUES (2)",
                                      "SELECT count(*) AS n FROM t"])):
        folder = tmp_path / f"w{include}"
        with serving(_config(folder, include_writes=include)) as server:
            run(server, "dave", "CREATE OR REPLACE TABLE t AS SELECT 1 AS x",
                "INSERT INTO t VALUES (2)", "SELECT count(*) AS n FROM t")
            assert [e.sql for e in captured(server, folder)] == expected


def test_the_folder_is_private_and_holds_no_credential(tmp_path):
    folder = tmp_path / "capture"
    with serving(_config(folder, include_writes=True)) as server:
        run(server, "dave", "SELECT 'hello' AS greeting", "CREATE OR REPLACE TABLE q AS SELECT 1")
        captured(server, folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    text = "".join(f.read_text() for f in files)
    assert "hello" in text
    for secret in ("dave-pw", "erin-pw", "scrypt$", "Bearer", "authorization"):
        assert secret not in text


def test_the_folder_stays_under_max_bytes(tmp_path):
    folder = tmp_path / "capture"
    with serving(_config(folder, max_bytes=8192)) as server:
        run(server, "dave", *[f"SELECT {i} AS value_with_a_long_name" for i in range(300)])
        entries = captured(server, folder)
    size = sum(f.stat().st_size for f in folder.iterdir())
    assert size <= 8192 + 512
    assert 0 < len(entries) < 300
    assert entries[-1].sql == "SELECT 299 AS value_with_a_long_name"  # the newest are kept


def test_an_unwritable_folder_fails_no_query(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with serving(_config(blocker / "capture")) as server:
        run(server, "dave", "SELECT 1 AS a", "SELECT 2 AS b")
        server.capture.flush()
        client = flight.connect(server.location)
        options = flight.FlightCallOptions(
            headers=[client.authenticate_basic_token("dave", "dave-pw")])
        health = action(client, "health", options=options)
    assert health["capture"] == {"written": 0, "dropped": 2}
    assert not os.path.exists(blocker / "capture")
