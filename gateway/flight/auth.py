"""Who is calling: the username/password handshake, bearer tokens and static tokens.

A client logs in with HTTP Basic credentials (``FlightClient.authenticate_basic_token``,
ADBC's ``username``/``password`` options); the answer carries a bearer token
in its ``authorization`` header, which the client sends on every later call.
A static token from the configuration works the same way without logging in.
Tokens issued at login expire after ``session_idle`` seconds without use.

Neither passwords nor tokens are ever logged; only the user's name is.

Failed logins are throttled per user: after ``login_failures`` failures in a
row (default 3) each next attempt must wait, 1 s, then 2 s, doubling up to 5
minutes, and is refused before the password hash runs; a success resets the
count. At most two password hashes are checked at once, so a flood of logins
cannot take every core from the users' queries. (pyarrow's server middleware
is not told the client's address, so the throttle cannot be per address.)
"""

from __future__ import annotations

import base64
import binascii
import secrets
import threading
import time
from typing import Any

import pyarrow.flight as flight

from gateway.flight.settings import ANONYMOUS, ServeSettings, User

#: the longest a user's next login waits after failures
_LONGEST_BACKOFF = 300.0


class Authenticator:
    """Checks credentials and keeps the tokens issued at login."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self._issued: dict[str, tuple[User, float]] = {}  # token -> (user, last use)
        #: user -> (failed logins in a row, monotonic time before which logins are refused)
        self._failures: dict[str, tuple[int, float]] = {}
        #: password hashes checked at once: a flood of logins takes at most this many cores
        self._checking = threading.BoundedSemaphore(2)
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return self.settings.auth

    def login(self, username: str, password: str) -> tuple[User, str]:
        """Check a password and issue a bearer token.

        Raises:
            flight.FlightUnauthenticatedError: unknown user or wrong password
                (the message does not say which).
        """
        user = self.settings.users.get(username)
        if user is None:
            raise flight.FlightUnauthenticatedError("wrong username or password")
        self._throttle(username)
        if not self._checking.acquire(blocking=False):
            raise flight.FlightUnavailableError(
                "too many logins are being checked at once: try again in a moment")
        try:
            good = user.check_password(password)
        finally:
            self._checking.release()
        with self._lock:
            if good:
                self._failures.pop(username, None)
            else:
                count, _ = self._failures.get(username, (0, 0.0))
                count += 1
                over = count - self.settings.login_failures
                wait = 0.0 if over < 0 else min(_LONGEST_BACKOFF, 2.0 ** over)
                self._failures[username] = (count, time.monotonic() + wait)
        if not good:
            raise flight.FlightUnauthenticatedError("wrong username or password")
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._issued[token] = (user, time.monotonic())
        return user, token

    def _throttle(self, username: str) -> None:
        """Refuse a login of a user whose recent logins failed, before the password hash
        (scrypt: 50 ms of a core each) runs, until their backoff has passed."""
        with self._lock:
            _, until = self._failures.get(username, (0, 0.0))
        left = until - time.monotonic()
        if left > 0:
            raise flight.FlightUnauthenticatedError(
                f"too many failed logins for this user: try again in {left:.0f} s")

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
