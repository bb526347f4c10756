"""Closing a DuckDB engine while a statement still runs on it (a shadow reference the timeout
gave up on) interrupts the statement and closes, with no warning at exit."""

from __future__ import annotations

import threading
import time
import warnings

import gateway
from gateway.errors import GatewayError


def test_closing_while_a_statement_runs_interrupts_it_and_closes_quietly():
    gw = gateway.connect({"engines": {"d": {"type": "duckdb"}}})
    gw.execute("SELECT 1").to_arrow()  # connected
    outcome: list[BaseException | None] = []

    def long_query() -> None:
        try:
            gw.execute("SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3").to_arrow()
            outcome.append(None)
        except GatewayError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=long_query)
    worker.start()
    time.sleep(0.5)  # the statement is running
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "closing engine 'd' failed" would raise here
        gw.close()
    worker.join(30)
    assert not worker.is_alive()
    assert outcome and isinstance(outcome[0], GatewayError)
