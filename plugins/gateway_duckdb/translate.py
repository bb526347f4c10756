"""DuckDB errors, from any execution path, as the gateway errors callers see."""

from __future__ import annotations

from gateway.errors import Cancelled, EngineConnectionError, GatewayError, QueryError


def translate(exc: BaseException, engine: str) -> GatewayError:
    """A DuckDB exception (Python API, ADBC or CLI) as the gateway error a caller should see."""
    if isinstance(exc, GatewayError):
        return exc
    name = type(exc).__name__
    message = str(exc)
    if name == "InterruptException" or "INTERRUPT" in message.upper():
        return Cancelled("the query was cancelled", engine=engine)
    if name in ("IOException", "ConnectionException") and "database" in message.lower():
        return EngineConnectionError(message, engine=engine)
    return QueryError(message, engine=engine)
