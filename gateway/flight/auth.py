"""Who is calling: the username/password handshake, bearer tokens and static tokens.

A client logs in with HTTP Basic credentials (``FlightClient.authenticate_basic_token``,
ADBC's ``username``/``password`` options); the answer carries a bearer token
in its ``authorization`` header, which the client sends on every later call.
A static token from the configuration works the same way without logging in.
Tokens issued at login expire after ``session_idle`` seconds without use.

Neither passwords nor tokens are ever logged; only the user's name is.

Failed logins never lock anyone out, and never tell who exists. Every login
costs one password hash, whether its user exists, has a password hash, a
password from the environment or only tokens, and every failure gets the same
message: a known and an unknown user cannot be told apart by time or by words.
The checks of one user name run one at a time (a password is guessed at most
as fast as one hash runs, about 20 a second), and at most two hashes run at
once, so a flood of logins cannot take every core from the users' queries;
both wait their turn rather than refuse. After ``login_failures`` failures of
a name in a row, each next *failed* attempt's answer waits (1 s, doubling up
to 8 s) before it is sent; the right password is neither refused nor delayed,
so an attacker who knows a user name cannot keep that user out. (pyarrow
gives the login, which its middleware handles before any call handler runs,
no client address: ``ServerCallContext.peer()`` exists only in handlers, so
the slowing cannot be by address.)
"""

from __future__ import annotations

import base64
import binascii
import functools
import secrets
import threading
import time
from typing import Any

import pyarrow.flight as flight

from gateway.flight.serve_config import ANONYMOUS, ServeSettings, User, hash_password

#: the longest a failed login's answer waits, after many failures of its user name
_LONGEST_DELAY = 8.0
#: locks that serialize the checks of one user name (a name maps to one of them: as many
#: locks for any number of names, made-up ones included)
_NAME_LOCKS = 64


class Authenticator:
    """Checks credentials and keeps the tokens issued at login."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self._issued: dict[str, tuple[User, float]] = {}  # token -> (user, last use)
        #: user name -> failed logins in a row (bounded: names beyond it are forgotten)
        self._failures: dict[str, int] = {}
        #: password hashes checked at once: a flood of logins takes at most this many cores
        self._checking = threading.BoundedSemaphore(2)
        self._names = [threading.Lock() for _ in range(_NAME_LOCKS)]
        self._lock = threading.Lock()

    @functools.cached_property
    def _decoy(self) -> User:
        """What an unknown user's password is checked against, so it costs a known one's
        time (made at the first login: a hash is 50 ms of a core)."""
        return User("", password_hash=hash_password(secrets.token_urlsafe(16)))

    @property
    def required(self) -> bool:
        return self.settings.auth

    def login(self, username: str, password: str) -> tuple[User, str]:
        """Check a password and issue a bearer token.

        Raises:
            flight.FlightUnauthenticatedError: unknown user or wrong password
                (the message does not say which, nor does the time it takes).
        """
        user = self.settings.users.get(username)
        name_lock = self._names[hash(username) % _NAME_LOCKS]
        with name_lock, self._checking:
            good = self._check(user, password)
        if not good:
            with self._lock:
                count = self._failures.pop(username, 0) + 1
                self._failures[username] = count
                while len(self._failures) > 10_000:
                    del self._failures[next(iter(self._failures))]
            over = count - self.settings.login_failures
            if over >= 0:
                time.sleep(min(_LONGEST_DELAY, 2.0 ** over))
            raise flight.FlightUnauthenticatedError("wrong username or password")
        assert user is not None
        with self._lock:
            self._failures.pop(username, None)
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._issued[token] = (user, time.monotonic())
        return user, token

    def _check(self, user: User | None, password: str) -> bool:
        """Whether ``password`` is ``user``'s, at the cost of one password hash whoever
        the user is (none, a password from the environment, only tokens)."""
        if user is not None and user.password_hash is not None:
            return user.check_password(password)
        self._decoy.check_password(password)
        return user is not None and user.password_env is not None \
            and user.check_password(password)

    def user_for_token(self, token: str) -> User:
        """The user a bearer token belongs to.

        Raises:
            flight.FlightUnauthenticatedError: the token is unknown or has expired.
        """
        now = time.monotonic()
        with self._lock:
            found = self._issued.get(token)
            if found is not None and now - found[1] <= self.settings.session_idle:
                self._issued[token] = (found[0], now)
                return found[0]
            self._issued.pop(token, None)
        for user in self.settings.users.values():
            if user.check_token(token):
                return user
        raise flight.FlightUnauthenticatedError(
            "the bearer token is unknown or has expired: log in again")

    def expire(self) -> None:
        """Forget tokens unused for ``session_idle`` seconds."""
        cutoff = time.monotonic() - self.settings.session_idle
        with self._lock:
            for token in [t for t, (_, used) in self._issued.items() if used < cutoff]:
                del self._issued[token]


class AuthMiddleware(flight.ServerMiddleware):
    """The caller of one call, and the token to hand back after a login."""

    def __init__(self, user: User, issued: str | None = None):
        self.user = user
        self.issued = issued

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.issued}"} if self.issued else {}


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Authenticates every call before its handler runs."""

    def __init__(self, authenticator: Authenticator):
        self.authenticator = authenticator

    def start_call(self, info: Any, headers: dict[str, list[str]]) -> AuthMiddleware:
        values = _header(headers, "authorization")
        if values is None:
            if self.authenticator.required:
                raise flight.FlightUnauthenticatedError(
                    "this service needs a login: give a username and password, or a token")
            return AuthMiddleware(ANONYMOUS)
        scheme, _, credential = values.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            username, password = _basic(credential)
            if not self.authenticator.required:
                return AuthMiddleware(ANONYMOUS, secrets.token_urlsafe(16))
            user, token = self.authenticator.login(username, password)
            return AuthMiddleware(user, token)
        if scheme == "bearer":
            if not self.authenticator.required:
                return AuthMiddleware(ANONYMOUS)
            return AuthMiddleware(self.authenticator.user_for_token(credential.strip()))
        raise flight.FlightUnauthenticatedError(
            f"unsupported authorization scheme {scheme!r}: use Basic or Bearer")


class NoopAuthHandler(flight.ServerAuthHandler):
    """Lets the Handshake call through: the middleware has authenticated it already."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        pass

    def is_valid(self, token: bytes) -> str:
        return ""


def _header(headers: dict[str, list[str]], name: str) -> str | None:
    for key, values in headers.items():
        if key.lower() == name and values:
            value = values[0]
            return value.decode() if isinstance(value, bytes) else value
    return None


def _basic(credential: str) -> tuple[str, str]:
    padded = credential.strip() + "=" * (-len(credential.strip()) % 4)  # ADBC drops the padding
    try:
        username, sep, password = base64.b64decode(padded).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        sep = ""
    if not sep:
        raise flight.FlightUnauthenticatedError("malformed Basic credentials")
    return username, password
