"""Where a lake's catalog lives: parsing ``catalog = "KIND:TARGET"`` and printing it safely.

``postgres:`` takes a libpq keyword string or URI, ``sqlite:`` and ``duckdb:``
a file path, ``mssql:`` an ADO-style SQL Server connection string
(``Server=host,1433;Database=lake;User Id=app;Password=...``). Missing libpq
keys (host, user, password) come from the usual ``PG*`` environment
variables, which libpq reads itself; nothing here ever prints a password.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.config import redact
from gateway.drivers.odbc import mask_password, parse_connection_string
from gateway.errors import ConfigError

KINDS = ("postgres", "sqlite", "duckdb", "mssql")
#: Extra DuckDB extensions each catalog kind needs beside ``ducklake``.
KIND_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "postgres": ("postgres_scanner",),
    "sqlite": ("sqlite_scanner",),
    "duckdb": (),
    "mssql": (),
}
_ALIASES = {"postgresql": "postgres", "pg": "postgres", "sqlserver": "mssql", "sqlite3": "sqlite"}


@dataclass(frozen=True)
class CatalogSpec:
    """A parsed ``catalog`` option.

    Attributes:
        kind: ``postgres``, ``sqlite``, ``duckdb`` or ``mssql``.
        target: what follows ``KIND:`` (a DSN, a URI or a path).
    """

    kind: str
    target: str

    @classmethod
    def parse(cls, value: str, *, key: str = "catalog", base_dir: Path | None = None) -> CatalogSpec:
        """Read ``KIND:TARGET``; relative file paths are made absolute against ``base_dir``.

        Raises:
            ConfigError: no kind, an unknown kind, or an empty target.
        """
        kind, sep, target = value.partition(":")
        kind = _ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if not sep or kind not in KINDS:
            raise ConfigError(
                f"cannot tell where the catalog lives from {redact(value)!r}", key=key,
                hint='write "postgres:dbname=... host=...", "sqlite:PATH", "duckdb:PATH" '
                     'or "mssql:Server=...;Database=..."')
        target = target.strip()
        if not target:
            raise ConfigError(f"the {kind} catalog names nothing after {kind + ':'!r}", key=key,
                              hint={"postgres": "add a libpq string: dbname=lake host=...",
                                    "mssql": "add Server=...;Database=..."}.get(
                                        kind, "add the catalog file's path"))
        if kind in ("sqlite", "duckdb"):
            path = Path(os.path.expanduser(target))
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            target = str(path)
        return cls(kind, target)

    @property
    def attach_target(self) -> str:
        """What follows ``ducklake:`` in DuckDB's ATTACH (the plain path for a DuckDB file)."""
        return self.target if self.kind == "duckdb" else f"{self.kind}:{self.target}"

    @property
    def extensions(self) -> tuple[str, ...]:
        return KIND_EXTENSIONS[self.kind]

    def printable(self) -> str:
        """The catalog with any password masked."""
        if self.kind == "mssql":
            return f"mssql:{mask_password(self.target)}"
        return f"{self.kind}:{redact(self.target)}"

    def secrets(self) -> list[str]:
        """The secret values inside the target, to scrub from messages that echo it."""
        found: list[str] = []
        if self.kind == "postgres":
            found += [v for k, v in parse_libpq(self.target).items() if k == "password" and v]
        elif self.kind == "mssql":
            found += [v for k, v in parse_connection_string(self.target).items()
                      if k in ("password", "pwd") and v]
        return found


def scrub(message: str, secrets: list[str]) -> str:
    """``message`` with every secret value replaced by ``***`` (and known patterns masked)."""
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "***")
    return str(redact(message))


# -- PostgreSQL ------------------------------------------------------------
_LIBPQ_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


def parse_libpq(dsn: str) -> dict[str, str]:
    """The keys of a libpq keyword string (``dbname=x host=y``) or URI, unquoted.

    Raises:
        ConfigError: a keyword string that libpq would reject.
    """
    if dsn.startswith(("postgresql://", "postgres://")):
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(dsn)
        out = {k: v for k, v in (
            ("host", parts.hostname or ""), ("port", str(parts.port or "")),
            ("user", unquote(parts.username or "")), ("password", unquote(parts.password or "")),
            ("dbname", unquote(parts.path.lstrip("/"))),
        ) if v}
        return out
    out = {}
    pos = 0
    while pos < len(dsn):
        if dsn[pos:].strip() == "":
            break
        match = _LIBPQ_PAIR.match(dsn, pos)
        if match is None:
            raise ConfigError(f"not a libpq connection string near {redact(dsn[pos:pos + 20])!r}",
                              hint="write key=value pairs separated by spaces: dbname=lake host=...")
        value = match.group(2)
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[match.group(1).lower()] = value
        pos = match.end()
    return out


