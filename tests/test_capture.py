"""Capturing what clients send through `arrowgate serve` ([serve.capture]), over a real
ADBC Flight SQL client."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.flight as flight

from gateway.capture.captured import read_capture
from gateway.flight.serve_config import hash_password
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
    # the SET is recorded as what it is, and travels with what follows it
    assert [(e.sql, e.kind) for e in entries] == [
        ("SET default_order = 'DESC'", "settings"),
        ("SELECT ?::INTEGER + 1 AS answer, ? AS label", "read")]
    prepared = entries[1]
    assert prepared.parameters is not None
    assert [list(r.values()) for r in prepared.parameters.to_pylist()] == [[41, "x"]]
    assert prepared.settings == ["SET default_order = 'DESC'"]


def test_writes_are_kept_only_when_asked(tmp_path):
    everything = [("CREATE OR REPLACE TABLE t AS SELECT 1 AS x", "ddl"),
                  ("INSERT INTO t VALUES (2)", "write"), ("SELECT count(*) AS n FROM t", "read")]
    for include, expected in (({"include_writes": False}, everything[2:]), ({}, everything)):
        folder = tmp_path / f"w{len(include)}"
        with serving(_config(folder, **include)) as server:
            run(server, "dave", *(sql for sql, _ in everything))
            assert [(e.sql, e.kind) for e in captured(server, folder)] == expected


def test_the_folder_is_private_and_holds_no_credential(tmp_path):
    folder = tmp_path / "capture"
    with serving(_config(folder, include_writes=True)) as server:
        run(server, "dave", "SELECT 'hello' AS greeting", "CREATE OR REPLACE TABLE q AS SELECT 1")
        # a connection string a user typed into a statement: kept masked
        run(server, "dave", "SELECT 'host=h password=typed-secret-pw' AS dsn")
        assert any("password=***" in e.sql for e in captured(server, folder))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    text = "".join(f.read_text() for f in files)
    assert "hello" in text
    for secret in ("dave-pw", "erin-pw", "scrypt$", "Bearer", "authorization",
                   "typed-secret-pw"):
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


# -- replay ---------------------------------------------------------------------------------
REPLAYED = {"default_engine": "duck",
            "engines": {"duck": {"type": "duckdb"},
                        "floor": {"type": "duckdb", "settings": {"integer_division": True}}}}
STATEMENTS = ["SELECT 7 / 2 AS half", "SELECT 1 AS one",
              "SELECT x FROM (VALUES (3), (1), (2)) t(x) ORDER BY x"]


def _capture_workload(tmp_path: Path) -> Path:
    folder = tmp_path / "capture"
    config = {**REPLAYED, "serve": {"capture": {"folder": str(folder)}}}
    with serving(config) as server:
        with dbapi.connect(server.location, autocommit=True, db_kwargs={
                "adbc.flight.sql.rpc.with_cookie_middleware": "true"}) as conn, \
                conn.cursor() as cur:
            for sql in STATEMENTS * 2:
                cur.execute(sql)
                cur.fetchall()
            cur.execute("SELECT ?::INTEGER / 2 AS half_of", parameters=(9,))
            cur.fetchall()
            cur.execute("SET default_order = 'DESC'")
            cur.fetchall()
            cur.execute("SELECT x FROM (VALUES (3), (1), (2)) t(x) ORDER BY x")
            cur.fetchall()
        server.capture.flush()
    return folder


def _shadow(cli: Any, tmp_path: Path, *args: str) -> dict[str, Any]:
    import json

    config = tmp_path / "arrowgate.toml"
    config.write_text('default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'
                      '[engines.floor]\ntype = "duckdb"\nsettings = { integer_division = true }\n')
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    done = cli("--config", str(config), "shadow", "--primary", "duck", "--reference", "floor",
               *args, "--json", str(out), "--no-store")
    assert done.code in (0, 1), done.err
    return json.loads(out.read_text())


def test_a_replay_gives_the_verdicts_of_the_same_statements_run_directly(cli, tmp_path):
    folder = _capture_workload(tmp_path)
    corpus = tmp_path / "same.sql"
    corpus.write_text(";\n".join(STATEMENTS * 2) + ";\n")
    replayed = _shadow(cli, tmp_path, str(folder))
    direct = _shadow(cli, tmp_path, str(corpus))
    assert [q["category"] for q in replayed["queries"][:6]] == \
        [q["category"] for q in direct["queries"]] == ["values", "match", "match"] * 2
    # the prepared statement ran with its parameter, the last with its session's SET
    half_of, setting, ordered = replayed["queries"][6:9]
    assert setting["status"] == "skipped" and "a setting" in setting["message"]
    assert half_of["sql"] == "SELECT ?::INTEGER / 2 AS half_of", half_of
    assert half_of["category"] == "values", (half_of["status"], half_of["message"])
    assert ordered["category"] == "match" and ordered["primary_rows"] == 3
    shapes = {row["sql"]: row for row in replayed["shapes"]}
    assert shapes["SELECT 7 / 2 AS half"]["seen"] == 2
    assert shapes["SELECT 7 / 2 AS half"]["diverged"] == 2


def test_a_replay_runs_each_shape_once_with_dedupe_and_keeps_a_time_window(cli, tmp_path):
    folder = _capture_workload(tmp_path)
    deduped = _shadow(cli, tmp_path, str(folder), "--dedupe")
    assert len(deduped["queries"]) == 5  # three statements, the prepared one, the SET
    assert {row["sql"]: row["seen"] for row in deduped["shapes"]}["SELECT 1 AS one"] == 2
    later = _shadow(cli, tmp_path, str(folder), "--since", "2999-01-01")
    assert later["queries"] == []


def test_leaving_the_server_writes_what_was_captured(tmp_path):
    """pyarrow's __exit__ skipped the server's own shutdown: the writer's last buffered
    lines were lost with the process."""
    folder = tmp_path / "capture"
    with serving(_config(folder)) as server:
        run(server, "dave", *[f"SELECT {i} AS v" for i in range(50)])
        writer = server.capture
    assert not writer._thread.is_alive()
    assert len(list(read_capture(folder))) == 50


def test_a_replay_accounts_for_every_statement_and_runs_writes_on_both_engines_or_neither(
        cli, tmp_path):
    """Writes that start like a query were skipped but run on the primary; writes dropped out
    of the counts; statements failing on both engines counted as "match"."""
    folder = tmp_path / "capture"
    with serving({**REPLAYED, "serve": {"capture": {"folder": str(folder)}}}) as server:
        with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS kept (x INTEGER)")
            cur.execute("WITH s AS (SELECT 1 AS x) INSERT INTO kept SELECT x FROM s")
            cur.execute("SELECT 7 / 2 AS half")
            cur.fetchall()
            cur.execute("SELECT count(*) AS n FROM kept")
            cur.fetchall()
        server.capture.flush()
    captured = len(list(read_capture(folder)))
    database = tmp_path / "primary.duckdb"
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'
                      f'database = "{database}"\n'
                      '[engines.floor]\ntype = "duckdb"\nsettings = { integer_division = true }\n')
    out, markdown = tmp_path / "report.json", tmp_path / "report.md"
    done = cli("--config", str(config), "shadow", "--primary", "duck", "--reference", "floor",
               str(folder), "--json", str(out), "--markdown", str(markdown), "--no-store")
    report = json.loads(out.read_text())
    accounting = report["summary"]["accounting"]
    assert accounting["statements"] == captured == 4
    assert accounting["skipped"] == {"ddl": 1, "write": 1}
    assert accounting["compared"] + sum(accounting["skipped"].values()) == captured
    assert done.out.splitlines()[-2].startswith("NOT SAFE: 1 of 2 compared statements")
    assert markdown.read_text().splitlines()[2].startswith("**NOT SAFE")
    import duckdb

    with duckdb.connect(str(database)) as con:  # the skipped DDL never ran on the primary
        assert con.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'kept'"
                       ).fetchall() == [(0,)]
    # with --shadow-writes, both engines run them; the count reads an empty table on neither
    done = cli("--config", str(config), "shadow", "--primary", "duck", "--reference", "floor",
               str(folder), "--shadow-writes", "--json", str(out), "--no-store")
    report = json.loads(out.read_text())
    assert report["summary"]["accounting"]["skipped"] == {}
    assert [q["category"] for q in report["queries"]][-1] == "match"


def test_statements_failing_on_both_engines_are_counted_apart(cli, tmp_path):
    folder = tmp_path / "capture"
    with serving({**REPLAYED, "serve": {"capture": {"folder": str(folder)}}}) as server:
        with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
            for _ in range(2):
                with contextlib.suppress(dbapi.Error):
                    cur.execute("SELECT * FROM never_made")
        server.capture.flush()
    report = _shadow(cli, tmp_path, str(folder))
    assert report["summary"]["accounting"]["failed_on_both_sides"] == 2
    assert "2 failed on both engines" in report["summary"]["decision"]
