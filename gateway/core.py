"""The gateway: configuration, engines and the path every query takes."""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gateway.config import EngineConfig, GatewayConfig, load_config
from gateway.engine import Engine
from gateway.errors import (
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    Unsupported,
)
from gateway.hookspecs import SHADOW_MISSING
from gateway.plugins import PluginManager, build_plugin_manager, engine_types
from gateway.result import Result, RunningQuery
from gateway.session import Session
from gateway.statement import LOCAL, Pipeline, Principal, Statement

if TYPE_CHECKING:
    from gateway.engine import CatalogColumn, SchemaRef, TableRef
    from gateway.shadow.settings import ShadowSettings


class Gateway:
    """Routes SQL to configured engines and hands back Arrow.

    Build one with :func:`gateway.connect`. Engines are started lazily, on
    their first query, and closed with the gateway.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        plugins: Iterable[ModuleType | object] = (),
        plugin_manager: PluginManager | None = None,
    ):
        """See :func:`connect`; ``plugin_manager``, one :func:`~gateway.plugins.build_plugin_manager`
        built (the command line's), is used instead of building another (``plugins`` must
        then be empty): loading the plugins again took a one-row ``arrowgate query`` 2-4 ms."""
        if plugin_manager is None:
            self.pm = build_plugin_manager(plugins)
        elif tuple(plugins):
            raise ValueError("pass extra plugins to build_plugin_manager, not beside its manager")
        else:
            self.pm = plugin_manager
        self.engine_types = engine_types(self.pm)
        self.config: GatewayConfig = load_config(config, self.engine_types)
        #: The checked ``[shadow]`` section, or None: the shadow layer checks it (the hook
        #: ``arrowgate_shadow_settings``; :mod:`gateway.shadow.settings`)
        self.shadow_settings: ShadowSettings | None = None
        if self.config.shadow:
            self.shadow_settings = self.pm.hook.arrowgate_shadow_settings(config=self.config)
            if self.shadow_settings is None:
                raise ConfigError("the configuration has a [shadow] section, but no plugin "
                                  "shadows statements", path=self.config.path, key="shadow",
                                  hint=SHADOW_MISSING)
        self._check_fallbacks()
        self._engines: dict[str, Engine] = {}
        self._starting: dict[str, _EngineStart] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: the path every statement takes (:mod:`gateway.statement`); its ``limits``
        #: are what the Flight service's ``[serve]`` section sets
        self.pipeline = Pipeline(self, Session)

    def _check_fallbacks(self) -> None:
        """A ``fallback`` option must name another configured engine (checked at load)."""
        for name, cfg in self.config.engines.items():
            fallback = cfg.options.get("fallback")
            if fallback is None:
                continue
            if fallback == name or fallback not in self.config.engines:
                others = [e for e in self.config.engines if e != name]
                raise ConfigError(
                    f"fallback names {'the engine itself' if fallback == name else 'no engine'}: "
                    f"{fallback!r}", path=self.config.path, key=f"engines.{name}.fallback",
                    hint="configured engines: " + (", ".join(others) or "none besides this one"))

    # -- engines ---------------------------------------------------------
    @property
    def default_engine(self) -> str:
        return self.config.default_engine

    def engine_config(self, name: str | None = None) -> EngineConfig:
        """The checked configuration of one engine.

        Raises:
            ConfigError: no engine has that name.
        """
        name = name or self.default_engine
        try:
            return self.config.engines[name]
        except KeyError:
            raise ConfigError(f"no engine named {name!r}", path=self.config.path,
                              hint="configured engines: " + ", ".join(self.config.engines)) from None

    def engine(self, name: str | None = None) -> Engine:
        """The running engine called ``name`` (the default engine when None), started on demand.

        Each engine starts under its own lock, in a thread of its own, so a
        slow or hung start holds up only that engine's queries; they fail
        after the engine's ``connect_timeout`` with
        :class:`~gateway.errors.EngineConnectionError`.
        """
        cfg = self.engine_config(name)
        engine = self._engines.get(cfg.name)  # started: no lock (a dict read is atomic)
        if engine is not None and not self._closed:
            return engine
        with self._lock:
            if self._closed:
                raise GatewayError("the gateway is closed")
            engine = self._engines.get(cfg.name)
            if engine is not None:
                return engine
            start = self._starting.get(cfg.name)
            if start is None:
                start = self._starting[cfg.name] = _EngineStart(self, cfg)
        return start.wait()

    def _started(self, cfg: EngineConfig, engine: Engine | None) -> None:
        """Called by an :class:`_EngineStart` when its engine is up (or failed: None)."""
        with self._lock:
            self._starting.pop(cfg.name, None)
            if engine is None:
                return
            if self._closed:
                closing = engine
            else:
                self._engines[cfg.name] = engine
                return
        closing.close()

    def dialect(self, engine: str | None = None) -> str:
        """The sqlglot dialect an engine's SQL is written in.

        A started engine answers for itself (an ``adbc`` or ``odbc`` engine's
        dialect follows its driver and ``transpile_from``); one not started yet
        is not started for this, and its type's dialect is the answer.
        """
        cfg = self.engine_config(engine)
        with self._lock:
            started = self._engines.get(cfg.name)
        if started is not None:
            return started.dialect
        return self.engine_types[cfg.type].dialect

    # -- the catalog tree ---------------------------------------------------
    def catalog(self, engine: str | None = None) -> list[CatalogColumn]:
        """The schemas, tables and columns one engine can query, flat (see :meth:`tables`)."""
        return self._catalog_call(engine, "catalog")

    def catalogs(self, engine: str | None = None) -> list[str]:
        """The catalogs (databases) of one engine."""
        return self._catalog_call(engine, "catalogs")

    def schemas(self, engine: str | None = None, catalog: str | None = None,
                pattern: str | None = None) -> list[SchemaRef]:
        """The schemas of one engine; ``pattern`` is a SQL LIKE pattern (``%``, ``_``)."""
        return self._catalog_call(engine, "schemas", catalog, pattern)

    def tables(self, engine: str | None = None, catalog: str | None = None,
               schema: str | None = None, pattern: str | None = None,
               types: Sequence[str] | None = None) -> list[TableRef]:
        """The tables and views of one engine, filtered level by level (LIKE patterns)."""
        return self._catalog_call(engine, "tables", catalog, schema, pattern, types)

    def columns(self, engine: str | None = None, table: str = "", catalog: str | None = None,
                schema: str | None = None, pattern: str | None = None) -> list[CatalogColumn]:
        """The columns of one table, in table order."""
        return self._catalog_call(engine, "columns", table, catalog, schema, pattern)

    def _catalog_call(self, engine: str | None, method: str, *args: Any) -> Any:
        eng = self.engine(engine)
        try:
            return getattr(eng, method)(*args)
        except GatewayError:
            raise
        except Exception as exc:
            raise QueryError(f"cannot list the catalog: {exc}", engine=eng.name) from exc

    # -- queries ---------------------------------------------------------
    def session(self, engine: str | None = None, *, principal: Principal = LOCAL) -> Session:
        """A session pinned to one connection of ``engine`` (see :mod:`gateway.session`).

        Args:
            principal: who sends its statements (default: this process's own user,
                who may use every engine and setting).

        Raises:
            gateway.errors.GatewayError: the engine cannot start or open a connection,
                or ``principal`` may not use it (kind ``permission``).
        """
        name = self.engine_config(engine).name
        if not principal.may_use(name):
            raise GatewayError(f"user {principal.name!r} may not use engine {name!r}",
                               engine=name, kind="permission")
        return Session(self, name, principal=principal)

    def execute(
        self,
        sql: str,
        engine: str | None = None,
        parameters: Sequence[Any] | None = None,
        shadow: str | bool | None = None,
        timeout: float | None = None,
        *,
        principal: Principal = LOCAL,
    ) -> Result:
        """Run one statement on an engine and return its streaming answer: a session used once.

        Args:
            sql: the statement.
            engine: the engine's name; the configured default when None.
            parameters: positional values for placeholders, or None.
            shadow: a reference engine to run the statement on too
                (``result.shadow`` holds the :class:`gateway.shadow.record.ShadowRecord`);
                False never shadows; None lets the config's ``[shadow]`` section decide.
            timeout: seconds before the query is cancelled with
                :class:`~gateway.errors.QueryTimeout`; None takes the engine's
                ``timeout`` option.
            principal: who sends it (:class:`gateway.statement.Principal`); the
                default is this process's own user.

        Raises:
            gateway.errors.GatewayError: any failure, translated by the engine.
        """
        return self.pipeline.run(Statement(sql, engine, parameters, timeout, shadow,
                                           principal=principal))

    def cancel(self, query_id: int) -> bool:
        """Cancel one running query (from any thread); other queries keep running.

        Returns:
            False when no query with that id is running.
        """
        return self.pipeline.cancel(query_id)

    def running(self) -> list[RunningQuery]:
        """The queries running now, oldest first: every statement admitted and not yet
        read to its end, closed or failed (a statement counts from before it is planned)."""
        return self.pipeline.running()

    def rewrite(self, sql: str, engine: str) -> str:
        """``sql`` after the ``arrowgate_rewrite_sql`` hooks, as ``engine`` will run it.

        Raises:
            gateway.errors.QueryError: the engine refuses the statement (``Engine.check_sql``).
        """
        cfg = self.engine_config(engine)
        run_sql = sql
        hook = self.pm.hook.arrowgate_rewrite_sql
        if hook.get_hookimpls():
            rewritten = hook(sql=sql, engine=cfg.name, engine_type=cfg.type)
            run_sql = rewritten if isinstance(rewritten, str) else sql
        self.engine(cfg.name).check_sql(run_sql)
        return run_sql

    def engines_with(self, capability: str) -> tuple[str, ...]:
        """The configured engines whose type declares ``capability``."""
        return tuple(name for name, cfg in self.config.engines.items()
                     if capability in self.engine_types[cfg.type].capabilities(cfg.options))

    def name_engines(self, error: Unsupported) -> Unsupported:
        """``error`` with the engine types it lists as the configured engines of those types.

        An engine plugin knows types, not the configuration's names: the csv engine's
        "engines that can run it: duckdb" is "duck" where the DuckDB engine is called
        that. A type no engine is configured with stays, said to be unconfigured; a hint
        of the plugin's own words is kept as it is.
        """
        names: list[str] = []
        for entry in error.engines:
            of_type = [name for name, cfg in self.config.engines.items() if cfg.type == entry]
            if entry in self.config.engines or entry not in self.engine_types:
                names.append(entry)
            else:
                names += of_type or [f"a {entry} engine (none is configured)"]
        names = list(dict.fromkeys(names))
        if tuple(names) != error.engines:
            if error.hint == "engines that can run it: " + ", ".join(error.engines):
                error.hint = "engines that can run it: " + ", ".join(names)
            error.engines = tuple(names)
        return error

    def notify(self, hook_name: str, **kwargs: Any) -> None:
        """Call a query hook; a plugin's failure is a warning, never the statement's."""
        hook = getattr(self.pm.hook, hook_name)
        if not hook.get_hookimpls():
            return
        try:
            hook(**kwargs)
        except Exception as exc:
            warnings.warn(f"a plugin's {hook_name} failed: {exc!r}", RuntimeWarning,
                          stacklevel=3)

    # -- lifecycle -------------------------------------------------------
    def at_rest(self) -> None:
        """Every started engine's :meth:`Engine.at_rest` (a failure is a warning)."""
        for engine in list(self._engines.values()):
            try:
                engine.at_rest()
            except Exception as exc:
                warnings.warn(f"engine {engine.name!r} at rest: {exc!r}", RuntimeWarning,
                              stacklevel=2)

    def close(self) -> None:
        """Close every engine that was started. Safe to call twice."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
            self._closed = True
        for engine in engines:
            try:
                engine.close()
            except Exception as exc:
                warnings.warn(f"closing engine {engine.name!r} failed: {exc!r}",
                              RuntimeWarning, stacklevel=2)

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _EngineStart:
    """One engine being started, in a thread of its own, waited for with its connect timeout.

    A start that outlives the timeout keeps running: when it succeeds the
    engine is used from then on, when it fails the next query tries again.
    Meanwhile every query on that engine fails at once, saying so.
    """

    def __init__(self, gw: Gateway, cfg: EngineConfig):
        self.gw, self.cfg = gw, cfg
        self.timeout = float(cfg.options.get("connect_timeout") or 30.0)
        self.began = time.monotonic()
        self.done = threading.Event()
        self.engine: Engine | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._run, name=f"start-{cfg.name}", daemon=True).start()

    def _run(self) -> None:
        cfg = self.cfg
        engine: Engine | None = None
        try:
            cls = self.gw.engine_types[cfg.type]
            engine = cls(cfg.name, cfg.options, self.gw.config.sources)
            engine.connect()
        except BaseException as exc:
            if engine is not None:
                try:
                    engine.close()
                except Exception:  # the start already failed; report that, not this
                    pass
            if not isinstance(exc, GatewayError):
                exc = QueryError(f"failed to start: {exc}", engine=cfg.name)
            self.error, engine = exc, None
        self.engine = engine
        self.gw._started(cfg, engine)
        self.done.set()

    def wait(self) -> Engine:
        left = self.timeout - (time.monotonic() - self.began)
        if not self.done.wait(max(left, 0.0)):
            raise EngineConnectionError(
                f"the engine did not start within its connect_timeout of {self.timeout:g} s "
                f"(started {time.monotonic() - self.began:.0f} s ago, still trying)",
                engine=self.cfg.name,
                hint="check that what it connects to is reachable; raise "
                     f"engines.{self.cfg.name}.connect_timeout if it is only slow")
        if self.error is not None:
            raise self.error
        assert self.engine is not None
        return self.engine


def connect(
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    plugins: Iterable[ModuleType | object] = (),
) -> Gateway:
    """Open a gateway.

    Args:
        config: a path to ``arrowgate.toml``, a dict of the same structure, or
            None for an in-memory default with one DuckDB engine.
        plugins: extra plugin modules or objects to register beside the
            entry-point plugins.

    Raises:
        gateway.errors.ConfigError: the configuration is wrong.
    """
    return Gateway(config, plugins=plugins)
