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

        The unnamed postgres secret is the one the scanner merges into every
        connection string it opens; ``OR REPLACE`` lets each new connection of
        the same database run it again.
        """
        if self.kind != "postgres":
            return None
        password = parse_libpq(self.target).get("password")
        if not password:
            return None
        return "CREATE OR REPLACE SECRET (TYPE postgres, PASSWORD '{}')".format(
            password.replace("'", "''"))

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
            found += [v for k, v in parse_mssql(self.target).items()
                      if k in ("password", "pwd") and v]
        return found


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


# -- SQL Server --------------------------------------------------------------
def parse_mssql(conn: str) -> dict[str, str]:
    """The keys (lower-cased) of an ADO/ODBC-style ``Key=Value;...`` string; ``{..}`` quoting kept out."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(conn):
        end_key = conn.find("=", pos)
        if end_key < 0:
            if conn[pos:].strip(" ;"):
                raise ConfigError(f"not a SQL Server connection string: {conn[pos:pos + 20]!r} "
                                  "has no '='", hint="write Key=Value pairs separated by ';'")
            break
        key = conn[pos:end_key].strip(" ;").lower()
        pos = end_key + 1
        if conn[pos:pos + 1] == "{":
            value, i = [], pos + 1
            while i < len(conn):
                if conn[i] == "}":
                    if conn[i + 1:i + 2] == "}":
                        value.append("}")
                        i += 2
                        continue
                    break
                value.append(conn[i])
                i += 1
            else:
                raise ConfigError("a '{' in the SQL Server connection string is never closed",
                                  hint="close it with '}' (write '}}' for a literal brace)")
            out[key] = "".join(value)
            pos = conn.find(";", i)
            pos = len(conn) if pos < 0 else pos + 1
        else:
            end = conn.find(";", pos)
            end = len(conn) if end < 0 else end
            out[key] = conn[pos:end].strip()
            pos = end + 1
    return out


#: ADO keys and the ODBC keys pyodbc's drivers understand for them.
_ADO_TO_ODBC = {
    "server": "SERVER", "data source": "SERVER", "address": "SERVER", "addr": "SERVER",
    "database": "DATABASE", "initial catalog": "DATABASE",
    "user id": "UID", "uid": "UID", "user": "UID",
    "password": "PWD", "pwd": "PWD",
    "encrypt": "Encrypt", "trustservercertificate": "TrustServerCertificate",
    "trust server certificate": "TrustServerCertificate",
    "authentication": "Authentication", "application name": "APP", "app": "APP",
    "connect timeout": "Connection Timeout", "connection timeout": "Connection Timeout",
}
DEFAULT_ODBC_DRIVER = "ODBC Driver 18 for SQL Server"


def mssql_odbc_string(conn: str, driver: str = DEFAULT_ODBC_DRIVER) -> str:
    """The ODBC connection string pyodbc needs for the catalog's ADO-style string.

    ``Server=host,1433;Database=lake;User Id=app;Password=p;Encrypt=yes`` becomes
    ``DRIVER={ODBC Driver 18 for SQL Server};SERVER=host,1433;DATABASE=lake;UID=app;PWD=p;Encrypt=yes``.
    A ``Driver=`` key in the string wins over ``driver``; keys with no ODBC
    spelling are passed through as written.

    Raises:
        ConfigError: no Server, or no Database (the catalog lives in one database).
    """
    keys = parse_mssql(conn)
    if "server" not in keys and "data source" not in keys and "address" not in keys:
        raise ConfigError("the SQL Server catalog string has no Server=",
                          hint="write mssql:Server=host,1433;Database=lake;...")
    if "database" not in keys and "initial catalog" not in keys:
        raise ConfigError("the SQL Server catalog string has no Database=",
                          hint="name the database that holds the catalog: Database=lake")
    parts = [f"DRIVER={{{keys.pop('driver', driver)}}}"]
    for key, value in keys.items():
        odbc_key = _ADO_TO_ODBC.get(key, key)
        if any(ch in value for ch in ";{}") or value != value.strip():
            value = "{" + value.replace("}", "}}") + "}"
        parts.append(f"{odbc_key}={value}")
    return ";".join(parts)
