"""A DuckDB engine in a worker process: a crash or a hang costs one query, not the gateway."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from gateway.errors import Cancelled, EngineConnectionError, GatewayError, QueryTimeout
from tests.duckdb_support import V155, open_engine, rows, use_shared_home
from tests.hang_guard import HANG_GUARD

#: Runs for minutes on any machine: time enough to be killed in.
ENDLESS = "SELECT sum(a.range * b.range) AS s FROM range(100000000) a, range(100000) b"


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory) -> Path:
    return use_shared_home(tmp_path_factory)


@pytest.fixture
def worker():
    engine = open_engine({"version": V155, "isolation": "process", "settings": {"threads": 1}})
    yield engine
    engine.close()


def run_in_thread(engine, sql: str) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            engine.execute(sql).reader.read_all()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, errors


def wait_running(engine) -> int:
    """Until the worker has spent CPU time on the query that was just sent; its pid."""
    session = engine._session
    deadline = time.monotonic() + HANG_GUARD
    while not session._in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = session.pid
    start = cpu_ticks(pid)
    while time.monotonic() < deadline and cpu_ticks(pid) - start < 20:
        time.sleep(0.02)
    return pid


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[11])  # utime


def test_a_worker_killed_mid_query_fails_that_query_and_the_next_one_succeeds(worker):
    first_pid = worker._session.pid
    assert rows(worker, "SELECT 1 AS one") == [{"one": 1}]
    thread, errors = run_in_thread(worker, ENDLESS)
    assert wait_running(worker) == first_pid
    os.kill(first_pid, signal.SIGKILL)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], EngineConnectionError)
    assert "killed by signal 9" in str(errors[0])
    assert rows(worker, "SELECT 2 AS two") == [{"two": 2}]
    assert worker._session.pid != first_pid


def test_a_worker_killed_while_streaming_fails_the_stream_not_the_gateway(worker):
    reader = worker.execute("SELECT i, repeat('x', 100) AS pad FROM range(3000000) t(i)").reader
    assert reader.read_next_batch().num_rows > 0
    os.kill(worker._session.pid, signal.SIGKILL)
    with pytest.raises(EngineConnectionError, match="worker process was killed"):
        reader.read_all()
    assert rows(worker, "SELECT 3 AS three") == [{"three": 3}]


def test_a_hung_query_is_stopped_by_the_timeout_and_the_engine_lives_on():
    engine = open_engine({"version": V155, "isolation": "process", "timeout": 1})
    try:
        start = time.monotonic()
        with pytest.raises(QueryTimeout, match="longer than 1 s"):
            engine.execute(ENDLESS).reader.read_all()
        assert time.monotonic() - start < HANG_GUARD
        assert rows(engine, "SELECT 4 AS four") == [{"four": 4}]
    finally:
        engine.close()


def test_cancel_stops_the_query_and_the_next_one_runs(worker):
    thread, errors = run_in_thread(worker, ENDLESS)
    wait_running(worker)
    worker.cancel()
    thread.join(timeout=30)
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
    assert rows(worker, "SELECT 5 AS five") == [{"five": 5}]


def test_a_second_query_while_an_answer_is_open_gets_both_answers_whole(worker):
    first = worker.execute("SELECT i FROM range(500000) t(i)").reader
    first_batch = first.read_next_batch()
    assert rows(worker, "SELECT 6 AS six") == [{"six": 6}]
    rest = first.read_all()
    assert first_batch.num_rows + rest.num_rows == 500000


def test_query_errors_come_back_as_query_errors_and_the_worker_stays(worker):
    pid = worker._session.pid
    with pytest.raises(GatewayError, match="no_such_column"):
        rows(worker, "SELECT no_such_column FROM range(3)")
    assert rows(worker, "SELECT ? + 1 AS n", [41]) == [{"n": 42}]
    assert worker._session.pid == pid


def mapping_of(batch) -> tuple[int, str, int]:
    """Start, name and file (inode) of the memory mapping holding a batch's first column."""
    address = batch.column(0).buffers()[1].address
    with open("/proc/self/maps") as fh:
        for line in fh:
            span, *rest = line.split(maxsplit=5)
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= address < high:
                return low, rest[4].strip() if len(rest) > 4 else "", int(rest[3])
    raise AssertionError("no mapping holds the batch")


