"""Reading an answer ahead of the transport (gateway/flight/ahead.py)."""

from __future__ import annotations

import threading
import time

import pytest

from gateway.flight.ahead import read_ahead


def test_batches_arrive_in_order_and_errors_pass_through():
    assert list(read_ahead(iter(range(100)), stop=lambda: None)) == list(range(100))

    def failing():
        yield 1
        raise ValueError("the engine failed")

    got = []
    with pytest.raises(ValueError, match="engine failed"):
        for item in read_ahead(failing(), stop=lambda: None):
            got.append(item)
    assert got == [1]


def test_the_next_batch_is_made_while_this_one_is_sent():
    made = []

    def engine():
        for i in range(5):
            made.append(i)
            yield i

    stream = read_ahead(engine(), stop=lambda: None, depth=2)
    assert next(stream) == 0
    deadline = time.monotonic() + 5
    while len(made) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(made) == 3  # batch 0 being sent, 1 and 2 read ahead, and no more
    assert list(stream) == [1, 2, 3, 4]


def test_a_consumer_that_stops_early_stops_the_reader():
    stopped = threading.Event()

    def endless():
        i = 0
        while not stopped.is_set():
            yield i
            i += 1
        raise RuntimeError("cancelled")

    stream = read_ahead(endless(), stop=stopped.set)
    assert next(stream) == 0
    stream.close()
    assert stopped.is_set()
    assert not any(t.name == "flight-read-ahead" and t.is_alive()
                   for t in threading.enumerate())
