"""Flight sessions: the engine (and shadow reference) a client chose, kept between calls.

A session is found by the ``arrow_flight_session_id`` cookie that the
specification suggests (the ADBC driver returns it with
``adbc.flight.sql.rpc.with_cookie_middleware=true``; the JDBC driver always
does), else by the caller's bearer token, so a logged-in client keeps its
choices without cookies. A session belongs to one user: another user's cookie
is ignored. Sessions unused for ``session_idle`` seconds are dropped.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.flight as flight

if TYPE_CHECKING:
    from gateway.session import Session as CoreSession

COOKIE = "arrow_flight_session_id"

#: The session options a client may set, and what each does.
OPTIONS = {
    "engine": "the engine statements run on (also accepted as 'catalog')",
    "reference": "an engine every query is shadowed on ('' stops shadowing)",
}


@dataclass
class ClientSession:
    """One client's choices, and (for a cookie session) its connection to the engine.

    A client that returns the cookie is one connection, so its statements run
    in one core session: temp tables, settings and transactions persist as
    they would on a connection. A session found by bearer token only keeps the
    options, since one static token may serve many processes at once.
    """

    id: str
    user: str
    engine: str | None = None
    reference: str | None = None
    used: float = field(default_factory=time.monotonic)
    core: CoreSession | None = field(default=None, repr=False)

    @property
    def by_cookie(self) -> bool:
        return not self.id.startswith("token:")

    def options(self) -> dict[str, str]:
        return {k: v for k, v in (("engine", self.engine), ("reference", self.reference))
                if v is not None}

    def core_session(self, engine: str, open_session: Callable[[str], CoreSession]) -> CoreSession:
        """The core session on ``engine``; one on another engine is closed (its state goes)."""
        if self.core is None or self.core.closed or self.core.engine != engine:
            self.release()
            self.core = open_session(engine)
        return self.core

    def release(self) -> None:
        """Close the core session, if any."""
        core, self.core = self.core, None
        if core is not None:
            core.close()


class SessionStore:
    """Every live session, by id."""

    def __init__(self, idle: float):
        self.idle = idle
        self._sessions: dict[str, ClientSession] = {}
        self._lock = threading.Lock()

    def find(self, key: str | None, user: str) -> ClientSession | None:
        if key is None:
            return None
        with self._lock:
            session = self._sessions.get(key)
            if session is None or session.user != user:
                return None
            session.used = time.monotonic()
            return session

    def create(self, user: str, key: str | None = None) -> ClientSession:
        """A new session under ``key`` (a fresh id if the key is missing or taken)."""
        with self._lock:
            if not key or key in self._sessions:
                key = secrets.token_urlsafe(24)
            session = self._sessions[key] = ClientSession(key, user)
        return session

    def close(self, session: ClientSession) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)
        session.release()

    def expire(self, transaction_idle: float | None = None) -> None:
        """Drop sessions unused for ``session_idle``; one inside a transaction is dropped
        (rolled back) once unused for ``transaction_idle``: a client that died there must
        not hold its locks and its memory for an hour."""
        now = time.monotonic()
        cutoff = now - self.idle
        in_transaction = now - (self.idle if transaction_idle is None else transaction_idle)
        with self._lock:
            stale = [self._sessions.pop(k) for k, s in list(self._sessions.items())
                     if s.used < cutoff or (s.used < in_transaction and s.core is not None
                                            and s.core.in_transaction)]
        for session in stale:
            session.release()

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.release()

    def __len__(self) -> int:
        return len(self._sessions)


class SessionMiddleware(flight.ServerMiddleware):
    """The session cookie a call came with, or the one it is handed.

    Headers leave before the handler runs, so a call without a cookie is
    handed a fresh session id at once; the session itself is made only if the
    handler needs one (SetSessionOptions), under that id.
    """

    def __init__(self, cookie: str | None, token: str | None):
        #: when the call arrived: its statement's timeout and logged time count from here
        self.arrived = time.monotonic()
        self.cookie = cookie
        self.token = token
        self.new_cookie = None if cookie else secrets.token_urlsafe(24)

    @property
    def key(self) -> str:
        return self.cookie or self.new_cookie or ""

    def sending_headers(self) -> dict[str, str]:
        return {"set-cookie": f"{COOKIE}={self.new_cookie}"} if self.new_cookie else {}


class SessionMiddlewareFactory(flight.ServerMiddlewareFactory):
    def start_call(self, info: Any, headers: dict[str, list[str]]) -> SessionMiddleware:
        cookie = token = None
        for key, values in headers.items():
            key = key.lower()
            for value in values:
                value = value.decode() if isinstance(value, bytes) else value
                if key == "cookie":
                    for part in value.split(";"):
                        name, _, val = part.strip().partition("=")
                        if name == COOKIE and val:
                            cookie = val
                elif key == "authorization" and value.lower().startswith("bearer "):
                    token = value[7:].strip()
        return SessionMiddleware(cookie, token)


def session_for(store: SessionStore, middleware: SessionMiddleware | None, user: str,
                create: bool) -> ClientSession | None:
    """The caller's session: by cookie, else by bearer token; made if ``create``.

    A caller that returns a cookie always gets the session of its cookie (made
    from the options of its token's session, if it chose some before it had a
    cookie): a token's session keeps options only, and a cookie caller found by
    its token ran every statement in a session of its own, so its SET, temp
    tables and transactions were forgotten.
    """
    if middleware is None:
        return store.create(user) if create else None
    token_key = None if middleware.token is None else "token:" + middleware.token
    if middleware.cookie is not None:
        session = store.find(middleware.cookie, user)
        if session is not None:
            return session
    shared = store.find(token_key, user)
    if not create:
        return shared
    if middleware.cookie is None:
        return shared or store.create(user, token_key or middleware.key)
    session = store.create(user, middleware.cookie)
    if shared is not None:
        session.engine, session.reference = shared.engine, shared.reference
    return session
