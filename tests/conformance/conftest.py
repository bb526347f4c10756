"""Fixtures of the conformance suite: the engine under test and the DuckDB reference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import gateway
from tests.conformance.corpus import SOURCES
from tests.conformance.engines import ENGINES, EngineUnderTest


@pytest.fixture(scope="session")
def reference() -> Iterator[gateway.Gateway]:
    """The installed DuckDB in process: its answers are the reference."""
    with gateway.connect({"engines": {"reference": {"type": "duckdb"}},
                          "sources": SOURCES}) as gw:
        yield gw


@pytest.fixture(scope="session")
def served_sources() -> Iterator[Any]:
    """``arrowgate serve`` on a free port: one DuckDB engine mounting the corpus' sources."""
    from tests.flight_support import serving

    with serving({"engines": {"duck": {"type": "duckdb"}}, "sources": SOURCES}) as server:
        yield server


@pytest.fixture(scope="session")
def reference_answers(reference: gateway.Gateway) -> dict[str, Any]:
    """Reference answers (or errors) by SQL text, computed once per session."""
    return {}


@pytest.fixture(scope="module", params=[e.param() for e in ENGINES])
def engine_under_test(request: pytest.FixtureRequest) -> Iterator[tuple[EngineUnderTest, Any]]:
    eut: EngineUnderTest = request.param
    section = eut.engine_section(request)
    try:
        gw = gateway.connect({"engines": {eut.name: section},
                              "sources": eut.engine_sources(request)})
    except gateway.ConfigError as exc:
        pytest.fail(f"engine {eut.name!r} cannot be configured here: {exc}")
    with gw:
        yield eut, gw
