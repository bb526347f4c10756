"""ODBC connection strings: reading and writing ``Key=Value;...``, and ADO spellings.

Used by the odbc engine and by ``arrowgate lake check`` (a SQL Server DuckLake
catalog is read through pyodbc). Values holding ``;``, ``{`` or ``}`` or edge
spaces are written ``{...}`` with ``}`` doubled, as the ODBC grammar says.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.errors import ConfigError

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
DEFAULT_MSSQL_DRIVER = "ODBC Driver 18 for SQL Server"


def parse_connection_string(conn: str) -> dict[str, str]:
    """The keys (lower-cased) of an ADO/ODBC-style ``Key=Value;...`` string; ``{..}`` quoting kept out.

    Raises:
        ConfigError: a part without ``=``, or a ``{`` never closed.
    """
    out: dict[str, str] = {}
    pos = 0
    while pos < len(conn):
        end_key = conn.find("=", pos)
        if end_key < 0:
            if conn[pos:].strip(" ;"):
                raise ConfigError(f"not a connection string: {conn[pos:pos + 20]!r} "
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
                raise ConfigError("a '{' in the connection string is never closed",
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


def quote_value(value: str) -> str:
    """A value as it must be written in a connection string (braced when it needs it)."""
    if any(ch in value for ch in ";{}") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


def format_connection_string(keys: Mapping[str, str]) -> str:
    """``Key=Value;...`` from a mapping, each value quoted as it needs."""
    return ";".join(f"{key}={quote_value(value)}" for key, value in keys.items())


def mssql_odbc_string(conn: str, driver: str = DEFAULT_MSSQL_DRIVER) -> str:
    """The ODBC connection string pyodbc needs for an ADO-style SQL Server string.

    ``Server=host,1433;Database=lake;User Id=app;Password=p;Encrypt=yes`` becomes
    ``DRIVER={ODBC Driver 18 for SQL Server};SERVER=host,1433;DATABASE=lake;UID=app;PWD=p;Encrypt=yes``.
    A ``Driver=`` key in the string wins over ``driver``; keys with no ODBC
    spelling are passed through as written.

    Raises:
        ConfigError: no Server, or no Database.
    """
    keys = parse_connection_string(conn)
    if "server" not in keys and "data source" not in keys and "address" not in keys:
        raise ConfigError("the SQL Server connection string has no Server=",
                          hint="write Server=host,1433;Database=lake;...")
    if "database" not in keys and "initial catalog" not in keys:
        raise ConfigError("the SQL Server connection string has no Database=",
                          hint="name the database: Database=lake")
    out = {"DRIVER": keys.pop("driver", driver)}
    for key, value in keys.items():
        out[_ADO_TO_ODBC.get(key, key)] = value
    return "DRIVER={" + out.pop("DRIVER") + "}" + "".join(
        f";{key}={quote_value(value)}" for key, value in out.items())
