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

import functools
import os
import re
import sys
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gateway.config import Source, named_special_file
from gateway.engine import (
    SESSION_STATE,
    CatalogColumn,
    Engine,
    EngineResult,
    EngineSession,
    Option,
    SchemaRef,
    TableRef,
    like_matcher,
)
from gateway.errors import ConfigError, GatewayError, QueryError
from gateway.masking import is_secret_key
from gateway.sql.kinds import transaction_change
from gateway_duckdb.mount import (
    SOURCES_CATALOG,
    literal,
    mount_statements,
    quote_ident,
    unmountable,
    view_statement,
)
from gateway_duckdb.translate import translate

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DuckDBEngine", "translate"]

_SETTING_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


@functools.lru_cache(maxsize=256)
def _source_name(name: str) -> re.Pattern[str]:
    """A source's name as a word of a statement (any case; not inside a longer name)."""
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)


_SEARCH_PATH = f"SET search_path = 'main,{SOURCES_CATALOG}.main'"
#: Extensions that open databases without DuckDB's file checks (SQLite's own file layer, a
#: PostgreSQL server), by the prefix of their functions.
_UNCHECKED_EXTENSIONS = {"sqlite_scanner": "sqlite", "postgres_scanner": "postgres"}
#: Functions that run SQL held in a string, where no name can be checked beforehand.
_SQL_FROM_TEXT = r"query|query_table|json_execute_serialized_sql"


