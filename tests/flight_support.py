"""A Flight SQL service on a free loopback port, for the flight tests."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow.flight as flight
import pytest

import gateway
from gateway.flight.serve_config import ServeSettings
from gateway.flight.server import FlightSqlServer
from tests.conftest import DATA

#: Two DuckDB engines (so a session's choice can be seen) and the CSV scanner.
CONFIG: dict[str, Any] = {
    "default_engine": "duck",
    "engines": {"duck": {"type": "duckdb"}, "other": {"type": "duckdb"},
                "scan": {"type": "csv", "fallback": "duck"}},
    "sources": {"trips": {"path": str(DATA / "trips.csv")}},
}


@contextmanager
def serving(config: Mapping[str, Any] | None = None, **settings: Any) -> Iterator[FlightSqlServer]:
    """A server for ``config`` (default :data:`CONFIG`), listening on a free port."""
    with gateway.connect(dict(config or CONFIG)) as gw:
        if "serve" in (config or {}):
            checked = ServeSettings.from_config(gw.config, port=0, **settings)
        else:
            checked = ServeSettings(port=0, **settings)
        with FlightSqlServer(gw, checked) as server:
            yield server


def server_fixture(**settings: Any) -> Any:
    """A fixture: one server for :data:`CONFIG` shared by a test module (``server = ...``)."""
    @pytest.fixture(scope="module")
    def server() -> Iterator[FlightSqlServer]:
        with serving(**settings) as server:
            yield server

    return server


def action(client: flight.FlightClient, name: str, body: bytes = b"",
           options: flight.FlightCallOptions | None = None) -> Any:
    """A gateway action's JSON answer."""
    results = list(client.do_action(flight.Action(name, body), options))
    return json.loads(results[0].body.to_pybytes())
