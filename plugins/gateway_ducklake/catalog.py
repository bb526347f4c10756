"""Where a lake's catalog lives: parsing ``catalog = "KIND:TARGET"`` and printing it safely.

``postgres:`` takes a libpq keyword string or URI, ``sqlite:`` and ``duckdb:``
a file path, ``mssql:`` an ADO-style SQL Server connection string
(``Server=host,1433;Database=lake;User Id=app;Password=...``). Missing libpq
keys (host, user, password) come from the usual ``PG*`` environment
variables, which libpq reads itself; nothing here ever prints a password.

A PostgreSQL password never goes into the ATTACH string, which any SQL user
reads back with ``SELECT path FROM duckdb_databases()``: :meth:`CatalogSpec.
attach_target` leaves it out and :meth:`CatalogSpec.secret_sql` hands it to
the postgres scanner as an in-memory DuckDB secret (shown redacted by
``duckdb_secrets()``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.drivers.odbc import parse_connection_string
from gateway.errors import ConfigError
from gateway.masking import mask, remember

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
        if value.strip().startswith(_PG_URI_SCHEMES):  # a bare URI names its own kind
            value = "postgres:" + value.strip()
        kind, sep, target = value.partition(":")
        kind = _ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if not sep or kind not in KINDS:
            raise ConfigError(
                f"cannot tell where the catalog lives from {mask(value)!r}", key=key,
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
        spec = cls(kind, target)
        remember(*spec.secrets())
        return spec

    @property
    def attach_target(self) -> str:
        """What follows ``ducklake:`` in DuckDB's ATTACH (the plain path for a DuckDB file).

        A PostgreSQL catalog's password is left out (see :meth:`secret_sql`).
        """
        if self.kind == "duckdb":
            return self.target
        if self.kind == "postgres" and "password" in parse_libpq(self.target):
            keys = {k: v for k, v in parse_libpq(self.target).items() if k != "password"}
            return "postgres:" + libpq_string(keys)
        return f"{self.kind}:{self.target}"

    def secret_sql(self) -> str | None:
        """The ``CREATE SECRET`` that gives the postgres scanner the catalog's password, or None.

        The secret is named (:data:`CATALOG_SECRET`) and handed to the lake's ATTACH
        alone, through ``METADATA_PARAMETERS`` (:meth:`metadata_parameters`). The
        scanner offers its *unnamed* secret to every server an ``ATTACH`` or
        ``postgres_query`` names; a named one only where a statement names it, and
        the statement pipeline refuses such statements on an engine holding
        credentials (``gateway.sql.reach``). ``OR REPLACE`` lets each new
        connection of the same database run it again.
        """
        if self.kind != "postgres":
            return None
        password = parse_libpq(self.target).get("password")
        if not password:
            return None
        return "CREATE OR REPLACE SECRET {} (TYPE postgres, PASSWORD '{}')".format(
            CATALOG_SECRET, password.replace("'", "''"))

    def metadata_parameters(self) -> dict[str, str]:
        """What the lake's ATTACH passes to the catalog's own ATTACH: the named secret."""
        return {"SECRET": CATALOG_SECRET} if self.secret_sql() else {}

    @property
    def extensions(self) -> tuple[str, ...]:
        return KIND_EXTENSIONS[self.kind]

    def printable(self) -> str:
        """The catalog with any password masked."""
        return f"{self.kind}:{mask(self.target)}"

    def secrets(self) -> list[str]:
        """The passwords inside the target (registered with :func:`gateway.masking.remember`)."""
        found: list[str] = []
        if self.kind == "postgres":
            found += [v for k, v in parse_libpq(self.target).items() if k == "password" and v]
        elif self.kind == "mssql":
            found += [v for k, v in parse_connection_string(self.target).items()
                      if k in ("password", "pwd") and v]
        return found


#: the name of the DuckDB secret holding a PostgreSQL catalog's password
CATALOG_SECRET = "arrowgate_lake_catalog"


# -- PostgreSQL ------------------------------------------------------------
_LIBPQ_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")
_PG_URI_SCHEMES = ("postgresql://", "postgres://")


def libpq_string(keys: dict[str, str]) -> str:
    """A libpq keyword string from its keys, quoting values that need it."""
    def value(v: str) -> str:
        if v and not any(ch in v for ch in " \t\n'\\"):
            return v
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"

    return " ".join(f"{k}={value(v)}" for k, v in keys.items())


def _parse_uri(uri: str) -> dict[str, str]:
    """The keys of a ``postgresql://`` URI: userinfo, every host and port, the database and
    the query parameters (libpq's URI form, several hosts included)."""
    from urllib.parse import parse_qsl, unquote

    rest = uri.split("://", 1)[1]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    out: dict[str, str] = {}
    if at:
        user, colon, password = userinfo.partition(":")
        out["user"] = unquote(user)
        if colon:
            out["password"] = unquote(password)
    hosts, ports = [], []
    for item in hostlist.split(","):
        if item.startswith("["):  # [IPv6 address]:port
            host, _, port = item[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        hosts.append(unquote(host))
        ports.append(port)
    if any(hosts):
        out["host"] = ",".join(hosts)
    if any(ports):
        out["port"] = ",".join(ports)
    if path:
        out["dbname"] = unquote(path)
    out.update((k.lower(), v) for k, v in parse_qsl(query, keep_blank_values=True))
    return {k: v for k, v in out.items() if v or k == "password"}


def parse_libpq(dsn: str) -> dict[str, str]:
    """The keys of a libpq keyword string (``dbname=x host=y``) or URI, unquoted.

    Raises:
        ConfigError: a keyword string that libpq would reject.
    """
    if dsn.startswith(_PG_URI_SCHEMES):
        return _parse_uri(dsn)
    out = {}
    pos = 0
    while pos < len(dsn):
        if dsn[pos:].strip() == "":
            break
        match = _LIBPQ_PAIR.match(dsn, pos)
        if match is None:
            raise ConfigError(f"not a libpq connection string near {mask(dsn[pos:pos + 20])!r}",
                              hint="write key=value pairs separated by spaces: dbname=lake host=...")
        value = match.group(2)
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[match.group(1).lower()] = value
        pos = match.end()
    return out