class Session(Protocol):
    """What every execution path offers the engine.

    A path that can give a session its own connection (the module's cursor,
    an ADBC connection) also has ``open(engine) -> EngineSession``.
    """

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
    supports_transactions = True
    dialect = "duckdb"
    session_state = SESSION_STATE

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
        "files": Option((str,), default="any", choices=("any", "sources"),
                        help='"sources": SQL may read and write only the configured sources '
                             "(DuckDB's enable_external_access = false, after mounting them); "
                             "arrowgate serve sets it"),
        "extensions": Option((list,), default=[],
                             help='extensions to load, e.g. ["ducklake", "postgres_scanner"]'),
        "timeout": Option((int, float), exclusive_minimum=0,
                          help="seconds a query may run in a worker process or CLI before it "
                               "is stopped"),
    }

    #: Sessions run on a connection of their own, past an overridden :meth:`execute`.
    native_sessions: ClassVar[bool] = True

    #: Extensions every instance of this engine type loads (subclasses add theirs).
    required_extensions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, options: Any, sources: Any):
        super().__init__(name, options, sources)
        self._session: Session | None = None
        self.resolved_version: str | None = None
        #: the sources DuckDB could not mount, and why (their views fail)
        self.unmounted: dict[str, str] = {}
        #: the sources whose view exists: None when it reads the source, else the reason
        #: its view fails with (tried again by the next statement naming it)
        self._mounted: dict[str, str | None] = {}
        #: the sources mounted by the setup itself (the CLI's, a worker's): none is mounted later
        self._eager: dict[str, Source] = {}
        self._mount_lock = threading.Lock()
        self._all_mounted = not self.sources
        #: the folder DuckDB spills into, made at connect (_spill_sql)
        self._spill: str | None = None
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
            # each query is a process of its own: nothing lasts between statements
            self.session_state = frozenset()  # type: ignore[misc]
            self.supports_transactions = False  # type: ignore[misc]
        elif self.config["isolation"] == "process" and self.config["database"] != ":memory:" \
                and not self.config["read_only"]:
            # a read-write database file admits one worker: sessions share it and keep nothing
            self.session_state = frozenset()  # type: ignore[misc]
            self.supports_transactions = False  # type: ignore[misc]
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

    @functools.cached_property
    def holds_credentials(self) -> bool:
        """Whether DuckDB holds a secret this engine created (its ``secrets``, a catalog's
        password): SQL that opens a server then is refused (gateway.statement)."""
        return bool(self.secret_statements())

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

    def connection_sql(self) -> list[str]:
        """Statements every connection after the first runs, after the settings.

        What the setup does to the database (views, ATTACH, secrets) every
        connection shares; what it does to its own connection (``USE``) the
        others must repeat. The base engine has none; the ``ducklake`` engine
        makes its lake the current database.
        """
        return []

    def lockdown_sql(self) -> list[str]:
        """With ``files = "sources"``: the statements, run last in the setup, that leave SQL
        users only the files and folders of :meth:`allowed_files`.

        DuckDB checks every file a query opens against ``allowed_paths`` and
        ``allowed_directories`` once ``enable_external_access`` is false, and
        refuses to switch it back on or widen those lists while the database
        runs; mounting first is what lets the source views be created.
        """
        if self.config.get("files") != "sources":
            return []
        paths, folders = self.allowed_files()
        return [f"SET allowed_paths = {literal(paths)}",
                f"SET allowed_directories = {literal(folders)}",
                "SET enable_external_access = false"]

    def allowed_files(self) -> tuple[list[str], list[str]]:
        """(files, folders) SQL may still open with ``files = "sources"``: the sources'.

        A folder ends with ``/``; a subclass adds what its own setup keeps open.
        """
        paths, folders = [], []
        for source in self.sources.values():
            if source.is_folder:
                folders.append(source.path.rstrip("/") + "/")
            elif source.is_glob:
                base = source.path.split("*")[0].split("?")[0].split("[")[0]
                folders.append(os.path.dirname(base).rstrip("/") + "/")
            else:
                paths.append(source.path)
        if self.config.get("cli"):
            # the binary hands its answers over through these (cli_session.py)
            paths += ["/dev/stdout"]
            folders += ["/dev/fd/"]
        return paths, folders

    def check_sql(self, sql: str) -> None:
        """With ``files = "sources"`` and an extension loaded that opens databases past DuckDB's
        file checks (:data:`_UNCHECKED_EXTENSIONS`), refuse what reaches them: ``ATTACH``, that
        extension's functions (``sqlite_scan('/any.db', ...)``, ``postgres_query``), and the
        functions that run SQL from a string.

        Words are matched in the whole text, string literals included, so a name
        cannot hide inside ``query('...')``.

        Whatever ``files`` says, a quoted path naming a FIFO or a device is refused:
        DuckDB would open it while binding, where neither a timeout nor a cancel reaches.
        """
        special = named_special_file(sql)
        if special is not None:
            raise QueryError(f"{special[0]!r} is {special[1]}, not a file DuckDB can read",
                             engine=self.name, kind="unknown_object",
                             hint="name a regular file; copy what a pipe or device gives "
                                  "into one first")
        if self.config.get("files") != "sources":
            return
        prefixes = [p for ext, p in _UNCHECKED_EXTENSIONS.items() if ext in self.extensions]
        if not prefixes:
            return
        found = re.search(rf"(?i)\b(attach|(?:{'|'.join(prefixes)})_\w*|"
                          rf"(?:{_SQL_FROM_TEXT})\b\"?\s*\()", sql)
        if found is not None:
            raise QueryError(
                f"{found.group(1).rstrip('(').strip()!r} is not allowed: with files = \"sources\" "
                f"this engine's {', '.join(e for e in _UNCHECKED_EXTENSIONS if e in self.extensions)}"
                " would open databases DuckDB's file lockdown does not check",
                engine=self.name, kind="permission",
                hint="query the lake and the configured sources by name")

    # -- listing, without importing duckdb -------------------------------------
    @classmethod
    def describe_version(cls, options: Any) -> str | None:
        if options.get("version"):
            return str(options["version"])
        if options.get("path") or options.get("cli"):
            return "custom"
        return running_release()

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
            if str(options["version"]).strip().removeprefix("v") == running_release():
                spec = find_spec("duckdb")
                where = str(Path(spec.origin).parent) if spec and spec.origin else "not installed"
                if isolation == "in_process":
                    mode = "in process (the installed module is this release)"
                return {"runs": mode, "where": where, "extensions": ", ".join(
                    install.available_extensions(str(options["version"])))}
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
        loads = [f"LOAD {literal(str(ext_files[e]))}" for e in self.extensions]
        secrets = self.secret_statements()
        settings = [f"SET {k} = {literal(v)}" for k, v in self.config["settings"].items()]
        extra = [s.strip().rstrip(";") for s in self.setup_sql()]
        # Sources are mounted when a statement first names them (mount_for), except where
        # the setup is run again for each statement (the CLI) or each session (a worker
        # process of its own, with a database of its own). A source DuckDB cannot mount
        # at connect fails only the statements that read it: its view is made to fail with
        # the reason, and the setup runs again without it.
        self.unmounted = {}
        self._mounted = {}
        self._all_mounted = not self.sources
        self._eager = dict(self.sources) \
            if self.config.get("cli") or self.config["isolation"] == "process" else {}
        while True:
            mounts = mount_statements(self._eager, self.unmounted)
            setup = loads + secrets + settings + mounts + extra + self._spill_sql() \
                + self.lockdown_sql()
            try:
                self._session = self._open(library, setup, [*settings, *self.connection_sql()])
                return
            except SetupFailed as exc:
                source = self._mounting(exc.index - len(loads) - len(secrets) - len(settings))
                if source is None or source in self.unmounted:
                    raise self._setup_error(exc, len(self.extensions), len(secrets), settings,
                                            mounts) from None
                self.unmounted[source] = exc.message.splitlines()[0]

    def _spill_sql(self) -> list[str]:
        """Where DuckDB spills: a folder of this engine's own, mode 0700, removed at close.

        DuckDB's default (``.tmp/`` in the working folder) was one folder for every
        engine of the process, and SQL may read and write DuckDB's temporary folder
        even with ``files = "sources"``: one user's spill file was read and overwritten
        by a user of another engine. The setting is the whole database's (DuckDB has
        no folder per connection), so users of one engine share it; the service keeps
        its path from them (gateway.sql.reach.hidden_reach). A ``temp_directory`` in
        the engine's ``settings`` is left as configured.
        """
        if "temp_directory" in {k.lower() for k in self.config["settings"]}:
            return []
        if self._spill is None:
            import tempfile

            self._spill = tempfile.mkdtemp(prefix=f"arrowgate-{self.name}-spill-")
        return [f"SET temp_directory = {literal(self._spill)}"]

    def _mounting(self, index: int) -> str | None:
        """The source whose view setup statement ``index`` (counted from the mounts) creates."""
        names = list(self._eager)
        return names[index - 1] if 1 <= index <= len(names) else None

    def mount_for(self, sql: str) -> None:
        """Mount the sources ``sql`` names that are not mounted yet; all of them for a
        statement opening a transaction (whose snapshot would not see a view made later).

        A name is looked for as a word anywhere in the text, string literals
        included: a source mounted needlessly costs one bind, one missed
        would fail the statement. A source that cannot be mounted becomes a
        view failing with why, so only a statement that reads it fails; the
        next statement naming it tries the source again.
        """
        if self._eager or self._session is None or self._all_mounted:
            return  # every source is in the setup, run for each statement or session
        waiting = [s for name, s in self.sources.items() if self._mounted.get(name, "") is not None]
        if transaction_change(sql) != "begin":
            lowered = sql.lower()
            waiting = [s for s in waiting
                       if s.name.lower() in lowered and _source_name(s.name).search(sql)]
        for source in waiting:
            if self._mount(source) is not None:
                self._mount(source, failing=True)

    def mount_all(self) -> dict[str, str | None]:
        """Mount every source not mounted yet (the catalog lists them all), as
        :meth:`mount_for` does. Returns each source's state: None when mounted, else why
        it cannot be."""
        if not self._eager and self._session is not None:
            for name, source in self.sources.items():
                if name not in self._mounted and self._mount(source) is not None:
                    self._mount(source, failing=True)
        return {name: self.unmounted.get(name) for name in self.sources}

    def explain_failure(self, sql: str, error: GatewayError) -> GatewayError:
        """A binding error of a statement naming a source DuckDB could not mount is that
        source's: its stand-in view has one column, named as the source, so
        ``SELECT a FROM s`` would otherwise fail with 'Referenced column "a" not found
        ... Candidate bindings: "s"' and not with why the file cannot be read."""
        if not self.unmounted or not error.message.startswith("Binder Error"):
            return error
        for name, why in self.unmounted.items():
            if name.lower() in sql.lower() and _source_name(name).search(sql):
                return QueryError(unmountable(self.sources[name], why), engine=self.name)
        return error

    def _mount(self, source: Source, failing: bool = False) -> str | None:
        """Create ``source``'s view, or (``failing``) the view failing with why it cannot be
        read; None when the view was made, else DuckDB's reason (kept in :attr:`unmounted`)."""
        with self._mount_lock:
            if self._mounted.get(source.name, "") is None:
                return None  # another statement mounted it meanwhile
            why = self.unmounted.get(source.name) if failing else None
            try:
                self._running_session().execute(view_statement(source, why), None).read_all()
            except GatewayError as exc:
                self.unmounted[source.name] = exc.message.splitlines()[0]
                return self.unmounted[source.name]
            self._mounted[source.name] = why
            if why is None:
                self.unmounted.pop(source.name, None)
            self._all_mounted = len(self._mounted) == len(self.sources) and \
                not any(w is not None for w in self._mounted.values())
            return None

    def _resolve(self) -> tuple[Path | None, dict[str, Path]]:
        """The library to load (None: the installed module or a CLI) and extension files."""
        from gateway_duckdb.install import ensure_extensions, ensure_installed

        progress = sys.stderr.isatty()
        if self.config.get("version"):
            release = self.config["version"].strip().removeprefix("v")
            self._checked_extensions(release)
            if release == running_release():
                # the running interpreter's duckdb is this very release: no second copy is
                # downloaded, and in process its Arrow export is faster than its ADBC
                # driver's (docs/duckdb-versions.md)
                self.resolved_version = release
                exts = ensure_extensions(release, self.extensions, progress=progress) \
                    if self.extensions else {}
                if self.config["isolation"] == "in_process":
                    return None, exts
                return _installed_library(self.name), exts
            try:
                inst = ensure_installed(release, self.extensions, progress=progress)
            except ConfigError as exc:
                raise ConfigError(exc.message, key=f"engines.{self.name}.version",
                                  engine=self.name, hint=exc.hint) from None
            self.resolved_version = inst.version
            return inst.library, inst.extensions
        library: Path | None = None
        if self.config.get("path"):
            from gateway_duckdb.build import resolve_build

            library = resolve_build(self.config["path"], self.name)
        elif self.config.get("cli"):
            from gateway_duckdb.cli_session import cli_version

            self.resolved_version = cli_version(self.config["cli"], self.name)
        else:
            self.resolved_version = running_release()
            if self.config["isolation"] == "process":
                library = _installed_library(self.name)
        if not self.extensions:
            return library, {}
        if self.resolved_version is None or (library is not None and self.config.get("path")):
            self.resolved_version = _library_version(library, self.name)
        self._checked_extensions(self.resolved_version)
        # the DuckDB itself is at hand: only the extension packages are installed
        return library, ensure_extensions(self.resolved_version, self.extensions,
                                          progress=progress)

    def _checked_extensions(self, release: str) -> None:
        from gateway_duckdb.install import check_extensions

        try:
            check_extensions(release, self.extensions)
        except ConfigError as exc:
            raise ConfigError(exc.message, key=f"engines.{self.name}.extensions",
                              engine=self.name, hint=exc.hint) from None

    def _open(self, library: Path | None, setup: list[str], settings: list[str]) -> Session:
        """The execution path; ``settings`` are the statements every further connection or
        cursor runs (the SET statements and :meth:`connection_sql`)."""
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
                                 self.name, read_only=read_only, timeout=timeout)
        if library is not None:
            from gateway_duckdb.adbc_session import AdbcSession

            return AdbcSession(library, database, [*setup, _SEARCH_PATH], self.name,
                               read_only=read_only, per_connection=[*settings, _SEARCH_PATH])
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
            source = list(self._eager.values())[i - 1] if i else None
            what = f"the source {source.name} ({source.path})" if source else "the sources"
            return QueryError(f"cannot mount {what}: {exc.message.splitlines()[0]}",
                              engine=self.name, hint="check the [sources] paths and CSV options")
        return QueryError(f"the engine's setup failed: {exc.message}", engine=self.name)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
        spill, self._spill = self._spill, None
        if spill is not None:
            import shutil

            shutil.rmtree(spill, ignore_errors=True)

    def cancel(self) -> None:
        if self._session is not None:
            self._session.cancel()

    #: What :meth:`at_rest` runs: a checkpoint of the database statements write to.
    rest_sql: ClassVar[str] = "CHECKPOINT"

    def at_rest(self) -> None:
        """A checkpoint (:attr:`rest_sql`), which drops the versions DuckDB keeps of
        deleted and updated rows, in an in-memory database too. DuckDB checkpoints on its
        own only at a commit that finds its write-ahead estimate past
        ``checkpoint_threshold``, so never at rest, and under bench/client_model.py's four
        clients not within 15 minutes (``duckdb_memory()``'s BASE_TABLE and
        IN_MEMORY_TABLE 7 -> 50 MB; a CHECKPOINT took 38 MB back to 6). A checkpoint
        refused (a transaction still open, a read-only database) waits for the next
        time; a CLI engine's database lives one query. Then the pages DuckDB freed are
        given back (:func:`gateway_duckdb.jemalloc.purge`)."""
        session = self._session
        if session is None or self.config.get("cli"):
            return
        try:
            session.execute(self.rest_sql, None).read_all()
        except Exception:  # another transaction writes, or nothing to checkpoint
            pass
        from gateway_duckdb.jemalloc import purge

        purge(getattr(session, "library", None))  # a worker's is in its own process

    # -- queries ---------------------------------------------------------
    def _running_session(self) -> Session:
        if self._session is None:
            from gateway.errors import EngineConnectionError

            raise EngineConnectionError("the engine is closed", engine=self.name)
        return self._session

    def result_notes(self) -> dict[str, Any]:
        return {"duckdb_version": self.resolved_version} if self.resolved_version else {}

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        self.mount_for(sql)  # the pipeline did; a caller of the engine itself may not have
        reader = self._running_session().execute(sql, parameters)
        return EngineResult(reader, self.result_notes())

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        """A cursor, an ADBC connection or a worker of its own (see docs/sessions.md).

        A subclass that overrides :meth:`execute` gets the stateless session for
        one-shot statements, which then go through its ``execute``; its real
        sessions are native unless it sets :attr:`native_sessions` false (an
        engine that rewrites every answer, as the tests' planted bugs do).

        ``read_only`` changes nothing: DuckDB is read-only per database file
        (``read_only = true``), never per connection, so the pipeline's check is
        what keeps a read-only user from writing.
        """
        path = self._running_session()
        opener = getattr(path, "open", None)
        if type(self).execute is not DuckDBEngine.execute and \
                (one_shot or not self.native_sessions):
            opener = None
        if one_shot and self.config["isolation"] == "process":
            opener = None  # one-shot queries share the engine's worker, as they always did
        session: EngineSession | None = opener(self, one_shot) if opener is not None else None
        return session if session is not None else super().open_session(one_shot, read_only)

    # -- the catalog tree: one catalog query per level ------------------------------------
    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        self.mount_all()
        table = self._running_session().execute(sql, None).read_all()
        return list(zip(*(c.to_pylist() for c in table.columns), strict=True))

    def catalogs(self) -> list[str]:
        return [r[0] for r in self._rows(
            "SELECT database_name FROM duckdb_databases() "
            "WHERE database_name NOT IN ('system', 'temp') "
            "ORDER BY database_name <> current_database(), "
            f"database_name = {literal(SOURCES_CATALOG)}, database_name")]

    def schemas(self, catalog: str | None = None, pattern: str | None = None) -> list[SchemaRef]:
        where = _filters(("database_name", catalog, False), ("schema_name", pattern, True))
        return [SchemaRef(*r) for r in self._rows(
            "SELECT database_name, schema_name FROM duckdb_schemas() "
            "WHERE database_name NOT IN ('system', 'temp') "
            "AND schema_name NOT IN ('information_schema', 'pg_catalog')"
            f"{where} ORDER BY 1, 2")]

    def tables(self, catalog: str | None = None, schema: str | None = None,
               pattern: str | None = None, types: Sequence[str] | None = None) -> list[TableRef]:
        where = _filters(("database_name", catalog, False), ("schema_name", schema, False),
                         ("name", pattern, True))
        if types is not None:
            where += " AND kind IN (" + ", ".join(literal(t) for t in types) + ")"
        return [TableRef(*r) for r in self._rows(
            "SELECT database_name, schema_name, name, kind FROM ("
            "SELECT database_name, schema_name, table_name AS name, 'TABLE' AS kind "
            "FROM duckdb_tables() UNION ALL "
            "SELECT database_name, schema_name, view_name, 'VIEW' FROM duckdb_views() "
            "WHERE NOT internal) "
            "WHERE database_name NOT IN ('system', 'temp')"
            f"{where} ORDER BY 1, 2, 3")]

    def columns(self, table: str, catalog: str | None = None, schema: str | None = None,
                pattern: str | None = None) -> list[CatalogColumn]:
        found = self.tables(catalog, schema, _like_literal(table))
        if not found:
            return []
        ref = found[0]
        qualified = ".".join(quote_ident(p) for p in (ref.catalog, ref.schema, ref.table))
        arrow_schema = self._running_session().execute(
            f"SELECT * FROM {qualified} LIMIT 0", None).read_all().schema
        match = like_matcher(pattern)
        return [CatalogColumn(ref.schema, ref.table, f.name, f.type, f.nullable, ref.table_type,
                              ref.catalog) for f in arrow_schema if match(f.name)]

    def catalog(self) -> list[CatalogColumn]:
        """Every column, from one ``duckdb_columns()`` query; each distinct column type is
        turned into its Arrow type once (``SELECT NULL::type``), not each table."""
        rows = self._rows(
            "SELECT c.database_name, c.schema_name, c.table_name, c.column_name, c.data_type, "
            "c.is_nullable, CASE WHEN v.view_name IS NULL THEN 'TABLE' ELSE 'VIEW' END "
            "FROM duckdb_columns() c LEFT JOIN duckdb_views() v "
            "ON v.database_name = c.database_name AND v.schema_name = c.schema_name "
            "AND v.view_name = c.table_name "
            "WHERE c.database_name NOT IN ('system', 'temp') AND NOT c.internal "
            "ORDER BY c.database_name <> current_database(), 1, 2, 3, c.column_index")
        types: dict[str, pa.DataType] = {}
        for data_type in {r[4] for r in rows}:
            types[data_type] = self._running_session().execute(
                f"SELECT NULL::{data_type} AS c LIMIT 0", None).read_all().schema[0].type
        return [CatalogColumn(schema, table, column, types[data_type], bool(nullable), kind, db)
                for db, schema, table, column, data_type, nullable, kind in rows]


