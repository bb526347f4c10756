"""DuckDB errors, from any execution path, as the gateway errors callers see."""

from __future__ import annotations

import re

from gateway.errors import Cancelled, EngineConnectionError, GatewayError, QueryError

#: DuckDB's error type (the "X Error:" its messages start with) -> gateway.errors.KINDS
_KIND_OF_TYPE = {
    "parser": "syntax",
    "syntax": "syntax",
    "parameter not resolved": "syntax",
    "parameter not allowed": "syntax",
    "catalog": "unknown_object",
    "binder": "syntax",
    "conversion": "type",
    "mismatch type": "type",
    "invalid type": "type",
    "invalid input": "type",
    "out of range": "out_of_range",
    "sequence": "out_of_range",
    "constraint": "constraint",
    "transaction": "constraint",
    "dependency": "constraint",
    "permission": "permission",
    "not implemented": "unsupported",
    "out of memory": "resource",
    "io": "resource",
    "http": "resource",
    "internal": "internal",
    "fatal": "internal",
    "serialization": "internal",
}
_ERROR_TYPE = re.compile(r"\b([A-Za-z][A-Za-z ]*?) Error:")
_MISSING = ("does not exist", "not found", "no files found", "no such file", "unknown")


def error_kind(message: str) -> str | None:
    """The kind (``gateway.errors.KINDS``) of a DuckDB error message, or None when unknown.

    Every execution path (Python API, ADBC, worker, CLI) keeps DuckDB's message,
    which names the error type first ("Binder Error: ..."); a few types are
    refined by what the message says.
    """
    found = _ERROR_TYPE.search(message)
    if found is None:
        return None
    kind = _KIND_OF_TYPE.get(found.group(1).strip().lower())
    lower = message.lower()
    if "division by zero" in lower:
        return "division_by_zero"
    if kind in ("syntax", "resource") and any(m in lower for m in _MISSING):
        return "unknown_object"  # a column or file that is not there
    if kind == "syntax" and ("no function matches" in lower or "best candidate" in lower
                             or "cannot compare" in lower or "cannot mix" in lower
                             or "cannot combine" in lower):
        return "type"
    if kind == "type" and "out of range" in lower:
        return "out_of_range"
    if kind == "resource" and "permission denied" in lower:
        return "permission"
    return kind


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
    return QueryError(message, engine=engine, kind=error_kind(message))
