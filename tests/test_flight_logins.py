"""Failed logins slow the attacker, never lock the user out, and never tell who exists (issue 36).

Before, after an attacker's failed logins the right password was refused for
seconds to minutes ("too many failed logins"), so anyone who knew a user name
could keep that user out; a known user with a wrong password took a median
154 ms and an unknown one 2 ms, and only known users ever got the "too many"
message: user names could be enumerated.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pyarrow.flight as flight
import pytest

from gateway.flight.serve_config import hash_password
from tests.flight_support import serving
from tests.hang_guard import HANG_GUARD

CONFIG: dict[str, Any] = {
    "default_engine": "duck",
    "engines": {"duck": {"type": "duckdb"}},
    "serve": {"login_failures": 3, "users": {
        "dave": {"password_hash": hash_password("dave-pw")},
        "erin": {"password_env": "ARROWGATE_TEST_ERIN_PW"},
    }},
}


@pytest.fixture(scope="module")
def server():
    mp = pytest.MonkeyPatch()
    mp.setenv("ARROWGATE_TEST_ERIN_PW", "erin-pw")
    with serving(CONFIG) as server:
        yield server
    mp.undo()


def login(server: Any, user: str, password: str) -> str | None:
    """None on success, else the error's message."""
    client = flight.connect(server.location)
    try:
        client.authenticate_basic_token(user, password)
        return None
    except flight.FlightUnauthenticatedError as exc:
        return str(exc).split(". Detail")[0]
    finally:
        client.close()


@pytest.fixture
def unslowed_server(monkeypatch):
    """A server whose failures are never slowed, so only the check's cost is timed."""
    monkeypatch.setenv("ARROWGATE_TEST_ERIN_PW", "erin-pw")
    config = {**CONFIG, "serve": {**CONFIG["serve"], "login_failures": 100_000}}
    with serving(config) as server:
        yield server


@pytest.fixture
def cheap_hash_server(monkeypatch):
    """A server whose password hashes cost a millisecond, not 50 (scrypt's N of 2**8),
    and whose failures are not slowed: a thousand failed logins in seconds."""
    from gateway.flight import serve_config as settings

    monkeypatch.setattr(settings, "_SCRYPT", {"n": 2**8, "r": 8, "p": 1})
    monkeypatch.setenv("ARROWGATE_TEST_ERIN_PW", "erin-pw")
    config = {**CONFIG, "serve": {**CONFIG["serve"], "login_failures": 100_000}}
    with serving(config) as server:
        yield server


def test_the_right_password_works_while_an_attacker_fails_a_thousand_times(cheap_hash_server):
    server = cheap_hash_server
    attempts = [0]
    stop = threading.Event()

    def attack() -> None:
        client = flight.connect(server.location)
        while not stop.is_set() and attempts[0] < 1000:
            with pytest.raises(flight.FlightUnauthenticatedError):
                client.authenticate_basic_token("erin", f"guess-{attempts[0]}")
            attempts[0] += 1
        client.close()

    attackers = [threading.Thread(target=attack) for _ in range(8)]
    for thread in attackers:
        thread.start()
    try:
        while attempts[0] < 1000:
            assert login(server, "erin", "erin-pw") is None  # never refused, never "wait"
            assert all(t.is_alive() for t in attackers) or attempts[0] >= 1000
    finally:
        stop.set()
        for thread in attackers:
            thread.join(HANG_GUARD)
    assert attempts[0] >= 1000
    assert login(server, "erin", "erin-pw") is None


def test_known_and_unknown_users_get_the_same_message_and_take_the_same_time(unslowed_server):
    server = unslowed_server

    def timed(user: str) -> tuple[float, str | None]:
        started = time.perf_counter()
        message = login(server, user, "wrong")
        return time.perf_counter() - started, message

    samples: dict[str, list[float]] = {"dave": [], "erin": [], "nobody": []}
    messages = set()
    for _ in range(7):  # alternated, so the machine's load falls on each alike
        for user in samples:
            elapsed, message = timed(user)
            samples[user].append(elapsed)
            messages.add(message)
    assert messages == {"wrong username or password"}
    medians = {user: statistics.median(times) for user, times in samples.items()}
    # one password hash each: within a factor that a missing hash (50 ms against 2 ms
    # before) could never meet, however loaded the machine
    assert max(medians.values()) < 3 * min(medians.values()), medians


def test_failures_of_a_name_slow_its_next_failures_only(server):
    for _ in range(4):
        assert login(server, "dave", "guess") == "wrong username or password"
    started = time.perf_counter()
    assert login(server, "dave", "guess") == "wrong username or password"
    assert time.perf_counter() - started >= 1.0  # slowed: 3 failures in a row passed
    assert login(server, "dave", "dave-pw") is None  # the right one at once
