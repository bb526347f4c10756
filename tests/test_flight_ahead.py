"""Reading an answer ahead of the transport (gateway/flight/ahead.py)."""

from __future__ import annotations

import threading
import time

import pytest

from gateway.flight.ahead import read_ahead
from tests.hang_guard import HANG_GUARD


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
        for i in range(10):
            made.append(i)
            yield i

    stream = read_ahead(engine(), stop=lambda: None, depth=2)
    assert next(stream) == 0
    assert next(stream) == 1
    deadline = time.monotonic() + HANG_GUARD
    while len(made) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    # batch 1 being sent, 2 and 3 read ahead, the reader holding at most one more
    assert len(made) in (4, 5)
    assert list(stream) == list(range(2, 10))


@pytest.mark.parametrize("count", [0, 1, 2])
def test_an_answer_of_one_or_two_batches_is_read_without_a_thread(count):
    readers = []

    def engine():
        for i in range(count):
            readers.append(threading.current_thread())
            yield i

    assert list(read_ahead(engine(), stop=lambda: None)) == list(range(count))
    assert readers == [threading.current_thread()] * count


def test_the_batches_after_the_second_are_read_in_a_thread_of_their_own():
    readers = []

    def engine():
        for i in range(5):
            readers.append(threading.current_thread().name)
            yield i

    assert list(read_ahead(engine(), stop=lambda: None)) == list(range(5))
    caller = threading.current_thread().name
    assert readers == [caller, caller] + ["flight-read-ahead"] * 3


def test_a_consumer_that_stops_early_stops_the_reader():
    stopped = threading.Event()

    def endless():
        i = 0
        while not stopped.is_set():
            yield i
            i += 1
        raise RuntimeError("cancelled")

    stream = read_ahead(endless(), stop=stopped.set)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]  # the third read ahead
    stream.close()
    assert stopped.is_set()
    assert not any(t.name == "flight-read-ahead" and t.is_alive()
                   for t in threading.enumerate())
