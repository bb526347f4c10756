"""The ``[serve]`` section of ``arrowgate.toml``: address, TLS, users and limits.

::

    [serve]
    host = "127.0.0.1"          # loopback unless said otherwise
    port = 31337
    tls_cert = "server.crt"     # PEM certificate chain and key: TLS on
    tls_key = "server.key"
    max_queries = 64            # running queries, all users together
    max_queries_per_user = 8    # applies once users are declared
    query_timeout = 300         # seconds; 0 means none
    max_rows = 0                # rows one answer may have; 0 means no limit
    max_bytes = 0               # bytes one answer may have; 0 means no limit
    max_request_bytes = 16777216  # a command, a statement or a DoPut upload
    max_statement_bytes = 1048576 # a statement's text (DuckDB parses without a timeout)
    session_idle = 3600         # seconds before an idle session, token, ticket or
                                # prepared statement is dropped
    query_memory = "512MB"      # one statement's sorts, joins, aggregates (DuckDB 2.0+)
    transactions = false        # Flight SQL transactions (true: BeginTransaction works)
    transaction_idle = 60       # seconds before a transaction left unused is rolled back
    ticket_idle = 60            # seconds before a ticket never redeemed frees its query
    login_failures = 3          # failed logins of a name before its next failures are slowed

    [serve.users.alice]
    password_hash = "scrypt$..."    # from `arrowgate serve --hash-password`
    # password_env = "ALICE_PASSWORD"  (or the password itself, from the environment)
    token_sha256 = ["9f86d0..."]     # static bearer tokens, stored as their SHA-256
    # token_env = "ALICE_TOKEN"        (or a static token from the environment)
    engines = ["duck"]              # the engines alice may use (default: all)
    read_only = true                # refuse statements that write

With no user declared, the service is open to anyone who can reach it, which
is why it listens on loopback unless ``--host`` says otherwise, and refuses a
non-loopback address without users and TLS unless ``--insecure`` is given.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.capture.captured import CaptureSettings
from gateway.config import GatewayConfig, check_options
from gateway.engine import Option
from gateway.errors import ConfigError
from gateway.statement import Principal

SERVE_OPTIONS: dict[str, Option] = {
    "host": Option((str,), "127.0.0.1", help="the address to listen on"),
    "port": Option((int,), 31337, help="the TCP port (0 picks a free one)"),
    "tls_cert": Option((str,), None, help="PEM certificate chain file: TLS on"),
    "tls_key": Option((str,), None, help="PEM private key file of tls_cert"),
    "max_queries": Option((int,), 64, help="running queries, all users together"),
    "max_queries_per_user": Option((int,), 8, help="running queries of one user"),
    "query_timeout": Option((int, float), 300, help="seconds a query may run; 0: none"),
    "max_rows": Option((int,), 0, help="rows one answer may have; 0: no limit"),
    "max_bytes": Option((int,), 0, help="bytes one answer may have; 0: no limit"),
    "max_statement_bytes": Option((int,), 1024 * 1024,
                                  help="bytes a statement's text may have: DuckDB parses and "
                                       "binds without looking at a timeout (an 8.5 MB IN list "
                                       "took it 26 s and 3.3 GB)"),
    "max_request_bytes": Option((int,), 16 * 1024 * 1024,
                                help="bytes a command, statement or DoPut upload may have"),
    "session_idle": Option((int, float), 3600,
                           help="seconds before idle sessions, tokens and handles are dropped"),
    "query_memory": Option((str,), None,
                           help="memory one statement's sorts, joins and aggregates may use on "
                                "a duckdb or ducklake engine (DuckDB 2.0 and later), e.g. "
                                "\"512MB\"; past it they spill to disk"),
    "transactions": Option((bool,), False,
                           help="advertise and run Flight SQL transactions; off, a client that "
                                "asks for autocommit off (harlequin-adbc, DB-API's default) "
                                "gets autocommit, so work it never commits is kept"),
    "transaction_idle": Option((int, float), 60,
                               help="seconds before a transaction left unused is rolled back "
                                    "(its client may have died holding locks)"),
    "ticket_idle": Option((int, float), 60,
                          help="seconds before a query whose ticket was never redeemed (DoGet) "
                               "is cancelled: it counts toward max_queries until then"),
    "login_failures": Option((int,), 3,
                             help="failed logins of one user name in a row before each next "
                                  "failed attempt's answer waits (1 s, doubling up to 8 s); "
                                  "the right password is never refused or delayed"),
    "shutdown_grace": Option((int, float), 10,
                             help="seconds running streams get to finish on SIGTERM"),
    "any_file": Option((bool,), False,
                       help="let SQL users read any file the gateway can (default: only the "
                            "configured sources, on every duckdb engine)"),
    "users": Option((dict,), {}, help="[serve.users.NAME] sections"),
    "capture": Option((dict,), None, help="[serve.capture]: keep the statements clients send, "
                                          "to replay them (docs/shadow.md)"),
}

USER_OPTIONS: dict[str, Option] = {
    "password_hash": Option((str,), None, secret=True,
                            help="scrypt hash from `arrowgate serve --hash-password`"),
    "password_env": Option((str,), None, help="environment variable holding the password"),
    "token_sha256": Option((list,), [], secret=True,
                           help="SHA-256 (hex) of each static bearer token"),
    "token_env": Option((str,), None, help="environment variable holding a static token"),
    "engines": Option((list,), None, help="the engines this user may use (default: all)"),
    "read_only": Option((bool,), False, help="refuse statements that write"),
}

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def hash_password(password: str) -> str:
    """A ``password_hash`` value: ``scrypt$N$r$p$salt$key``, salt and key base64."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${b64(salt).decode()}${b64(key).decode()}"