def _like_literal(name: str) -> str:
    """A LIKE pattern matching exactly ``name``."""
    return name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _filters(*conditions: tuple[str, str | None, bool]) -> str:
    """`` AND column = 'x'`` / `` AND column LIKE 'p' ESCAPE '\\'`` for each non-None value."""
    out = ""
    for column, value, is_pattern in conditions:
        if value is None or (is_pattern and value == "%"):
            continue
        out += (f" AND {column} LIKE {literal(value)} ESCAPE '\\'" if is_pattern
                else f" AND {column} = {literal(value)}")
    return out


def running_release() -> str | None:
    """The release of the running interpreter's ``duckdb`` (without importing it), or None.

    Read from the ``Version:`` line of the ``duckdb-*.dist-info`` beside the module, as
    ``importlib.metadata`` reads it; importing that (email, zipfile, csv) cost every
    process configuring a duckdb engine 10-20 ms, a csv query it never falls back to
    included. Where there is no such folder, ``importlib.metadata`` answers."""
    spec = find_spec("duckdb")
    if spec is not None and spec.origin is not None:
        folder = os.path.dirname(os.path.dirname(spec.origin))
        try:
            infos = [n for n in os.listdir(folder)
                     if n.startswith("duckdb-") and n.endswith(".dist-info")]
        except OSError:
            infos = []
        if len(infos) == 1:
            try:
                with open(os.path.join(folder, infos[0], "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.partition(":")[2].strip()
                        if not line.strip():
                            break  # the headers end at the first blank line
            except OSError:
                pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("duckdb")
    except PackageNotFoundError:
        return None


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
