"""The gateway: configuration, engines and the path every query takes."""

from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gateway.config import EngineConfig, GatewayConfig, load_config
from gateway.engine import CatalogColumn, Engine
from gateway.errors import ConfigError, GatewayError, QueryError
from gateway.events import QueryEvent
from gateway.plugins import build_plugin_manager, engine_types
from gateway.result import Result

if TYPE_CHECKING:
    from gateway.shadow import ShadowSettings

_query_ids = itertools.count(1)


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
    ):
        self.pm = build_plugin_manager(plugins)
        self.engine_types = engine_types(self.pm)
        self.config: GatewayConfig = load_config(config, self.engine_types)
        #: The checked ``[shadow]`` section, or None (see :mod:`gateway.shadow`).
        self.shadow_settings: ShadowSettings | None = None
        if self.config.shadow:  # the shadow module (and sqlglot) load only when asked for
            from gateway.shadow import ShadowSettings

            self.shadow_settings = ShadowSettings.from_config(self.config)
        self._check_fallbacks()
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: engines being tried as a fallback on this thread, to stop cycles
        self._fallback_chain = threading.local()

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
        """The running engine called ``name`` (the default engine when None), started on demand."""
        cfg = self.engine_config(name)
        with self._lock:
            if self._closed:
                raise GatewayError("the gateway is closed")
            engine = self._engines.get(cfg.name)
            if engine is None:
                cls = self.engine_types[cfg.type]
                engine = cls(cfg.name, cfg.options, self.config.sources)
                try:
                    engine.connect()
                except GatewayError:
                    engine.close()
                    raise
                except Exception as exc:
                    engine.close()
                    raise QueryError(f"failed to start: {exc}", engine=cfg.name) from exc
                self._engines[cfg.name] = engine
            return engine

    def catalog(self, engine: str | None = None) -> list[CatalogColumn]:
        """The schemas, tables and columns one engine can query."""
        return self.engine(engine).catalog()

    # -- queries ---------------------------------------------------------
    def execute(
        self,
        sql: str,
        engine: str | None = None,
        parameters: Sequence[Any] | None = None,
        shadow: str | bool | None = None,
    ) -> Result:
        """Run one SQL statement on an engine and return its streaming answer.

        Args:
            sql: the statement.
            engine: the engine's name; the configured default when None.
            parameters: positional values for placeholders, or None.
            shadow: a reference engine to run the statement on too (the
                answer is then read whole and ``result.shadow`` holds the
                :class:`gateway.shadow.ShadowRecord`); False never shadows;
                None lets the config's ``[shadow]`` section decide.

        Raises:
            gateway.errors.GatewayError: any failure, translated by the engine.
        """
        if isinstance(shadow, str) or (shadow is None and self.shadow_settings is not None):
            from gateway.shadow import shadow_execute

            shadowed = shadow_execute(self, sql, engine, parameters, shadow)
            if shadowed is not None:
                return shadowed
        eng = self.engine(engine)
        cfg = self.config.engines[eng.name]
        if parameters is not None and not eng.supports_parameters:
            from gateway.errors import Unsupported

            refused = Unsupported("query parameters are not supported by this engine type "
                                  f"({cfg.type})", engine=eng.name,
                                  engines=self._engines_with("parameters"))
            if cfg.options.get("fallback"):
                return self._fall_back(cfg.options["fallback"], refused, sql, parameters)
            raise refused
        hook = self.pm.hook
        rewritten = hook.arrowgate_rewrite_sql(sql=sql, engine=eng.name, engine_type=cfg.type)
        run_sql = rewritten if isinstance(rewritten, str) else sql
        event = QueryEvent(
            query_id=next(_query_ids), sql=run_sql, engine=eng.name, engine_type=cfg.type,
            parameters=list(parameters) if parameters is not None else None,
            started=time.time(), original_sql=sql,
        )
        self._notify("arrowgate_query_started", event=event)
        start = time.perf_counter()
        try:
            inner = eng.execute(run_sql, parameters)
        except GatewayError as exc:
            from gateway.errors import Unsupported

            if isinstance(exc, Unsupported) and cfg.options.get("fallback"):
                return self._fall_back(cfg.options["fallback"], exc, sql, parameters)
            self._notify("arrowgate_query_failed", event=event, error=exc,
                         elapsed=time.perf_counter() - start)
            raise
        except Exception as exc:
            err = QueryError(str(exc), engine=eng.name)
            self._notify("arrowgate_query_failed", event=event, error=err,
                         elapsed=time.perf_counter() - start)
            raise err from exc
        answered_by = inner.notes.get("answered_by", eng.name)
        return Result(
            answered_by, inner, start,
            on_finish=lambda rows, elapsed: self._notify(
                "arrowgate_query_finished", event=event, rows=rows, elapsed=elapsed),
            on_error=lambda error, elapsed: self._notify(
                "arrowgate_query_failed", event=event, error=error, elapsed=elapsed),
        )

    def _fall_back(self, fallback: str, refused: GatewayError, sql: str,
                   parameters: Sequence[Any] | None) -> Result:
        """Run a statement the first engine refused as Unsupported on its ``fallback`` engine."""
        chain = self._fallback_chain.__dict__.setdefault("engines", set())
        if fallback in chain:
            raise refused
        chain.add(fallback)
        try:
            result = self.execute(sql, engine=fallback, parameters=parameters, shadow=False)
        finally:
            chain.discard(fallback)
        result.notes["answered_by"] = result.engine
        result.notes["fallback_reason"] = refused.message
        return result

    def _engines_with(self, capability: str) -> tuple[str, ...]:
        return tuple(name for name, cfg in self.config.engines.items()
                     if capability in self.engine_types[cfg.type].capabilities(cfg.options))

    def _notify(self, hook_name: str, **kwargs: Any) -> None:
        try:
            getattr(self.pm.hook, hook_name)(**kwargs)
        except Exception as exc:
            warnings.warn(f"a plugin's {hook_name} failed: {exc!r}", RuntimeWarning,
                          stacklevel=3)

    # -- lifecycle -------------------------------------------------------
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
