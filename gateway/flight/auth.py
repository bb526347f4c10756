"""Who is calling: the username/password handshake, bearer tokens and static tokens.

A client logs in with HTTP Basic credentials (``FlightClient.authenticate_basic_token``,
ADBC's ``username``/``password`` options); the answer carries a bearer token
in its ``authorization`` header, which the client sends on every later call.
A static token from the configuration works the same way without logging in.
Tokens issued at login expire after ``session_idle`` seconds without use.

Neither passwords nor tokens are ever logged; only the user's name is.
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


class Authenticator:
    """Checks credentials and keeps the tokens issued at login."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self._issued: dict[str, tuple[User, float]] = {}  # token -> (user, last use)
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
        if user is None or not user.check_password(password):
            raise flight.FlightUnauthenticatedError("wrong username or password")
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._issued[token] = (user, time.monotonic())
        return user, token

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
