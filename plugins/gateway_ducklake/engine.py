"""The ``ducklake`` engine: a DuckLake lakehouse, run by a DuckDB release that has the extension.

A :class:`DuckLakeEngine` is a versioned DuckDB engine (``gateway_duckdb``)
that also loads ``ducklake`` and the scanner its catalog needs, attaches the
lake under the engine's name and makes it the default database, so
``SELECT * FROM t`` and ``ducklake_snapshots('NAME')`` both work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.engine import EnginePrepared, EngineResult, EngineSession, Option
from gateway.errors import ConfigError, EngineConnectionError, GatewayError, QueryError
from gateway.masking import mask_text
from gateway_duckdb.engine import DuckDBEngine
from gateway_duckdb.mount import literal, quote_ident
from gateway_ducklake.catalog import CatalogSpec, parse_libpq

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.result import QueryHandle

#: DuckDB releases whose extensions exist offline, newest first (docs/ducklake.md,
#: "How it runs").
#: The catalog format each one writes is in ``gateway_ducklake.health.CATALOG_FORMATS``.
_INHERITED = ("settings", "secrets", "isolation", "timeout", "extensions", "files")
_ATTACH_OPTION = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def default_version(kind: str) -> str:
    """The newest DuckDB release for which ducklake and the catalog's scanner both exist."""
    from gateway_duckdb.install import extension_versions
    from gateway_ducklake.catalog import KIND_EXTENSIONS

    versions = set(extension_versions("ducklake"))
    for ext in KIND_EXTENSIONS[kind]:
        versions &= set(extension_versions(ext))
    return max(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def extension_file_version(path: Path) -> tuple[str, str] | None:
    """(DuckDB version, ABI) from a ``.duckdb_extension`` file's metadata footer, or None.

    DuckDB appends 512 bytes to every extension: eight 32-byte fields in
    reverse order (magic ``4``, platform, DuckDB version, extension version,
    ABI), then the signature.
    """
    try:
        with path.open("rb") as fh:
            fh.seek(-512, os.SEEK_END)
            footer = fh.read(256)
    except OSError:
        return None
    fields = [footer[i * 32:(i + 1) * 32].rstrip(b"\0").decode("ascii", "replace")
              for i in range(8)][::-1]
    if fields[0] != "4":
        return None
    return fields[2].removeprefix("v"), fields[4] or "CPP"


class DuckLakeEngine(DuckDBEngine):
    """A DuckLake lakehouse whose catalog is PostgreSQL, SQLite, a DuckDB file or SQL Server."""

    type_name = "ducklake"
    description = "DuckLake: Parquet data, catalog in PostgreSQL, SQLite, a DuckDB file or SQL Server"

    options: ClassVar[dict[str, Option]] = {
        "catalog": Option((str,), required=True,
                          help='where the catalog lives: "postgres:dbname=... host=...", '
                               '"sqlite:PATH", "duckdb:PATH" or "mssql:Server=...;Database=..."'),
        "data_path": Option((str,), help="where the Parquet files go; needed to create a lake, "
                            "an existing catalog remembers its own"),
        "duckdb": Option((str,), help='the DuckDB release to run, e.g. "1.5.5" (default: the '
                         "newest whose ducklake extension is installable)"),
        "extension_path": Option((str, list), help="extension file(s) LOADed instead of the "
                                 "bundled ducklake; for SQL Server the mssql and mssql_ducklake "
                                 "files"),
        "metadata_schema": Option((str,), help="the schema holding the catalog tables"),
        "data_inlining_row_limit": Option((int,), minimum=0, help="inserts of fewer rows are kept in the "
                                          "catalog until flushed (0: always write Parquet)"),
        "encrypted": Option((bool,), help="encrypt the Parquet files the lake writes"),
        "read_only": Option((bool,), default=False, help="attach the lake read-only"),
        "automatic_migration": Option((bool,), default=False,
                                      help="upgrade a catalog written by an older DuckLake"),
        "max_retry_count": Option((int,), minimum=0, help="commit retries on a conflict with another "
                                  "writer (DuckLake's default: 10)"),
        "attach_options": Option((dict,), default={},
                                 help="further DuckLake ATTACH options, e.g. "
                                      "{ SNAPSHOT_VERSION = 3 }"),
        **{k: v for k, v in DuckDBEngine.options.items() if k in _INHERITED},
    }

    def __init__(self, name: str, options: Any, sources: Any):
        self.spec = CatalogSpec.parse(options["catalog"], key=f"engines.{name}.catalog")
        if self.spec.kind == "postgres" and "sslpassword" in parse_libpq(self.spec.target):
            raise ConfigError(
                "sslpassword cannot be passed safely: the postgres scanner takes only the "
                "password from a DuckDB secret, and anything left in the catalog string is "
                "readable by every SQL user (duckdb_databases())",
                key=f"engines.{name}.catalog", engine=name,
                hint="use a client key file without a passphrase (sslkey=...), readable only "
                     "by the gateway's user")
        self.extension_files = self._extension_files(name, options)
        version = options.get("duckdb") or default_version(self.spec.kind)
        config = dict(options)
        # What the DuckDB engine reads: an in-memory database whose default is the lake.
        config.update(version=version, database=":memory:", read_only=False,
                      path=None, cli=None)
        super().__init__(name, config, sources)
        self.lake_read_only = bool(options.get("read_only"))
        bundled = [] if self.extension_files else ["ducklake"]
        from gateway_duckdb.install import canonical_extension

        self.extensions = list(dict.fromkeys(
            [*self.extensions, *(canonical_extension(e) for e in [*bundled, *self.spec.extensions])]))
        for key in self.config["attach_options"]:
            if not _ATTACH_OPTION.match(key):
                raise ConfigError("not a DuckLake ATTACH option name",
                                  key=f"engines.{name}.attach_options.{key}")
            if key.upper() == "METADATA_PARAMETERS" and self.spec.metadata_parameters():
                raise ConfigError(
                    "METADATA_PARAMETERS carries the catalog's password secret",
                    key=f"engines.{name}.attach_options.{key}",
                    hint="put the catalog's connection keys in catalog = \"postgres:...\"")
        self._check_extension_files(version)

    @classmethod
    def describe_version(cls, options: Any) -> str | None:
        if options.get("duckdb"):
            return str(options["duckdb"])
        try:
            return default_version(CatalogSpec.parse(options["catalog"]).kind)
        except (ConfigError, KeyError):
            return None

    @classmethod
    def describe_location(cls, options: Any) -> dict[str, str]:
        version = cls.describe_version(options)
        return super().describe_location({**options, "version": version})

    # -- configuration checks ---------------------------------------------------
    def _extension_files(self, name: str, options: Any) -> list[Path]:
        raw = options.get("extension_path")
        paths = [raw] if isinstance(raw, str) else list(raw or [])
        key = f"engines.{name}.extension_path"
        if self.spec.kind == "mssql" and not paths:
            raise ConfigError(
                "a SQL Server catalog needs the SQL Server DuckLake extension, which is not "
                "bundled", key=key, engine=name,
                hint='set extension_path = ["/path/mssql.duckdb_extension", '
                     '"/path/mssql_ducklake.duckdb_extension"] (files built for DuckDB 1.5.5)')
        files = []
        for p in paths:
            if not isinstance(p, str):
                raise ConfigError("extension paths must be strings", key=key)
            path = Path(os.path.expanduser(p))
            if not path.is_file():
                raise ConfigError(f"the extension file {path} does not exist", key=key,
                                  engine=name, hint="point extension_path at a "
                                  ".duckdb_extension file built for this engine's DuckDB")
            files.append(path.resolve())
        return files

    def _check_extension_files(self, version: str) -> None:
        for path in self.extension_files:
            found = extension_file_version(path)
            if found is None:
                continue
            built_for, abi = found
            if abi == "CPP" and built_for != version:
                raise ConfigError(
                    f"{path.name} was built for DuckDB {built_for}, and this engine runs "
                    f"DuckDB {version}", key=f"engines.{self.name}.extension_path",
                    engine=self.name,
                    hint=f'set duckdb = "{built_for}", or get a build of the extension for '
                         f"DuckDB {version}")

    # -- setup -----------------------------------------------------------------------
    def attach_sql(self) -> str:
        """The ATTACH statement; a PostgreSQL password is in a secret instead
        (:meth:`secret_statements`)."""
        opts: dict[str, Any] = {}
        if self.config.get("data_path"):
            opts["DATA_PATH"] = os.path.expanduser(self.config["data_path"])
        for key, name in (("metadata_schema", "METADATA_SCHEMA"),
                          ("data_inlining_row_limit", "DATA_INLINING_ROW_LIMIT"),
                          ("encrypted", "ENCRYPTED")):
            if self.config.get(key) is not None:
                opts[name] = self.config[key]
        if self.config["automatic_migration"]:
            opts["AUTOMATIC_MIGRATION"] = True
        opts.update({k.upper(): v for k, v in self.config["attach_options"].items()})
        parts = [f"{k} {literal(v)}" for k, v in opts.items()]
        metadata = self.spec.metadata_parameters()
        if metadata:
            pairs = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in metadata.items())
            parts.append(f"METADATA_PARAMETERS MAP {{{pairs}}}")
        if self.lake_read_only:
            parts.append("READ_ONLY")
        options = f" ({', '.join(parts)})" if parts else ""
        return (f"ATTACH IF NOT EXISTS {literal('ducklake:' + self.spec.attach_target)} "
                f"AS {quote_ident(self.name)}{options}")

    def secret_statements(self) -> list[str]:
        """The engine's ``secrets``, and the catalog's password for the postgres scanner."""
        secret = self.spec.secret_sql()
        return [*super().secret_statements(), *([secret] if secret else [])]

    def setup_sql(self) -> list[str]:
        stmts = [f"LOAD {literal(str(p))}" for p in self.extension_files]
        if self.config.get("max_retry_count") is not None:
            stmts.append(f"SET ducklake_max_retry_count = {int(self.config['max_retry_count'])}")
        if self.spec.kind in ("sqlite", "duckdb"):
            Path(self.spec.target).parent.mkdir(parents=True, exist_ok=True)
        data_path = os.path.expanduser(self.config.get("data_path") or "")
        if self.config.get("files") == "sources" and data_path and "://" not in data_path:
            # DuckLake makes it on its first write by walking up from the root, which the
            # lockdown (lockdown_sql) no longer lets it look at
            Path(data_path).mkdir(parents=True, exist_ok=True)
        stmts += [self.attach_sql(), f"USE {quote_ident(self.name)}"]
        return stmts

    def connection_sql(self) -> list[str]:
        return [f"USE {quote_ident(self.name)}"]

    def allowed_files(self) -> tuple[list[str], list[str]]:
        """The sources, and a file catalog with the files its database writes beside it.

        The data path is added by :meth:`lockdown_sql`, from the attached lake.
        """
        paths, folders = super().allowed_files()
        companions = {"sqlite": ("", "-journal", "-wal", "-shm"), "duckdb": ("", ".wal")}
        paths += [self.spec.target + end for end in companions.get(self.spec.kind, ())]
        return paths, folders

    def lockdown_sql(self) -> list[str]:
        """The base lockdown with the lake's data path left open as well.

        The data path is read from the attached lake (``ducklake_options``), since
        an existing catalog remembers its own and ``data_path`` may be unset; a
        ``SET`` takes no subquery, so it passes through a variable.
        """
        if self.config.get("files") != "sources":
            return []
        paths, folders = self.allowed_files()
        options = (f"FROM ducklake_options({literal(self.name)}) "
                   "WHERE option_name = 'data_path'")
        return [
            # the folder, and the folder itself as a path: DuckLake creates it on its first write
            f"SET VARIABLE arrowgate_data_folder = (SELECT coalesce(list(rtrim(value, '/') || '/'), "
            f"[]) {options})",
            f"SET VARIABLE arrowgate_data_path = (SELECT coalesce(list(rtrim(value, '/')), []) "
            f"{options})",
            f"SET allowed_paths = list_concat({literal(paths)}::VARCHAR[], "
            "getvariable('arrowgate_data_path'))",
            f"SET allowed_directories = list_concat({literal(folders)}::VARCHAR[], "
            "getvariable('arrowgate_data_folder'))",
            "RESET VARIABLE arrowgate_data_folder",
            "RESET VARIABLE arrowgate_data_path",
            "SET enable_external_access = false"]

    def connect(self) -> None:
        try:
            super().connect()
        except GatewayError as exc:
            raise self._explain(exc) from None

    def reattach(self) -> None:
        """Detach the lake and attach it again (what a new process pays to open the lake).

        Raises:
            GatewayError: the lake could not be attached again.
        """
        from gateway.result import QueryHandle

        # on one connection: one-shot statements would each take a pooled connection,
        # and the one left after "USE memory" would answer later queries from memory
        session = self.open_session()
        try:
            for sql in ("USE memory", f"DETACH {quote_ident(self.name)}", self.attach_sql(),
                        f"USE {quote_ident(self.name)}"):
                handle = QueryHandle(self.name, 0, sql)
                try:
                    session.execute(sql, None, handle).reader.read_all()
                except GatewayError as exc:
                    raise self._explain(exc) from None
                finally:
                    handle.finish()
        finally:
            session.close()
        # pooled connections whose current database was the detached lake now sit in
        # memory: they are closed, and the next statements clone fresh ones (USE lake)
        reset = getattr(self._running_session(), "reset_idle", None)
        if reset is not None:
            reset()

    #: the in-memory database only: on the lake itself, CHECKPOINT is DuckLake's
    #: maintenance (it flushes inlined rows, expires snapshots, rewrites files)
    rest_sql = "CHECKPOINT memory"

    # -- queries -----------------------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        try:
            result = super().execute(sql, parameters)
        except GatewayError as exc:
            raise self._explain(exc) from None
        return result

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        """A connection of its own for one-shot statements too (see the base class): a
        cancel or a timeout then interrupts that statement's connection, never every
        running query of the lake; errors still get the lake's hints. ``read_only``
        changes nothing, as for DuckDB."""
        opener = getattr(self._running_session(), "open", None)
        if opener is None or (one_shot and self.config["isolation"] == "process"):
            return super().open_session(one_shot, read_only)
        return _ExplainedSession(self, opener(self, one_shot))

    # -- errors --------------------------------------------------------------------------
    def _explain(self, exc: GatewayError) -> GatewayError:
        """The error with secrets masked and, for known DuckLake failures, what to do."""
        message = mask_text(exc.message)
        message = message.replace(f"ducklake:{self.spec.attach_target}", self.spec.printable())
        lower = message.lower()
        where = self.spec.printable()
        if "catalog version mismatch" in lower or "catalog version is" in lower:
            found = re.search(r"catalog version is ([0-9.]+)", message)
            wanted = re.search(r"requires version ([0-9.]+)", message)
            newer = bool(found and wanted and _vkey(found.group(1)) > _vkey(wanted.group(1)))
            version = self.resolved_version or self.config.get("version")
            return ConfigError(
                f"the catalog {where} has format {found.group(1) if found else '?'}; "
                f"DuckDB {version}'s DuckLake reads {wanted.group(1) if wanted else '?'}",
                key=f"engines.{self.name}.duckdb", engine=self.name,
                hint=("it was written by a newer DuckLake: set duckdb = \"...\" to the release "
                      "that wrote it (see created_by in arrowgate lake check)") if newer else
                     "set automatic_migration = true to upgrade it (older DuckDBs then cannot "
                     "read it)")
        if "password authentication failed" in lower or "login failed" in lower:
            return EngineConnectionError(
                f"the catalog database refused the login: {_first_line(message)}",
                engine=self.name,
                hint="check the password: in the catalog string, through ${VAR}, or in "
                     "PGPASSWORD / ~/.pgpass for PostgreSQL")
        if "does not exist" in lower and "database" in lower and self.spec.kind == "postgres":
            return EngineConnectionError(
                f"the catalog database does not exist: {_first_line(message)}",
                engine=self.name, hint="create it first (createdb NAME), or fix dbname=")
        if "unable to connect" in lower or "connection refused" in lower \
                or "could not translate host" in lower or "timeout expired" in lower:
            return EngineConnectionError(
                f"cannot reach the catalog database: {_first_line(message)}", engine=self.name,
                hint="check host= and port=, and that the server is running and accepts "
                     "connections from here")
        if "data_path is not set" in lower:
            return ConfigError(
                f"the lake has no data path: {_first_line(message)}",
                key=f"engines.{self.name}.data_path", engine=self.name,
                hint='set data_path = "/folder/for/parquet/" (a new lake needs one; an existing '
                     "catalog remembers its own)")
        if "cannot load the extension" in lower or "was built for" in lower \
                or ("extension" in lower and "version" in lower and "built" in lower):
            return ConfigError(message, key=f"engines.{self.name}.extension_path",
                               engine=self.name,
                               hint="use an extension file built for DuckDB "
                                    f"{self.resolved_version or self.config.get('version')}")
        if "maximum retry count" in lower or ("conflict" in lower and "retr" in lower):
            retries = self.config.get("max_retry_count")
            return QueryError(
                "the commit conflicted with another writer of the lake and DuckLake's retries "
                f"({'max_retry_count = ' + str(retries) if retries is not None else 'default 10'})"
                " ran out; nothing of this statement was committed", engine=self.name,
                kind="constraint",
                hint="run the statement again; raise max_retry_count if writers often collide")
        if "transaction conflict" in lower:
            # DuckLake retries only commits it can merge; one that touched rows another
            # writer changed fails at once, as DuckDB's "TransactionContext Error"
            reason = next((line for line in message.splitlines()
                           if "transaction conflict" in line.lower()), message)
            return QueryError(
                f"the commit conflicted with another writer of the lake ({reason.strip()}); "
                "nothing of the transaction was committed", engine=self.name,
                kind="constraint",
                hint="run the transaction again from its start (its BEGIN, or the statement "
                     "alone in autocommit)")
        exc.message = message
        exc.args = (str(exc),)
        return exc