def _check_hash(value: str, fail: Any, key: str) -> None:
    parts = value.split("$")
    try:
        assert len(parts) == 6 and parts[0] == "scrypt"
        int(parts[1]), int(parts[2]), int(parts[3])
        base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except Exception:
        raise fail(key, "is not a scrypt hash",
                   "make one with: arrowgate serve --hash-password") from None


@dataclass(frozen=True)
class User:
    """One ``[serve.users.NAME]`` section, checked."""

    name: str
    password_hash: str | None = field(default=None, repr=False)
    password_env: str | None = None
    token_sha256: frozenset[str] = field(default=frozenset(), repr=False)
    token_env: str | None = None
    engines: frozenset[str] | None = None
    read_only: bool = False

    def check_password(self, password: str) -> bool:
        """Whether ``password`` is this user's, in time independent of where it differs."""
        if self.password_hash is not None:
            _, n, r, p, salt, key = self.password_hash.split("$")
            got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt),
                                 n=int(n), r=int(r), p=int(p), dklen=len(base64.b64decode(key)))
            return hmac.compare_digest(got, base64.b64decode(key))
        if self.password_env is not None:
            expected = os.environ.get(self.password_env)
            return expected is not None and hmac.compare_digest(password.encode(),
                                                                expected.encode())
        return False

    def check_token(self, token: str) -> bool:
        """Whether ``token`` is one of this user's static bearer tokens."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        if any(hmac.compare_digest(digest, known) for known in self.token_sha256):
            return True
        expected = os.environ.get(self.token_env) if self.token_env else None
        return bool(expected) and hmac.compare_digest(token.encode(), expected.encode())  # type: ignore[union-attr]

    def may_use(self, engine: str) -> bool:
        return self.engines is None or engine in self.engines

    @property
    def principal(self) -> Principal:
        """This user as the statement pipeline knows them: a user who shares the server."""
        return Principal(self.name, self.engines, self.read_only, shared=True)


#: The user of a service without users: every engine, reads and writes.
ANONYMOUS = User("anonymous")


@dataclass(frozen=True)
class ServeSettings:
    """A checked ``[serve]`` section, with command-line overrides applied."""

    host: str = "127.0.0.1"
    port: int = 31337
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False
    max_queries: int = 64
    max_queries_per_user: int = 8
    query_timeout: float = 300.0
    max_rows: int = 0
    max_bytes: int = 0
    max_request_bytes: int = 16 * 1024 * 1024
    max_statement_bytes: int = 1024 * 1024
    session_idle: float = 3600.0
    query_memory: str | None = None
    transactions: bool = False
    transaction_idle: float = 60.0
    ticket_idle: float = 60.0
    login_failures: int = 3
    shutdown_grace: float = 10.0
    any_file: bool = False
    users: Mapping[str, User] = field(default_factory=dict)
    capture: CaptureSettings | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def auth(self) -> bool:
        return bool(self.users)

    @property
    def scheme(self) -> str:
        return "grpc+tls" if self.tls else "grpc+tcp"

    def check_exposure(self) -> None:
        """Refuse a non-loopback address without users and TLS, unless ``insecure``.

        Raises:
            ConfigError: the service would be reachable from other machines unprotected.
        """
        if self.insecure or is_loopback(self.host):
            return
        missing = [what for what, ok in (("users", self.auth), ("TLS", self.tls)) if not ok]
        if missing:
            raise ConfigError(
                f"refusing to listen on {self.host} without {' and '.join(missing)}",
                key="serve.host",
                hint="declare [serve.users.NAME] and tls_cert/tls_key, listen on 127.0.0.1, "
                     "or pass --insecure if the network is trusted")

    @classmethod
    def from_config(cls, config: GatewayConfig, **overrides: Any) -> ServeSettings:
        """Check ``config.serve``; ``overrides`` (from the command line) win when not None.

        Raises:
            ConfigError: a wrong key or value, naming the file and the key.
        """
        def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
            return ConfigError(message, path=config.path, key=key, hint=hint)

        values, _ = check_options("serve", config.serve, SERVE_OPTIONS, fail)
        for key, value in overrides.items():
            if value is not None:
                values[key] = value
        for key in ("max_queries", "max_queries_per_user", "max_request_bytes",
                    "max_statement_bytes"):
            if values[key] <= 0:
                raise fail(f"serve.{key}", "must be a positive integer")
        for key in ("transaction_idle", "ticket_idle"):
            if values[key] <= 0:
                raise fail(f"serve.{key}", "must be a positive number of seconds")
        for key in ("max_rows", "max_bytes", "query_timeout", "session_idle", "shutdown_grace",
                    "login_failures"):
            if values[key] < 0:
                raise fail(f"serve.{key}", "must not be negative")
        if (values["tls_cert"] is None) != (values["tls_key"] is None):
            raise fail("serve.tls_key" if values["tls_key"] is None else "serve.tls_cert",
                       "missing", "TLS needs both tls_cert and tls_key")
        tls = {k: _path(values[k], config.base_dir, f"serve.{k}", fail)
               for k in ("tls_cert", "tls_key")}
        users = {name: _check_user(name, section, config, fail)
                 for name, section in values.pop("users").items()}
        section = values.pop("capture")
        capture = None if section is None else CaptureSettings.from_section(
            section, config.base_dir, list(config.engines), config.path)
        return cls(**{**values, **tls}, users=users, capture=capture)


def _path(value: str | None, base: Path, key: str, fail: Any) -> Path | None:
    if value is None:
        return None
    path = Path(value) if os.path.isabs(value) else base / value
    if not path.is_file():
        raise fail(key, f"file not found: {path}")
    return path


def _check_user(name: str, section: Any, config: GatewayConfig, fail: Any) -> User:
    prefix = f"serve.users.{name}"
    if not isinstance(section, Mapping):
        raise fail(prefix, "must be a table")
    values, _ = check_options(prefix, section, USER_OPTIONS, fail)
    if values["password_hash"] is not None:
        _check_hash(values["password_hash"], fail, f"{prefix}.password_hash")
    if not any(values[k] for k in USER_OPTIONS if k not in ("engines", "read_only")):
        raise fail(prefix, "has no password and no token",
                   "set password_hash, password_env, token_sha256 or token_env")
    engines = values["engines"]
    if engines is not None:
        unknown = [e for e in engines if e not in config.engines]
        if unknown:
            raise fail(f"{prefix}.engines", f"names no declared engine: {unknown[0]!r}",
                       "declared engines: " + ", ".join(config.engines))
        engines = frozenset(engines)
    tokens = values["token_sha256"]
    if not all(isinstance(t, str) and len(t) == 64 for t in tokens):
        raise fail(f"{prefix}.token_sha256", "must be hex SHA-256 digests (64 characters)",
                   "python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode())"
                   ".hexdigest())' TOKEN")
    return User(name=name, password_hash=values["password_hash"],
                password_env=values["password_env"],
                token_sha256=frozenset(t.lower() for t in tokens), token_env=values["token_env"],
                engines=engines, read_only=values["read_only"])


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