#: About 85 MB of rows: several segments.
LARGE = "SELECT i, repeat('x', 200) AS pad FROM range(400000) t(i)"


def test_an_answer_is_read_in_place_from_memory_files_the_worker_hands_over(worker):
    answer = worker.execute(LARGE).reader.read_all()
    assert answer.num_rows == 400000
    assert sorted(answer.column("i").to_pylist()) == list(range(400000))
    maps = {mapping_of(b) for b in answer.to_batches()}
    assert len(maps) > 1
    assert all(name.startswith("/memfd:arrowgate-answer") for _, name, _ in maps)


def test_a_reader_that_stops_reading_holds_the_worker_back(worker):
    from gateway_duckdb.protocol import WINDOW

    reader = worker.execute("SELECT i, i * 2.0 AS d FROM range(10000000) t(i)").reader  # 160 MB
    first = reader.read_next_batch()
    pid = worker._session.pid

    def held() -> int:
        return sum("memfd:arrowgate-answer" in os.readlink(f"/proc/{pid}/fd/{fd}")
                   for fd in os.listdir(f"/proc/{pid}/fd"))

    deadline, ticks = time.monotonic() + HANG_GUARD, [-1]
    while time.monotonic() < deadline:  # until the worker stops working: blocked or done
        time.sleep(0.5)
        ticks.append(cpu_ticks(pid))
        if ticks[-1] == ticks[-2]:
            break
    # handed over, the one written next, and the first, which the gateway maps
    assert 0 < held() <= WINDOW + 2
    assert first.num_rows + reader.read_all().num_rows == 10000000


def test_without_memory_files_answers_come_through_files_that_are_removed(monkeypatch):
    monkeypatch.setattr("gateway_duckdb.worker.memory_files", lambda: False)
    engine = open_engine({"version": V155, "isolation": "process", "settings": {"threads": 1}})
    spool = Path(engine._session._spool)
    try:
        answer = engine.execute(LARGE).reader.read_all()
        assert answer.num_rows == 400000
        assert {mapping_of(b)[1].startswith(str(spool)) for b in answer.to_batches()} == {True}
        reader = engine.execute(LARGE).reader
        reader.read_next_batch()
        os.kill(engine._session.pid, signal.SIGKILL)
        with pytest.raises(EngineConnectionError, match="killed"):
            reader.read_all()
        assert list(spool.iterdir()) == []
        assert rows(engine, "SELECT 7 AS seven") == [{"seven": 7}]
    finally:
        engine.close()
    assert not spool.exists()


def test_an_answer_that_cannot_be_mapped_stops_the_worker_and_the_next_query_runs(worker,
                                                                               monkeypatch):
    import errno

    def no_descriptors_left(name: str, released):
        raise OSError(errno.EMFILE, "Too many open files", name)

    pid = worker._session.pid
    monkeypatch.setattr("gateway_duckdb.worker.open_segment", no_descriptors_left)
    with pytest.raises(EngineConnectionError, match="cannot read the worker's answer"):
        rows(worker, "SELECT 1 AS one")
    monkeypatch.undo()
    assert rows(worker, "SELECT 2 AS two") == [{"two": 2}]
    assert worker._session.pid != pid


def test_memory_files_are_reused_once_released_and_never_while_mapped(worker):
    import gc

    import pyarrow.compute as pc

    def files(table) -> set[int]:
        return {mapping_of(b)[2] for b in table.to_batches()}

    query = "SELECT i, i * {k} AS v FROM range(2000000) t(i) ORDER BY i"  # 32 MB
    kept = worker.execute(query.format(k=1)).reader.read_all()
    dropped = worker.execute(query.format(k=2)).reader.read_all()
    kept_files, dropped_files = files(kept), files(dropped)
    del dropped
    gc.collect()
    again = worker.execute(query.format(k=3)).reader.read_all()
    # Segments are cut by size and by time, so under load an answer can take one
    # more segment than the answer before it: that one gets a new file.
    assert files(again) & dropped_files  # written into the released ones ...
    assert not files(again) & kept_files  # ... never into those still mapped
    assert pc.all(pc.equal(kept["v"], kept["i"])).as_py()
    assert pc.all(pc.equal(again["v"], pc.multiply(again["i"], 3))).as_py()
