"""The engines the conformance suite runs on, each with its small test configuration.

One suite, every engine (ibis's backend tests): an engine joins by adding an
:class:`EngineUnderTest` to :data:`ENGINES`. What an engine cannot do yet is
a :class:`Gap` with a required reason; the suite turns it into a strict xfail
(a gap that starts passing fails the run, so the list stays true), never a skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest


@dataclass(frozen=True)
class Gap:
    """A known difference from the DuckDB reference.

    kind: ``notimpl`` (not built yet), ``notyet`` (waits on an upstream
    change) or ``never`` (by design). ``raises``: the exception expected,
    or None when the answer is wrong rather than an error.
    """

    kind: Literal["notimpl", "notyet", "never"]
    reason: str
    raises: type[BaseException] | tuple[type[BaseException], ...] | None = None

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("a Gap needs a reason")


@dataclass
class EngineUnderTest:
    """One engine configuration the suite runs.

    Attributes:
        name: the test id and the engine's name in the gateway.
        section: the ``[engines.NAME]`` section (``type`` and options).
        gaps: case name -> known gap.
        marks: pytest marks applied to every test of this engine (e.g. a
            marker selecting tests that need PostgreSQL).
    """

    name: str
    section: dict[str, Any]
    gaps: dict[str, Gap] = field(default_factory=dict)
    marks: tuple[Any, ...] = ()

    def engine_section(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """The section to configure; override to start what the engine needs first."""
        return self.section

    def param(self) -> Any:
        return pytest.param(self, id=self.name, marks=self.marks)


_SQLITE_TEXT_TIMESTAMPS = Gap("never", "SQLite keeps timestamps as text, not as timestamps")
_SQLITE_NO_DATE_FUNCS = Gap("never", "SQLite has no year()/month()/date_trunc()",
                            raises=Exception)

ENGINES: list[EngineUnderTest] = [
    EngineUnderTest("duckdb", {"type": "duckdb", "settings": {"threads": 2}}),
    # The outside example plugin (examples/plugin_minimal), installed by dev.py.
    EngineUnderTest(
        "sqlite",
        {"type": "sqlite"},
        gaps={
            "timestamp_parts": _SQLITE_NO_DATE_FUNCS,
            "date_trunc_strftime": _SQLITE_NO_DATE_FUNCS,
            "q03_count_by_passengers_year": _SQLITE_NO_DATE_FUNCS,
            "q04_count_by_passengers_year_distance": _SQLITE_NO_DATE_FUNCS,
            "all_aggregates": _SQLITE_TEXT_TIMESTAMPS,
            "integer_division": Gap("never", "SQLite's % and / on integers match, but "
                                    "its result type is inferred per value"),
            "string_functions": Gap("never", "SQLite's substr/trim match; length() counts "
                                    "bytes for blobs only, yet results widen differently"),
            "case_coalesce_cast": Gap("never", "SQLite's CAST AS INTEGER truncates where "
                                      "DuckDB rounds"),
            "numeric_functions": Gap("never", "SQLite's round() returns a float and has "
                                     "no floor()/ceil() before 3.35", raises=Exception),
            "join_left_unmatched": Gap("never", "example engine; not investigated"),
            "subquery_in": Gap("never", "SQLite's booleans are integers: WHERE is_airport "
                               "compares text 'true'"),
        },
    ),
]
