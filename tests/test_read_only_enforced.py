"""A read-only user's statements run on connections the database keeps from writing.

The pipeline refuses what is not a query, but cannot see what a function defined on
the server does: ``SELECT bump()`` below inserts. On PostgreSQL and SQLite, reached
by the adbc and odbc engines, the database refuses that write too, and a user who
writes, on the same engine right after, still can.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import adbc_driver_flightsql.dbapi as flight_dbapi
import pytest

import gateway
from gateway.errors import GatewayError
from gateway.result import QueryHandle
from gateway.statement import Principal
from tests import sql_databases as db
from tests.flight_support import serving
from tests.pg import SUPERUSER

READER = Principal("rita", read_only=True, shared=True)
WRITER = Principal("dave", shared=True)
BUMP = ("CREATE TABLE t (a int); CREATE FUNCTION bump() RETURNS int LANGUAGE plpgsql "
        "AS $$ BEGIN INSERT INTO t VALUES (1); RETURN 1; END $$")
#: a function that turns the mode off for the connection's next transactions
UNLOCK = ("CREATE FUNCTION unlock() RETURNS text LANGUAGE sql AS "
          "$$ SELECT set_config('default_transaction_read_only', 'off', false) $$")
ENGINES = [pytest.param("adbc", marks=pytest.mark.adbc),
           pytest.param("odbc", marks=pytest.mark.odbc)]


@pytest.fixture(scope="module")
def pg(postgres):
    name = db.new_pg_database(postgres)
    postgres.psql(f"{BUMP}; {UNLOCK}", dbname=name)
    return postgres, name


@pytest.fixture(params=ENGINES)
def gw(request, pg):
    postgres, name = pg
    section = (db.adbc_pg if request.param == "adbc" else db.odbc_pg)(postgres, name)
    with gateway.connect({"engines": {"pg": section}}) as gw:
        yield gw


def rows(pg: Any) -> int:
    postgres, name = pg
    return int(postgres.psql("SELECT count(*) FROM t", dbname=name))


def refused_by_the_database(run: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        run()
    error = caught.value
    assert error.kind == "permission"
    assert "user is read-only, and the database refused to write" in error.message
    return error


@pytest.mark.postgres
def test_a_read_only_user_cannot_write_through_a_server_function(gw, pg):
    before = rows(pg)
    for _ in range(2):  # the second time on connections the first ones left idle
        refused_by_the_database(
            lambda: gw.execute("SELECT bump()", principal=READER).to_arrow())
        with gw.session(principal=READER) as session:
            assert session.execute("SELECT 1 AS one").to_arrow().to_pylist() == [{"one": 1}]
            refused_by_the_database(lambda s=session: s.execute("SELECT bump()").to_arrow())
        assert rows(pg) == before
        assert gw.execute("SELECT bump() AS b", principal=WRITER).to_arrow().to_pylist() == [{"b": 1}]
        with gw.session(principal=WRITER) as session:
            session.execute("SELECT bump()").to_arrow()
        before += 2
        assert rows(pg) == before


@pytest.mark.postgres
def test_a_server_function_that_turns_the_mode_off_opens_no_write(gw, pg):
    before = rows(pg)
    for _ in range(2):  # one-shot: the second time on the connection the first left idle
        gw.execute("SELECT unlock()", principal=READER).to_arrow()
        refused_by_the_database(
            lambda: gw.execute("SELECT bump()", principal=READER).to_arrow())
    with gw.session(principal=READER) as session:
        session.execute("SELECT unlock()").to_arrow()
        refused_by_the_database(lambda: session.execute("SELECT bump()").to_arrow())
    assert rows(pg) == before


UNDO = [
    "SET default_transaction_read_only = off",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "RESET ALL",
    "RESET default_transaction_read_only",
    "BEGIN READ WRITE",
    "START TRANSACTION READ WRITE",
    "COMMIT; SELECT bump()",
]


@pytest.mark.postgres
@pytest.mark.parametrize("sql", UNDO)
def test_a_read_only_user_cannot_make_the_connection_writable(gw, pg, sql):
    before = rows(pg)
    with pytest.raises(GatewayError, match="'rita' is read-only") as caught:
        gw.execute(sql, principal=READER).to_arrow()
    assert caught.value.kind == "permission"
    refused_by_the_database(lambda: gw.execute("SELECT bump()", principal=READER).to_arrow())
    with gw.session(principal=READER) as session:
        with pytest.raises(GatewayError):  # odbc sessions refuse a SET before that
            session.execute(sql).to_arrow()
        refused_by_the_database(lambda: session.execute("SELECT bump()").to_arrow())
    assert rows(pg) == before


@pytest.mark.postgres
@pytest.mark.adbc
def test_large_object_writers_are_no_queries(pg):
    """PostgreSQL 15 lets them write in a read-only transaction: the pipeline refuses them."""
    postgres, name = pg
    count = "SELECT count(*) FROM pg_largeobject_metadata"
    before = postgres.psql(count, dbname=name)
    with gateway.connect({"engines": {"pg": db.adbc_pg(postgres, name)}}) as gw:
        for sql in ("SELECT lo_from_bytea(0, 'x')", "SELECT lo_create(0)",
                    "SELECT lo_import('/etc/hostname')"):
            with pytest.raises(GatewayError, match=r"read-only, and this is not a query "
                                                   r"\(SELECT calling lo_"):
                gw.execute(sql, principal=READER).to_arrow()
    assert postgres.psql(count, dbname=name) == before


@pytest.mark.postgres
@pytest.mark.adbc
def test_a_name_written_with_unicode_escapes_is_no_way_around(pg):
    """PostgreSQL decodes U&"lo\\005ffrom\\005fbytea" to lo_from_bytea, which the
    pipeline read as an unknown name: a read-only user's statement with such an
    identifier is refused, whatever it names."""
    postgres, name = pg
    count = "SELECT count(*) FROM pg_largeobject_metadata"
    before = postgres.psql(count, dbname=name)
    with gateway.connect({"engines": {"pg": db.adbc_pg(postgres, name)}}) as gw:
        # the server reads the escapes: a writer's call is the function's
        assert gw.execute('SELECT U&"abs"(-1) AS a', principal=WRITER).to_arrow() \
            .to_pylist() == [{"a": 1}]
        for sql in ('SELECT U&"lo\\005ffrom\\005fbytea"(0, \'x\')',
                    'SELECT u&"pg\\005freload\\005fconf"()',
                    'SELECT pg_catalog.U&"lo\\005fcreate"(0)'):
            with pytest.raises(GatewayError, match="Unicode-escaped identifier") as refused:
                gw.execute(sql, principal=READER).to_arrow()
            assert refused.value.kind == "permission", sql
    assert postgres.psql(count, dbname=name) == before


@pytest.mark.postgres
def test_a_read_only_user_cannot_stop_another_users_statement(gw, pg):
    """What writes no row passes a read-only transaction: ending another session's
    statement (the gateway's users share its role), reloading the server's
    configuration, resetting its statistics; and dblink writes on a connection of
    its own. The pipeline refuses them before the database sees them."""
    postgres, name = pg
    sleeper = subprocess.Popen(
        [str(postgres.bin_dir / "psql"), "-X", "-h", str(postgres.socket_dir),
         "-p", str(postgres.port), "-U", SUPERUSER, "-d", name, "-c",
         "SELECT pg_sleep(60) AS other_users_statement"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = ""
        for _ in range(200):
            pid = postgres.psql("SELECT pid FROM pg_stat_activity "
                                "WHERE query LIKE '%AS other_users_statement'", dbname=name)
            if pid:
                break
            time.sleep(0.05)
        assert pid, "the other user's statement never started"
        for sql in (f"SELECT pg_terminate_backend({pid})", f"SELECT pg_cancel_backend({pid})",
                    "SELECT pg_reload_conf()", "SELECT pg_stat_reset()",
                    "SELECT pg_log_backend_memory_contexts(pg_backend_pid())",
                    "SELECT * FROM dblink('dbname=x', 'DELETE FROM t') AS r(a int)",
                    "SELECT dblink_exec('dbname=x', 'DELETE FROM t')"):
            with pytest.raises(GatewayError) as refused:
                gw.execute(sql, principal=READER).to_arrow()
            assert refused.value.kind == "permission", (sql, refused.value.message)
        time.sleep(0.2)
        assert sleeper.poll() is None  # still running
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.postgres
@pytest.mark.adbc
def test_a_read_only_flight_user_cannot_write_through_a_server_function(pg):
    from gateway.flight.serve_config import hash_password

    postgres, name = pg
    users = {"rita": {"password_hash": hash_password("rita-pw"), "read_only": True},
             "dave": {"password_hash": hash_password("dave-pw")}}
    config = {"default_engine": "pg", "engines": {"pg": db.adbc_pg(postgres, name)},
              "serve": {"users": users}}
    before = rows(pg)
    with serving(config) as server:
        def connect(user: str) -> Any:
            return flight_dbapi.connect(server.location, autocommit=True, db_kwargs={
                "username": user, "password": f"{user}-pw"})

        refused = pytest.raises(flight_dbapi.Error,
                                match="user is read-only, and the database refused to write")
        with connect("rita") as conn, conn.cursor() as cur, refused:
            cur.execute("SELECT bump()")
            cur.fetchall()
        assert rows(pg) == before
        with connect("dave") as conn, conn.cursor() as cur:
            cur.execute("SELECT bump()")
            assert cur.fetchall() == [(1,)]
    assert rows(pg) == before + 1


SQLITE = [pytest.param(db.adbc_sqlite, marks=pytest.mark.adbc),
          pytest.param(db.odbc_sqlite, marks=pytest.mark.odbc)]


@pytest.mark.parametrize("section", SQLITE)
def test_a_read_only_session_on_sqlite_refuses_writes(tmp_path, section):
    """No SELECT writes in SQLite, so the pipeline's check is bypassed: the engine's own
    read-only session gets the INSERT, and SQLite's ``query_only`` refuses it."""
    path = tmp_path / "lite.db"
    with gateway.connect({"engines": {"lite": section(path)}}) as gw:
        gw.execute("CREATE TABLE t (a INTEGER)").to_arrow()
        engine = gw.engine("lite")

        def run(sql: str, read_only: bool) -> Any:
            session = engine.open_session(one_shot=True, read_only=read_only)
            try:
                return session.execute(sql, None, QueryHandle("lite", 0, sql)).reader.read_all()
            finally:
                session.close()

        for _ in range(2):
            refused_by_the_database(lambda: run("INSERT INTO t VALUES (1)", True))
            assert run("SELECT count(*) AS n FROM t", True).to_pylist() == [{"n": 0}]
        run("INSERT INTO t VALUES (1)", False)
        with gw.session(principal=WRITER) as session:
            session.execute("INSERT INTO t VALUES (2)").to_arrow()
        assert gw.execute("SELECT count(*) AS n FROM t").to_arrow().to_pylist() == [{"n": 2}]
