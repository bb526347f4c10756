"""Gateway errors as Flight errors, each with the gRPC status a client expects.

=====================================  =====================================
gateway error                          Flight status
=====================================  =====================================
any error of kind ``permission``       UNAUTHORIZED (PERMISSION_DENIED)
Overloaded (a limit on running ones)   UNAVAILABLE
ConfigError (an unknown engine)        INVALID_ARGUMENT
QueryError                             INVALID_ARGUMENT
Unsupported                            UNIMPLEMENTED
Cancelled                              CANCELLED
QueryTimeout                           DEADLINE_EXCEEDED
EngineConnectionError                  UNAVAILABLE
any other GatewayError                 INTERNAL
=====================================  =====================================

A status says little (every query error is INVALID_ARGUMENT), so a call that
fails with a gateway error also sends the error's kind (``syntax``,
``unknown_object``, ... of ``gateway.errors.KINDS``) in the gRPC trailer
``x-arrowgate-error-kind``: a client that reads trailers (the ADBC driver
lists them among an error's details) can tell a typo from a missing table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from gateway.drivers.error_kinds import FLIGHT_TRAILER
from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    Overloaded,
    QueryError,
    QueryTimeout,
    Unsupported,
)

#: an absolute path of at least one folder (not a URL's: no ``:`` or ``/`` before it)
_SERVER_PATH = re.compile(r"(?<![\w.:/\\])/(?:[\w.@+~-]+/)+([\w.@+~-]*)")


def without_server_paths(message: str) -> str:
    """``message`` with every absolute path cut to its last part (``…/trips.csv``): an
    engine's error names the server's folders (a source's file, a spill folder, an
    extension's), which a client of the service has no business knowing."""
    return _SERVER_PATH.sub(lambda m: "…/" + m.group(1), message)


def to_flight(exc: GatewayError) -> Exception:
    """The Flight error to raise for ``exc``, carrying its message (without the server's
    paths) and its kind (which :func:`sends_kind` puts in a trailer)."""
    error = _status_error(exc)
    error.gateway_kind = exc.kind  # type: ignore[attr-defined]
    return error


def _status_error(exc: GatewayError) -> Exception:
    message = without_server_paths(str(exc))
    if exc.kind == "permission":
        return flight.FlightUnauthorizedError(message)
    if isinstance(exc, Overloaded):
        return flight.FlightUnavailableError(message)
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


def send_kind(context: Any, error: BaseException) -> None:
    """Put the kind of a gateway error (from :func:`to_flight`) in the call's trailers."""
    kind = getattr(error, "gateway_kind", None)
    if kind is not None:
        context.add_trailer(FLIGHT_TRAILER, kind)


Method = TypeVar("Method", bound=Callable[..., Any])


def sends_kind(method: Method) -> Method:
    """A Flight method (``self, context, ...``) whose gateway errors send their kind."""
    @functools.wraps(method)
    def call(self: Any, context: Any, *args: Any) -> Any:
        try:
            return method(self, context, *args)
        except Exception as error:
            send_kind(context, error)
            # pyarrow appends the traceback of any error that is not a FlightError to
            # the message the client sees; cut it to this frame, so no frames of the
            # engines' code (file paths, source lines) leave the server
            raise error.with_traceback(None) from None

    return call  # type: ignore[return-value]


def kind(exc: BaseException) -> str:
    """The outcome the query log records for a failure."""
    if isinstance(exc, GatewayError):
        return exc.kind
    return type(exc).__name__