class _ExplainedSession(EngineSession):
    """A native DuckDB session of the lake, its errors explained as the lake explains them."""

    engine: DuckLakeEngine

    def __init__(self, engine: DuckLakeEngine, inner: EngineSession):
        super().__init__(engine)
        self._inner = inner

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        try:
            return self._inner.execute(sql, parameters, handle)
        except GatewayError as exc:
            raise self.engine._explain(exc) from None

    def prepare(self, sql: str) -> EnginePrepared:
        try:
            return _ExplainedPrepared(self, self._inner.prepare(sql))
        except GatewayError as exc:
            raise self.engine._explain(exc) from None

    def close(self) -> None:
        self._inner.close()


class _ExplainedPrepared(EnginePrepared):
    """A prepared statement of the lake (what the Flight service runs), its errors
    explained as the lake explains them."""

    session: _ExplainedSession

    def __init__(self, session: _ExplainedSession, inner: EnginePrepared):
        self.session = session
        self.sql = inner.sql
        self.parameter_schema = inner.parameter_schema
        self._inner = inner

    @property
    def schema(self) -> pa.Schema:
        try:
            return self._inner.schema
        except GatewayError as exc:
            raise self.session.engine._explain(exc) from None

    def execute(self, parameters: Sequence[Any] | None, handle: QueryHandle) -> EngineResult:
        try:
            return self._inner.execute(parameters, handle)
        except GatewayError as exc:
            raise self.session.engine._explain(exc) from None

    def execute_many(self, parameters: pa.Table, handle: QueryHandle) -> EngineResult | None:
        try:
            return self._inner.execute_many(parameters, handle)
        except GatewayError as exc:
            raise self.session.engine._explain(exc) from None

    def close(self) -> None:
        self._inner.close()


def _first_line(message: str) -> str:
    return " ".join(message.split())[:400]


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())

