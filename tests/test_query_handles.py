"""Query handles: a cancel that an engine misses is repeated, and Ctrl-C reaches every query."""

from __future__ import annotations

import threading
import time

from gateway.result import QueryHandle, cancel_all
from tests.hang_guard import HANG_GUARD


def _wait_for(condition, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_a_cancel_the_engine_missed_is_repeated_until_the_query_ends():
    """DuckDB clears its interrupt flag when a query begins, so an interrupt that lands
    between the engine registering its stopper and the query starting is lost: the
    handle calls the stopper again while the query still runs."""
    calls = []
    handle = QueryHandle("e", 1, "SELECT 1")
    handle.on_cancel(lambda: calls.append(time.monotonic()))
    assert handle.cancel()
    assert len(calls) == 1
    assert _wait_for(lambda: len(calls) >= 3), calls
    handle.finish()
    settled = len(calls)
    time.sleep(0.6)  # longer than the next nudge would wait
    assert len(calls) == settled


def test_a_stopper_registered_after_the_cancel_runs_at_once_and_is_repeated():
    handle = QueryHandle("e", 1, "SELECT 1")
    handle.cancel()
    calls = []
    handle.on_cancel(lambda: calls.append(1))
    assert calls == [1]
    assert _wait_for(lambda: len(calls) >= 2)
    handle.finish()


def test_cancel_all_stops_every_running_query_and_no_finished_one():
    running = [QueryHandle("e", i, "SELECT 1") for i in range(3)]
    done = QueryHandle("e", 9, "SELECT 1")
    done.finish()
    stopped = threading.Event()
    running[0].on_cancel(stopped.set)
    assert cancel_all() >= 3
    assert stopped.is_set()
    assert all(h.cancelled for h in running) and not done.cancelled
    for h in running:
        h.finish()


def test_a_stopper_that_reaches_the_whole_engine_is_not_repeated():
    """The base engine session's stopper cancels every query of the engine: repeating it
    for seconds would cancel other users' queries that started meanwhile."""
    engine_wide, own = [], []
    handle = QueryHandle("e", 1, "SELECT 1")
    handle.on_cancel(lambda: engine_wide.append(1), repeat=False)
    handle.on_cancel(lambda: own.append(1))
    handle.cancel()
    assert _wait_for(lambda: len(own) >= 3), own
    handle.finish()
    assert engine_wide == [1]


def test_started_in_block_collects_this_threads_handles_only():
    from gateway.result import started_in_block

    elsewhere = []
    with started_in_block() as outer:
        first = QueryHandle("e", 1, "SELECT 1")
        with started_in_block() as inner:
            second = QueryHandle("e", 1, "SELECT 2")
        thread = threading.Thread(target=lambda: elsewhere.append(QueryHandle("e", 2, "x")))
        thread.start()
        thread.join()
    after = QueryHandle("e", 1, "SELECT 3")
    assert outer == [first] and inner == [second]
    assert elsewhere[0] not in outer and after not in outer
    for handle in (first, second, elsewhere[0], after):
        handle.finish()


def test_finished_queries_leave_the_deadline_heap():
    """Each timed query's entry stayed in the shared deadline heap until its deadline:
    a service with the default 300 s timeout kept every query of the last five minutes
    (found by bench/client_model.py's slow growth, ~4,000 entries a minute)."""
    from gateway.result import _deadlines

    before = len(_deadlines)
    for _ in range(5000):
        handle = QueryHandle("duck", 0, "SELECT 1", timeout=300)
        handle.start_timer()
        handle.finish()
    assert len(_deadlines) - before <= 2 * _deadlines.SWEEP_AFTER


def test_a_sweep_keeps_the_deadlines_of_running_queries():
    running = QueryHandle("duck", 0, "SELECT 1", timeout=0.2)
    stopped = threading.Event()
    running.on_cancel(stopped.set)
    running.start_timer()
    for _ in range(3000):  # sweeps happen while it runs
        handle = QueryHandle("duck", 0, "SELECT 1", timeout=300)
        handle.start_timer()
        handle.finish()
    assert stopped.wait(HANG_GUARD), "the running query's timeout was swept away"
    running.finish()
