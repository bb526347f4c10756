"""The conformance corpus and the sources every engine under test mounts.

The cases are read by :mod:`gateway.sql.corpus`, the reader ``arrowgate shadow``
and ``arrowgate bench`` use, so the same files feed the conformance tests,
the shadow examples and the benchmarks.
"""

from __future__ import annotations

from pathlib import Path

from gateway.sql.corpus import Query, read_queries

QUERIES = Path(__file__).parent / "queries"
DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


def all_cases() -> list[Query]:
    """Every case of every ``queries/*.sql`` file (names are unique across them)."""
    return read_queries([QUERIES])


#: The sources every engine under test mounts.
SOURCES = {
    "trips": {"path": str(DATA / "trips.csv")},
    "zones": {"path": str(DATA / "zones.csv")},
}
