"""The pipeline's shadow step, as a plugin: the core asks for it through two hooks.

The statement pipeline (:mod:`gateway.statement`) calls ``arrowgate_shadowed`` at its
step 7, and :class:`gateway.core.Gateway` calls ``arrowgate_shadow_settings`` when its
configuration has a ``[shadow]`` section; this module answers both, so the core never
imports the shadow package. It is registered through the entry point ``shadow`` of the
group ``arrowgate`` and always loaded (``ARROWGATE_PLUGINS`` does not leave it out). It
imports the shadow machinery (and through it sqlglot) only when a statement is shadowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.plugins import hookimpl

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.result import Result
    from gateway.shadow.settings import ShadowSettings
    from gateway.statement import Pipeline, Statement


@hookimpl
def arrowgate_shadow_settings(config: GatewayConfig) -> ShadowSettings | None:
    """The checked ``[shadow]`` section of ``config``."""
    from gateway.shadow.settings import ShadowSettings

    return ShadowSettings.from_config(config)


@hookimpl
def arrowgate_shadowed(pipeline: Pipeline, statement: Statement) -> Result | None:
    """Step 7 of the statement pipeline: ``stmt`` run on its engine and on a reference,
    or None when it is not to be shadowed (the pipeline then runs it plainly).

    ``stmt.shadow``: a reference engine's name, or None (the configuration's
    ``[shadow]`` section decides). The principal must be allowed to use an engine
    it names; a configured reference it may not use leaves its statements
    unshadowed, since the verdict and its differences show the reference's rows.
    """
    import dataclasses
    import random

    from gateway.errors import GatewayError
    from gateway.shadow.run import run_shadowed
    from gateway.shadow.settings import DEFAULT_STORE, ShadowSettings

    stmt, gw = statement, pipeline.gw
    configured: ShadowSettings | None = gw.shadow_settings
    primary = gw.engine_config(stmt.engine).name
    if isinstance(stmt.shadow, str):
        reference = gw.engine_config(stmt.shadow).name
        if not stmt.principal.may_use(reference):
            raise GatewayError(f"user {stmt.principal.name!r} may not use engine "
                               f"{reference!r}, so it cannot be the shadow reference",
                               engine=reference, kind="permission")
        settings = dataclasses.replace(configured, reference=reference, sample=1.0) \
            if configured is not None else \
            ShadowSettings(reference=reference, store=str(gw.config.base_dir / DEFAULT_STORE))
    elif stmt.shadow is None and configured is not None:
        if configured.primary not in (None, primary) or configured.reference == primary \
                or not stmt.principal.may_use(configured.reference):
            return None
        if configured.sample < 1.0 and random.random() >= configured.sample:
            return None
        settings = configured
    else:
        return None
    result, error, record = run_shadowed(pipeline, stmt, settings)
    if error is not None:
        if isinstance(error, GatewayError):
            error.shadow = record  # type: ignore[attr-defined]
        raise error
    assert result is not None
    result.shadow = record
    return result
