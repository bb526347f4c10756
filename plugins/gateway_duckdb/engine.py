"""The ``duckdb`` engine: the installed DuckDB, any other release, a custom build or a CLI.

Where the engine runs is chosen by its options:

==========================  ====================================================
(none of the below)         the installed ``duckdb`` module, in process
``version = "1.5.5"``       that release (installed on first use) as an ADBC
                            driver, in process
``path = "..."``            a custom build (wheel, folder or shared library) as
                            an ADBC driver, in process
``isolation = "process"``   any of the above in a worker process
``cli = "..."``             a DuckDB binary, run once per query
==========================  ====================================================

Every path runs the same setup after connecting: LOAD of the extensions the
engine needs (:attr:`DuckDBEngine.required_extensions` plus the
``extensions`` option), the ``secrets``, the ``settings``, the source views, then
:meth:`DuckDBEngine.setup_sql`.

Credentials go in ``secrets``, created as in-memory DuckDB secrets, which
``duckdb_secrets()`` shows redacted. A setting is readable by any SQL user
(``current_setting()``), so a ``settings`` key that names a credential is
refused. A subclass (the ``ducklake`` engine) adds
extensions and ATTACH statements through those two.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gateway.engine import CatalogColumn, Engine, EngineResult, Option
from gateway.errors import ConfigError, GatewayError, QueryError
from gateway.masking import is_secret_key
from gateway_duckdb.mount import SOURCES_CATALOG, literal, mount_statements, quote_ident
from gateway_duckdb.translate import translate

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DuckDBEngine", "translate"]

_SETTING_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_SEARCH_PATH = f"SET search_path = 'main,{SOURCES_CATALOG}.main'"


class Session(Protocol):
    """What every execution path offers the engine."""

    def execute(self, sql: str, parameters: Sequence[Any] | None) -> pa.RecordBatchReader: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...


class DuckDBEngine(Engine):
    """DuckDB: the installed one in process, or any release, custom build or CLI beside it."""

    type_name = "duckdb"
    description = "DuckDB: the installed one, any release (version), a custom build (path) or a CLI"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True

    options: ClassVar[dict[str, Option]] = {
        "database": Option((str,), default=":memory:",
                           help="a DuckDB database file; in memory when absent"),
        "read_only": Option((bool,), default=False, help="open the database read-only"),
        "settings": Option((dict,), default={},
                           help="DuckDB settings applied with SET, e.g. { threads = 2 }"),
        "secrets": Option((dict,), default={}, secret=True,
                          help="DuckDB secrets created in memory at connect, e.g. "
                               '{ web = { type = "http", bearer_token = "${TOKEN}" } }'),
        "version": Option((str,), help='a DuckDB release to run, e.g. "1.5.5" (installed into '
                          "the arrowgate cache on first use)"),
        "path": Option((str,), help="a custom DuckDB build: a wheel, a folder holding the duckdb "
                       "package, or a shared library exporting duckdb_adbc_init"),
        "cli": Option((str,), help="a DuckDB command-line binary, run once per query"),
        "isolation": Option((str,), default="in_process", choices=("in_process", "process"),
                            help='"process" runs the engine in a worker process that may crash '
                            "or hang without taking the gateway down"),
        "extensions": Option((list,), default=[],
                             help='extensions to load, e.g. ["ducklake", "postgres_scanner"]'),
        "timeout": Option((int, float), exclusive_minimum=0,
                          help="seconds a query may run in a worker process or CLI before it "
                               "is stopped"),
    }

    #: Extensions every instance of this engine type loads (subclasses add theirs).
    required_extensions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, options: Any, sources: Any):
        super().__init__(name, options, sources)
        self._session: Session | None = None
        self.resolved_version: str | None = None
        for key in self.config["settings"]:
            if not _SETTING_NAME.match(key):
                raise ConfigError("not a DuckDB setting name", key=f"engines.{name}.settings.{key}")
            if is_secret_key(key):
                raise ConfigError(
                    "a credential in settings is readable by every SQL user "
                    f"(SELECT current_setting('{key}'))", key=f"engines.{name}.settings.{key}",
                    hint='give it as a secret: secrets = { NAME = { type = "...", ... } }')
        self._check_secrets()
        chosen = [k for k in ("version", "path", "cli") if self.config.get(k)]
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(chosen)} cannot be combined",
                              key=f"engines.{name}.{chosen[1]}",
                              hint="an engine runs one DuckDB: a release (version), a build "
                              "(path) or a binary (cli)")
        if self.config.get("cli"):
            self.supports_parameters = False  # type: ignore[misc]  # see capabilities()
        if self.config.get("cli") and self.config["isolation"] == "process":
            raise ConfigError("a CLI engine already runs in a process of its own",
                              key=f"engines.{name}.isolation", hint="remove isolation")
        from gateway_duckdb.install import canonical_extension

        wanted = [*type(self).required_extensions, *self.config["extensions"]]
        for ext in wanted:
            if not isinstance(ext, str):
                raise ConfigError("extension names must be strings",
                                  key=f"engines.{name}.extensions")
        try:
            self.extensions = list(dict.fromkeys(canonical_extension(e) for e in wanted))
        except ConfigError as exc:
            raise ConfigError(exc.message, key=f"engines.{name}.extensions", engine=name,
                              hint=exc.hint) from None

    def _check_secrets(self) -> None:
        for name, params in self.config["secrets"].items():
            key = f"engines.{self.name}.secrets.{name}"
            if not _SETTING_NAME.match(name):
                raise ConfigError("not a DuckDB secret name", key=key,
                                  hint="letters, digits and underscores")
            if not isinstance(params, dict) or not _SETTING_NAME.match(str(params.get("type"))):
                raise ConfigError("must be a table with at least type = \"...\"", key=key,
                                  hint='e.g. { type = "http", bearer_token = "${TOKEN}" }')
            for param in params:
                if not _SETTING_NAME.match(param):
                    raise ConfigError("not a secret parameter name", key=f"{key}.{param}")

    def secret_statements(self) -> list[str]:
        """``CREATE OR REPLACE SECRET`` for each entry of ``secrets`` (temporary: in memory).

        Run once per database, right after the extensions load, never on a later
        connection (see :class:`gateway_duckdb.adbc_session.AdbcSession`); a
        subclass adds the secrets its ATTACH statements need.
        """
        stmts = []
        for name, params in self.config["secrets"].items():
            body = ", ".join(f"{k.upper()} {v if k == 'type' else literal(v)}"
                             for k, v in params.items())
            stmts.append(f"CREATE OR REPLACE TEMPORARY SECRET {quote_ident(name)} ({body})")
        return stmts

    @classmethod
    def capabilities(cls, options: Any = None) -> list[str]:
        """A CLI engine takes no parameters: the binary has no way to bind them, and its
        query is spliced into DESCRIBE and COPY statements, where PREPARE cannot go."""
        found = super().capabilities(options)
        if options is not None and options.get("cli"):
            found.remove("parameters")
        return found

    # -- what subclasses extend ----------------------------------------------
    def setup_sql(self) -> list[str]:
        """Statements run after connecting, on every path, after extensions, settings and sources.

        Returns:
            SQL statements (no trailing ``;`` needed). The base engine has none;
            the ``ducklake`` engine returns its ATTACH statements.
        """
        return []

    # -- listing, without importing duckdb -------------------------------------
    @classmethod
    def describe_version(cls, options: Any) -> str | None:
        if options.get("version"):
            return str(options["version"])
        if options.get("path") or options.get("cli"):
            return "custom"
        try:
            return version("duckdb")
        except PackageNotFoundError:
            return None

    @classmethod
    def describe_location(cls, options: Any) -> dict[str, str]:
        """Where this engine's DuckDB lives and which extensions it can load, without loading it.

        Returns:
            ``runs`` (in process, ADBC, worker, CLI), ``where`` (a folder, file
            or "not installed yet") and ``extensions`` (loadable here).
        """
        from gateway_duckdb import install

        isolation = options.get("isolation") or "in_process"
        mode = "worker process" if isolation == "process" else "ADBC in process"
        if options.get("cli"):
            return {"runs": "CLI per query", "where": str(options["cli"]), "extensions": ""}
        if options.get("path"):
            return {"runs": mode, "where": str(options["path"]), "extensions": ""}
        if options.get("version"):
            if isolation == "in_process" and options["version"] == cls.describe_version({}):
                mode = "in process (the installed module is this release)"
            found = install.installed(str(options["version"]))
            if found is None:
                return {"runs": mode, "where": "not installed yet (installs on first use)",
                        "extensions": ", ".join(install.available_extensions(
                            str(options["version"])))}
            return {"runs": mode, "where": str(found.root),
                    "extensions": ", ".join(found.extensions)}
        spec = find_spec("duckdb")
        where = str(Path(spec.origin).parent) if spec and spec.origin else "not installed"
        return {"runs": "in process" if isolation == "in_process" else mode, "where": where,
                "extensions": ""}

    # -- lifecycle -------------------------------------------------------
    def connect(self) -> None:
        from gateway_duckdb.adbc_session import SetupFailed

        library, ext_files = self._resolve()
        setup = [f"LOAD {literal(str(ext_files[e]))}" for e in self.extensions]
        secrets = self.secret_statements()
        settings = [f"SET {k} = {literal(v)}" for k, v in self.config["settings"].items()]
        mounts = mount_statements(self.sources)
        extra = [s.strip().rstrip(";") for s in self.setup_sql()]
        setup += secrets + settings + mounts + extra
        once = range(len(self.extensions), len(self.extensions) + len(secrets))
        try:
            self._session = self._open(library, setup, settings, once)
        except SetupFailed as exc:
            raise self._setup_error(exc, len(self.extensions), len(secrets), settings,
                                    mounts) from None

    def _resolve(self) -> tuple[Path | None, dict[str, Path]]:
        """The library to load (None: the installed module or a CLI) and extension files."""
        from gateway_duckdb.install import ensure_installed

        progress = sys.stderr.isatty()
        if self.config.get("version"):
            release = self.config["version"].strip().removeprefix("v")
            self._checked_extensions(release)
            try:
                inst = ensure_installed(release, self.extensions, progress=progress)
            except ConfigError as exc:
                raise ConfigError(exc.message, key=f"engines.{self.name}.version",
                                  engine=self.name, hint=exc.hint) from None
            self.resolved_version = inst.version
            if self.config["isolation"] == "in_process" and release == self.describe_version({}):
                # the installed module is this very release, and its Arrow export is faster
                # than its ADBC driver's (docs/duckdb-versions.md)
                return None, inst.extensions
            return inst.library, inst.extensions
        library: Path | None = None
        if self.config.get("path"):
            from gateway_duckdb.build import resolve_build

            library = resolve_build(self.config["path"], self.name)
        elif self.config.get("cli"):
            from gateway_duckdb.cli_session import cli_version

            self.resolved_version = cli_version(self.config["cli"], self.name)
        else:
            self.resolved_version = self.describe_version({})
            if self.config["isolation"] == "process":
                library = _installed_library(self.name)
        if not self.extensions:
            return library, {}
        if self.resolved_version is None or (library is not None and self.config.get("path")):
            self.resolved_version = _library_version(library, self.name)
        self._checked_extensions(self.resolved_version)
        inst = ensure_installed(self.resolved_version, self.extensions, progress=progress)
        return library, inst.extensions

    def _checked_extensions(self, release: str) -> None:
        from gateway_duckdb.install import check_extensions

        try:
            check_extensions(release, self.extensions)
        except ConfigError as exc:
            raise ConfigError(exc.message, key=f"engines.{self.name}.extensions",
                              engine=self.name, hint=exc.hint) from None

    def _open(self, library: Path | None, setup: list[str], settings: list[str],
              once: range) -> Session:
        database, read_only = self.config["database"], self.config["read_only"]
        timeout = self.config.get("timeout")
        if self.config.get("cli"):
            from gateway_duckdb.cli_session import CliSession

            cli = CliSession(self.config["cli"], database, [*setup, _SEARCH_PATH], self.name,
                             read_only=read_only, timeout=timeout)
            try:
                cli.check()
            except QueryError as exc:
                raise QueryError(f"the setup failed: {exc.message}", engine=self.name,
                                 hint="check settings, sources and extensions") from None
            return cli
        if self.config["isolation"] == "process":
            from gateway_duckdb.worker import WorkerSession

            assert library is not None
            root = library.parent if (library.parent / "duckdb" / "__init__.py").is_file() \
                else None
            return WorkerSession(library, root, database, setup, settings, _SEARCH_PATH,
                                 self.name, read_only=read_only, timeout=timeout,
                                 once=list(once))
        if library is not None:
            from gateway_duckdb.adbc_session import AdbcSession

            return AdbcSession(library, database, [*setup, _SEARCH_PATH], self.name,
                               read_only=read_only, once=once)
        from gateway_duckdb.python_session import PythonSession

        return PythonSession(database, setup, settings, self.name, read_only=read_only)

    def _setup_error(self, exc: Any, n_ext: int, n_secrets: int, settings: list[str],
                     mounts: list[str]) -> GatewayError:
        i = exc.index
        if i < n_ext:
            return ConfigError(f"cannot load the extension {self.extensions[i]}: {exc.message}",
                               key=f"engines.{self.name}.extensions", engine=self.name)
        i -= n_ext
        if i < n_secrets:
            names = list(self.config["secrets"])  # then a subclass's own secrets
            key = f"engines.{self.name}" + (f".secrets.{names[i]}" if i < len(names) else "")
            return ConfigError(f"cannot create the secret: {exc.message.splitlines()[0]}",
                               key=key, engine=self.name,
                               hint="see DuckDB's secret types: SELECT * FROM "
                                    "duckdb_secret_types()")
        i -= n_secrets
        if i < len(settings):
            key = list(self.config["settings"])[i]
            return ConfigError(exc.message.splitlines()[0],
                               key=f"engines.{self.name}.settings.{key}", engine=self.name,
                               hint="see DuckDB's list: SELECT * FROM duckdb_settings()")
        i -= len(settings)
        if i < len(mounts):
            # mounts[0] attaches the sources catalog; mounts[k] is the view of source k - 1
            source = list(self.sources.values())[i - 1] if i else None
            what = f"the source {source.name} ({source.path})" if source else "the sources"
            return QueryError(f"cannot mount {what}: {exc.message.splitlines()[0]}",
                              engine=self.name, hint="check the [sources] paths and CSV options")
        return QueryError(f"the engine's setup failed: {exc.message}", engine=self.name)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def cancel(self) -> None:
        if self._session is not None:
            self._session.cancel()

    # -- queries ---------------------------------------------------------
    def _running_session(self) -> Session:
        if self._session is None:
            from gateway.errors import EngineConnectionError

            raise EngineConnectionError("the engine is closed", engine=self.name)
        return self._session

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        reader = self._running_session().execute(sql, parameters)
        notes = {"duckdb_version": self.resolved_version} if self.resolved_version else {}
        return EngineResult(reader, notes)

    def catalog(self) -> list[CatalogColumn]:
        session = self._running_session()
        tables = session.execute(
            "SELECT table_catalog, table_schema, table_name, table_type "
            "FROM information_schema.tables "
            "WHERE table_catalog NOT IN ('system', 'temp') "
            "ORDER BY table_catalog <> current_database(), 1, 2, 3", None).read_all()
        columns: list[CatalogColumn] = []
        for db, schema, table, kind in zip(*(c.to_pylist() for c in tables.columns),
                                           strict=True):
            qualified = ".".join(quote_ident(p) for p in (db, schema, table))
            arrow_schema = session.execute(f"SELECT * FROM {qualified} LIMIT 0", None).read_all().schema
            shown_schema = "main" if db == SOURCES_CATALOG else schema
            for fld in arrow_schema:
                columns.append(CatalogColumn(shown_schema, table, fld.name, fld.type,
                                             fld.nullable, "VIEW" if kind == "VIEW" else "TABLE"))
        return columns


def _installed_library(engine: str) -> Path:
    from gateway_duckdb.install import find_library

    spec = find_spec("duckdb")
    if spec is None or spec.origin is None:
        raise ConfigError("no duckdb module is installed", key=f"engines.{engine}",
                          hint='pip install duckdb, or set version = "..."')
    library = find_library(Path(spec.origin).parent.parent)
    if library is None:
        raise ConfigError(f"the installed duckdb ({spec.origin}) has no _duckdb library",
                          key=f"engines.{engine}", hint='set version = "..." instead')
    return library


def _library_version(library: Path | None, engine: str) -> str:
    """The version a DuckDB library reports (``SELECT version()``), without ``v``."""
    from gateway_duckdb.adbc_session import AdbcSession

    assert library is not None
    session = AdbcSession(library, ":memory:", [], engine)
    try:
        answer = session.execute("SELECT version()", None).read_all().column(0)[0].as_py()
    finally:
        session.close()
    return str(answer).removeprefix("v")
