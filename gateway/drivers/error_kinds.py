"""The kind (``gateway.errors.KINDS``) of a database error, from its SQLSTATE or its words.

Shared by the engines that reach other databases (``adbc``, ``odbc``): SQLSTATE
is standard (ISO/IEC 9075, extended by PostgreSQL), and where a driver gives
none (SQLite reports everything as ``HY000``) a few messages say enough.
Flight SQL has no SQLSTATE: ``arrowgate serve`` sends a failed call's kind in
the gRPC trailer :data:`FLIGHT_TRAILER`, which the adbc engine in front of it
reads back (:func:`trailer_kind`).
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.errors import KINDS

#: The trailing gRPC header of a failed Flight call that holds the error's kind.
FLIGHT_TRAILER = "x-arrowgate-error-kind"

#: SQLSTATE codes, then their two-character classes, and the kind each means.
_BY_STATE = {
    "42601": "syntax", "42000": "syntax",
    "42803": "syntax",  # grouping: a column neither grouped nor aggregated (DuckDB's Binder Error)
    "42703": "unknown_object", "42P01": "unknown_object", "42883": "unknown_object",
    "42704": "unknown_object", "3F000": "unknown_object", "42S02": "unknown_object",
    "42S22": "unknown_object",
    "42804": "type", "42846": "type", "22P02": "type", "22018": "type", "22007": "type",
    "22003": "out_of_range", "22008": "out_of_range",
    "22012": "division_by_zero",
    "42501": "permission", "25006": "permission",
    "0A000": "unsupported",
    "57014": "timeout",
    "XX000": "internal", "XX001": "internal",
}
_BY_CLASS = {"23": "constraint", "53": "resource", "54": "resource", "28": "permission"}
#: words of drivers that give no useful SQLSTATE (SQLite), and the kind they mean
_BY_WORDS = (
    ("syntax error", "syntax"),
    ("no such column", "unknown_object"),
    ("no such table", "unknown_object"),
    ("no such function", "unknown_object"),
    ("does not exist", "unknown_object"),
    ("division by zero", "division_by_zero"),
    ("divide by zero", "division_by_zero"),
    ("constraint failed", "constraint"),
    ("out of range", "out_of_range"),
    ("invalid input syntax", "type"),
    ("out of memory", "resource"),
    ("permission denied", "permission"),
    ("readonly database", "permission"),
    # SQLite's SQLITE_AUTH: an authorizer refused it (load_extension() where it is off)
    ("not authorized", "permission"),
    # PostgreSQL's 25006, from an ADBC stream, whose errors carry no SQLSTATE
    ("in a read-only transaction", "permission"),
)


def error_kind(sqlstate: str | None, message: str) -> str | None:
    """The kind of an error with this SQLSTATE (None or "" when unknown) and message."""
    state = (sqlstate or "").strip().upper()
    if state == "42883" and "operator does not exist" in message.lower():
        return "type"  # PostgreSQL's `text > integer`: the operator exists, not for these types
    if state in _BY_STATE:
        return _BY_STATE[state]
    if state[:2] in _BY_CLASS:
        return _BY_CLASS[state[:2]]
    lower = message.lower()
    for words, kind in _BY_WORDS:
        if words in lower:
            return kind
    return None


def trailer_kind(details: Iterable[tuple[bytes | str, bytes | str]]) -> str | None:
    """The kind a Flight server sent in :data:`FLIGHT_TRAILER`, from an ADBC error's
    ``details`` (its trailing headers among them); None when absent or not one of KINDS."""
    for key, value in details:
        key = key.decode() if isinstance(key, bytes) else key
        if key.lower() == FLIGHT_TRAILER:
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            if text in KINDS:
                return text
    return None
