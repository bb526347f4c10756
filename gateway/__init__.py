"""arrowgate: a plugin-based, multi-engine SQL gateway that returns Apache Arrow.

    >>> import gateway
    >>> with gateway.connect() as gw:
    ...     gw.execute("SELECT 42 AS answer").to_arrow().to_pylist()
    [{'answer': 42}]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    OutputError,
    QueryError,
    QueryTimeout,
    Unsupported,
)

if TYPE_CHECKING:
    from gateway.core import Gateway, connect
    from gateway.plugins import hookimpl
    from gateway.result import Result

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The core (and through it pyarrow and the config parser) loads on first use,
    # so `import gateway` stays cheap for the CLI and for plugins; pluggy too (35 ms,
    # importlib.metadata's), which keeps the CLI's first moments short, where a
    # Ctrl-C would come before its handler (gateway.cli.console)
    if name == "hookimpl":
        from gateway.plugins import hookimpl

        return hookimpl
    if name in ("connect", "Gateway"):
        from gateway import core

        return getattr(core, name)
    if name == "Result":
        from gateway.result import Result

        return Result
    raise AttributeError(f"module 'gateway' has no attribute {name!r}")


__all__ = [
    "Cancelled",
    "ConfigError",
    "EngineConnectionError",
    "Gateway",
    "GatewayError",
    "OutputError",
    "QueryError",
    "QueryTimeout",
    "Result",
    "Unsupported",
    "connect",
    "hookimpl",
]
