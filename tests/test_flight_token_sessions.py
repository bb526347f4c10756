"""Every kind of login keeps its session as a password login does (issue 36).

A static-token user whose client returned the session cookie had SET and
temp tables answer OK and be forgotten, and ``BEGIN; INSERT; ROLLBACK`` left
the row committed: a call made before the client had its cookie (an action)
made a session under the token, and every later call, cookie and all, was
sent to it, which runs each statement alone. A call with no session at all
now refuses what it would silently forget.
"""

from __future__ import annotations

import hashlib
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.flight as flight
import pytest

from gateway.flight import protobuf as M
from gateway.flight.serve_config import hash_password
from tests.flight_support import serving

TOKEN = "static-token-of-tess"
CONFIG: dict[str, Any] = {
    "default_engine": "duck",
    "engines": {"duck": {"type": "duckdb"}},
    "serve": {"users": {
        "tess": {"token_sha256": [hashlib.sha256(TOKEN.encode()).hexdigest()]},
        "paul": {"password_hash": hash_password("paul-pw")},
    }},
}
COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}


class CookieJar(flight.ClientMiddlewareFactory):
    """What a browser-like client does: keep the cookies set, send them back."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}

    def start_call(self, info: Any) -> flight.ClientMiddleware:
        return _JarCall(self)


class _JarCall(flight.ClientMiddleware):
    def __init__(self, jar: CookieJar):
        self.jar = jar

    def sending_headers(self) -> dict[str, str]:
        cookies = self.jar.cookies
        return {"cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}

    def received_headers(self, headers: dict[str, list[str]]) -> None:
        for key, values in headers.items():
            if key.lower() == "set-cookie":
                for value in values:
                    name, _, val = value.split(";")[0].partition("=")
                    self.jar.cookies[name.strip()] = val.strip()


@pytest.fixture(scope="module")
def server():
    with serving(CONFIG) as server:
        yield server


def run(client: flight.FlightClient, sql: str, options: flight.FlightCallOptions) -> list[Any]:
    descriptor = flight.FlightDescriptor.for_command(M.pack(M.CommandStatementQuery(query=sql)))
    info = client.get_flight_info(descriptor, options)
    return client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist()


def session_state_survives(run_sql) -> None:
    run_sql("CREATE TABLE IF NOT EXISTS kept (a INTEGER)")
    run_sql("DELETE FROM kept")
    run_sql("SET TimeZone = 'Asia/Tokyo'")
    assert run_sql("SELECT current_setting('TimeZone') AS z") == [{"z": "Asia/Tokyo"}]
    run_sql("CREATE TEMP TABLE mine AS SELECT 7 AS a")
    assert run_sql("SELECT a FROM mine") == [{"a": 7}]
    run_sql("BEGIN")
    run_sql("INSERT INTO kept VALUES (1)")
    run_sql("ROLLBACK")
    assert run_sql("SELECT count(*) AS n FROM kept") == [{"n": 0}]


@pytest.mark.parametrize("first_call", ["GetSessionOptions", "a query"])
def test_a_token_user_returning_the_cookie_keeps_its_session(server, first_call):
    client = flight.FlightClient(server.location, middleware=[CookieJar()])
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    if first_call == "GetSessionOptions":  # made a session under the token before the fix
        request = M.GetSessionOptionsRequest().SerializeToString()
        list(client.do_action(flight.Action("GetSessionOptions", request), options))
    else:
        assert run(client, "SELECT 1 AS one", options) == [{"one": 1}]
    session_state_survives(lambda sql: run(client, sql, options))
    client.close()


def adbc_run(cur):
    def run_sql(sql: str) -> list[dict[str, Any]]:
        cur.execute(sql)
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return run_sql


@pytest.mark.parametrize("login", ["token", "password"])
def test_over_adbc_a_token_user_keeps_its_session_as_a_password_user(server, login):
    credentials = ({"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"} if login == "token"
                   else {"username": "paul", "password": "paul-pw"})
    with dbapi.connect(server.location, autocommit=True,
                       db_kwargs={**COOKIES, **credentials}) as conn, conn.cursor() as cur:
        session_state_survives(adbc_run(cur))


@pytest.mark.parametrize("sql", ["BEGIN", "SET TimeZone = 'Asia/Tokyo'",
                                 "CREATE TEMP TABLE t AS SELECT 1 AS a"])
def test_without_a_session_what_would_be_forgotten_is_refused(server, sql):
    with dbapi.connect(server.location, autocommit=True, db_kwargs={
            "adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"}) as conn, \
            conn.cursor() as cur, pytest.raises(dbapi.ProgrammingError,
                                                match=r"needs a session.*cookie"):
        cur.execute(sql)


def test_a_statement_prepared_while_the_last_answer_is_unread_closes_it(server):
    """A session streams one answer at a time: preparing the next statement closes the
    answer still being read, as running one does. The prepare planned on a cursor with
    an open result and failed: "connection has an open result" (found by
    bench/client_model.py)."""
    with dbapi.connect(server.location, autocommit=True, db_kwargs={
            **COOKIES, "username": "paul", "password": "paul-pw"}) as conn:
        first = conn.cursor()
        first.execute("SELECT range AS id FROM range(1000000)")
        assert len(first.fetchmany(5)) == 5
        with conn.cursor() as second:
            second.execute("SELECT 41 + 1 AS answer")
            assert second.fetchall() == [(42,)]
        first.close()
