"""The errors arrowgate raises to its callers.

Engines translate their driver's exceptions into these at the boundary, so a
front end never sees a driver type. Every error carries the engine's name (when
one is involved) and the engine's own message; ``str(err)`` reads as one line
that says what went wrong and, where we know it, what to do, with secrets
masked (:func:`gateway.masking.mask`).
"""

from __future__ import annotations

import re

from gateway.masking import mask_text

#: How an engine names its own error kind at the start of its message ("Binder Error: ...",
#: as DuckDB does): a few capitalised words, then "Error:".
_NATIVE_KIND = re.compile(r"\A((?:[A-Z][A-Za-z]*\s)+Error):\s*")

#: What went wrong, as an engine classifies its native error (``GatewayError.kind``). The
#: shadow comparator counts two failures as agreeing only when their kinds are the same.
KINDS = (
    "syntax",            # the SQL cannot be parsed, or uses a clause where it is not allowed
    "unknown_object",    # a table, column, function, file or schema that does not exist
    "type",              # a value or argument of the wrong type, or a failed conversion
    "division_by_zero",
    "out_of_range",      # overflow, or a value outside its type's range
    "constraint",        # a key, NOT NULL or CHECK constraint, or a write conflict
    "permission",        # not allowed: read-only, access denied
    "timeout",
    "unsupported",       # the engine has no implementation of the construct
    "resource",          # out of memory, disk or another resource
    "internal",          # the engine's own bug or assertion
)


class GatewayError(Exception):
    """Base of every error arrowgate raises on purpose.

    Attributes:
        engine: the name of the engine involved, or None.
        message: what went wrong, in the engine's or the gateway's words.
        hint: what the user can do about it, or None.
        kind: one of :data:`KINDS` where the engine classified its native error;
            otherwise the class's own kind (``query``, ``connection``...).
    """

    #: Process exit code the CLI uses for this kind of error.
    exit_code = 1
    kind = "error"

    def __init__(self, message: str, *, engine: str | None = None, hint: str | None = None,
                 kind: str | None = None):
        if kind is not None:
            if kind not in KINDS:
                raise ValueError(f"unknown error kind {kind!r}; one of {', '.join(KINDS)}")
            self.kind = kind
        self.message = message
        self.engine = engine
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        prefix = f"[{self.engine}] " if self.engine else ""
        suffix = f" ({self.hint})" if self.hint else ""
        return mask_text(f"{prefix}{self.message}{suffix}")


class ConfigError(GatewayError):
    """The configuration is wrong: a bad key, value, type or a missing file.

    Attributes:
        path: the configuration file (or ``<dict>``), or None.
        key: the dotted key that is wrong (``engines.duck.settings.threads``), or None.
    """

    exit_code = 2
    kind = "configuration"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        key: str | None = None,
        engine: str | None = None,
        hint: str | None = None,
    ):
        self.path = path
        self.key = key
        super().__init__(message, engine=engine, hint=hint)

    def __str__(self) -> str:
        where = mask_text(": ".join(p for p in (self.path, self.key) if p))
        base = super().__str__()
        return f"{where}: {base}" if where else base


class EngineConnectionError(GatewayError):
    """An engine could not connect to (or lost) what it queries."""

    kind = "connection"


class QueryError(GatewayError):
    """The engine ran the query and it failed (syntax, catalog, runtime)."""

    kind = "query"


class Unsupported(GatewayError):
    """The engine cannot run this construct; ``engines`` lists ones that can."""

    kind = "unsupported"

    def __init__(
        self,
        message: str,
        *,
        engine: str | None = None,
        hint: str | None = None,
        engines: tuple[str, ...] = (),
    ):
        self.engines = engines
        if engines and hint is None:
            hint = "engines that can run it: " + ", ".join(engines)
        super().__init__(message, engine=engine, hint=hint)


class Overloaded(GatewayError):
    """A limit on statements running at once is reached (``[serve] max_queries``, ...):
    nothing ran, and the same statement may succeed later."""

    kind = "resource"


class OutputError(GatewayError):
    """The answer could not be written (disk full, no permission); nothing was left behind."""

    kind = "output"


class Cancelled(GatewayError):
    """The query was cancelled before it finished."""

    kind = "cancelled"


class QueryTimeout(GatewayError):
    """The query ran longer than its time limit."""

    kind = "timeout"


def error_label(error: GatewayError) -> tuple[str, str]:
    """The label a front end shows ``error`` under, and the start of its message the
    label replaces ("" when none).

    The label is the engine's own name for the error when its message starts with one
    (DuckDB's "Binder Error", "Catalog Error", "Parser Error"), so a user meets the
    words the engine's own tools print; otherwise the gateway's kind ("unknown object
    error"), or "error".
    """
    native = _NATIVE_KIND.match(error.message)
    if native is not None:
        return native.group(1), native.group(0)
    if error.kind == GatewayError.kind:
        return "error", ""
    return f"{error.kind.replace('_', ' ')} error", ""


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where a file's bytes stop being UTF-8, for a message: ``not UTF-8: byte 0xe9 at line 3,
    column 12 (save the file as UTF-8)``."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - data.rfind(b"\n", 0, exc.start)
    return (f"not UTF-8: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
            "(save the file as UTF-8)")


__all__ = [
    "KINDS",
    "Cancelled",
    "ConfigError",
    "EngineConnectionError",
    "GatewayError",
    "OutputError",
    "QueryError",
    "QueryTimeout",
    "Unsupported",
    "error_label",
]


def install_extra(extra: str) -> str:
    """How to install arrowgate's ``extra``: its packages by name, which pip finds on
    any index (arrowgate itself is on none: ``pip install 'arrowgate[tui]'`` would find
    nothing outside a clone), and the extra's name for those who build from a clone."""
    import importlib.metadata
    import re

    try:
        requires = importlib.metadata.metadata("arrowgate").get_all("Requires-Dist") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    packages = [re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in requires
                if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", r)]
    names = " ".join(p for p in packages if p != "arrowgate")
    return (f"pip install {names} (arrowgate's {extra} extra)" if names
            else f"install arrowgate's {extra} extra")
