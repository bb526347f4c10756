"""Gateway errors as Flight errors, each with the gRPC status a client expects.

=====================================  =====================================
gateway error                          Flight status
=====================================  =====================================
ConfigError (an unknown engine)        INVALID_ARGUMENT
QueryError                             INVALID_ARGUMENT
Unsupported                            UNIMPLEMENTED
Cancelled                              CANCELLED
QueryTimeout                           DEADLINE_EXCEEDED
EngineConnectionError                  UNAVAILABLE
any other GatewayError                 INTERNAL
=====================================  =====================================
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight

from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    QueryTimeout,
    Unsupported,
)


def to_flight(exc: GatewayError) -> Exception:
    """The Flight error to raise for ``exc``, carrying its whole message."""
    message = str(exc)
    if isinstance(exc, (ConfigError, QueryError)):
        return pa.ArrowInvalid(message)
    if isinstance(exc, Unsupported):
        return pa.ArrowNotImplementedError(message)
    if isinstance(exc, Cancelled):
        return flight.FlightCancelledError(message)
    if isinstance(exc, QueryTimeout):
        return flight.FlightTimedOutError(message)
    if isinstance(exc, EngineConnectionError):
        return flight.FlightUnavailableError(message)
    return flight.FlightInternalError(message)


def kind(exc: BaseException) -> str:
    """The outcome the query log records for a failure."""
    if isinstance(exc, GatewayError):
        return exc.kind
    return type(exc).__name__
