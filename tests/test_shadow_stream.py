"""A shadowed answer streams to the caller; the verdict follows within a memory cap."""

from __future__ import annotations

import os
import threading
import time
import warnings

import pyarrow as pa
import pytest

import gateway
from gateway.shadow.answer import Answer, Budget, streamed_verdict
from gateway.verify.verdict import CompareOptions
from tests import planted_bugs
from tests.conformance.corpus import SOURCES
from tests.hang_guard import HANG_GUARD

ROWS = 10_000_000
BIG = f"SELECT range AS i, range * 2 AS j FROM range({ROWS})"


class Clock:
    """When each engine's answer was read to its end (the hook's view)."""

    def __init__(self):
        self.finished = {}

    @gateway.hookimpl
    def arrowgate_query_finished(self, event, rows, elapsed):
        self.finished[event.engine] = time.perf_counter()


def connect(tmp_path, shadow=None, reference=None, plugins=(), **primary):
    config = {"engines": {"primary": {"type": "planted", **primary} if primary else
                          {"type": "duckdb"},
                          "reference": reference or {"type": "duckdb"}},
              "default_engine": "primary", "sources": SOURCES,
              "shadow": {"reference": "reference", "primary": "primary",
                         "store": str(tmp_path / "store"), **(shadow or {})}}
    return gateway.connect(config, plugins=[planted_bugs, *plugins])


def reference_stopped():
    """Wait until the shadow's reference thread has stopped (it was cancelled)."""
    deadline = time.monotonic() + HANG_GUARD
    while any(t.name == "shadow-reference" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_shadowed_10m_row_answer_streams_within_the_memory_cap(tmp_path):
    cap = 16 * 2**20
    clock = Clock()
    # the reference answers the same rows only once the primary's first rows are read (a
    # gate, not a stall of so many seconds, which a loaded machine could outlast)
    planted_bugs.GATES[gate := f"stream-{os.getpid()}"] = threading.Event()
    held = {"type": "planted", "gate": gate}
    with connect(tmp_path, {"max_compare_bytes": cap}, held, plugins=[clock]) as gw:
        gw.engine("primary")
        gw.engine("reference")
        try:
            result = gw.execute(BIG)
            reader = result.reader()
            first = reader.read_next_batch()
            first_at = time.perf_counter()
        finally:
            planted_bugs.GATES.pop(gate).set()
        record = result.shadow
        assert not record.done() and record.status == "pending"
        rows, biggest = first.num_rows, first.nbytes
        for batch in reader:
            rows += batch.num_rows
            biggest = max(biggest, batch.nbytes)
        assert record.done()  # the last read waited for the verdict
    assert rows == ROWS
    assert first_at < clock.finished["reference"]
    assert record.category == "match", record.message
    assert record.downgraded and "streamed" in record.message
    assert record.evidence["compared"] == "streamed" and record.evidence["spilled_bytes"] > 0
    assert record.evidence["held_peak_bytes"] <= cap + biggest
    assert record.primary_rows == record.reference_rows == ROWS
    assert record.reference_answer() is None  # 160 MB is over keep_reference_bytes


def test_the_done_callback_and_the_hook_fire_once(tmp_path):
    calls, hooked = [], []

    class Hook:
        @gateway.hookimpl
        def arrowgate_shadow_finished(self, record):
            hooked.append(record.id)

    def boom(record):
        raise ValueError("a broken callback")

    with connect(tmp_path, {"background": True}, plugins=[Hook()]) as gw:
        result = gw.execute("SELECT * FROM range(300000)")
        record = result.shadow
        record.add_done_callback(calls.append)
        record.add_done_callback(boom)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result.to_arrow()
            assert record.wait(HANG_GUARD)
            deadline = time.monotonic() + HANG_GUARD
            while not hooked and time.monotonic() < deadline:
                time.sleep(0.01)
        record.add_done_callback(calls.append)  # already done: called at once
    assert calls == [record, record]
    assert hooked == [record.id]
    assert any("a broken callback" in str(w.message) for w in caught)


def test_the_kept_reference_answer_equals_the_reference_engines(tmp_path):
    sql = "SELECT trip_id, total_amount, pickup_zone FROM trips ORDER BY trip_id"
    with connect(tmp_path) as gw:
        result = gw.execute(sql)
        result.to_arrow()
        kept = result.shadow.reference_answer()
        own = gw.execute(sql, engine="reference", shadow=False).to_arrow()
    assert kept is not None and kept.num_rows == 400
    assert kept.equals(own)
    assert result.query_id is not None and result.shadow.query_id == result.query_id


def test_an_answer_over_keep_reference_bytes_is_not_kept(tmp_path):
    with connect(tmp_path, {"keep_reference_bytes": 1000}) as gw:
        result = gw.execute("SELECT * FROM range(10000)")
        result.to_arrow()
    assert result.shadow.category == "match" and result.shadow.reference_answer() is None


@pytest.mark.parametrize("bug, category", [("limit_off_by_one", "extra_rows"),
                                           ("float_perturbed", "values")])
def test_the_downgraded_comparison_still_catches_divergences(tmp_path, bug, category):
    sql = {"limit_off_by_one": "SELECT range AS i FROM range(200000) ORDER BY i LIMIT 100000",
           "float_perturbed": "SELECT range / 7 AS x FROM range(200000)"}[bug]
    with connect(tmp_path, {"max_compare_bytes": 65536}, bug=bug) as gw:
        result = gw.execute(sql)
        result.to_arrow()
    record = result.shadow
    assert record.downgraded and record.category == category, record.message
    assert record.evidence["compared"] == "streamed" and "max_compare_bytes" in record.message
    if category == "values":  # pinpointed, with both sides' values
        assert record.evidence["changed_count"] > 0 and record.evidence["differences"]


def test_noise_over_the_cap_is_nondeterministic(tmp_path):
    with connect(tmp_path, {"max_compare_bytes": 65536, "noise": True}) as gw:
        result = gw.execute("SELECT random() AS r FROM range(100000)")
        result.to_arrow()
    assert result.shadow.category == "nondeterministic" and result.shadow.downgraded


def test_streamed_answers_follow_the_comparators_equivalences():
    budget = Budget(1, "SELECT n, s FROM t", CompareOptions())  # every side streamed at once
    ints, floats = Answer(budget), Answer(budget)
    ints.add(pa.record_batch({"n": pa.array([3, 1, 2, 0], pa.int32()), "s": ["c", "a", "b", "z"]}))
    floats.add(pa.record_batch({"n": pa.array([1.0, 2.0, -0.0], pa.float64()),
                                "s": pa.array(["a", "b", "z"], pa.large_string())}))
    floats.add(pa.record_batch({"n": pa.array([3.0], pa.float64()),
                                "s": pa.array(["c"], pa.large_string())}))
    ints.finish(pa.schema([("n", pa.int32()), ("s", pa.string())]))
    floats.finish(pa.schema([("n", pa.float64()), ("s", pa.large_string())]))
    try:
        verdict = streamed_verdict(ints, floats, budget=budget)
    finally:
        budget.close()
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["compared"] == "streamed"
    assert not verdict.evidence["proven_in_place"]  # an integer against a float: paired


def test_a_shared_side_is_not_held_nor_streamed_until_the_other_side_comes():
    """The console's grid keeps the primary's answer: the comparison shares its batches."""
    budget = Budget(1000, "SELECT i FROM t", CompareOptions())
    primary, reference = Answer(budget, shared=True), Answer(budget)
    schema = pa.schema([("i", pa.int64())])
    batches = [pa.record_batch([pa.array(range(k, k + 1000), pa.int64())], schema=schema)
               for k in range(0, 5000, 1000)]  # 8000 bytes each, the budget 1000
    for batch in batches:
        primary.add(batch)
    primary.finish(schema)
    # five batches past the budget: the caller's read never streamed nor waited for a spill
    assert not primary.downgraded and budget.held == 0
    try:
        for batch in batches:
            reference.add(batch)  # the first batch streams both sides
        reference.finish(schema)
        assert primary.downgraded and reference.downgraded
        verdict = streamed_verdict(primary, reference, budget=budget)
    finally:
        budget.close()
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["primary_rows"] == verdict.evidence["reference_rows"] == 5000
    assert budget.peak <= batches[0].nbytes  # the reference's batches only, one at a time


_GRID: list[pa.RecordBatch] = []


def _shared_and_streamed(sql, limit, batches, keep_bytes=0):
    """A finished shared primary of ``batches`` (held in ``_GRID``, as the console's grid
    holds them), and a reference to feed the same batches, each made only when it is added
    (so the test holds none of them)."""
    budget = Budget(limit, sql, CompareOptions())
    primary, reference = Answer(budget, shared=True), Answer(budget, keep_bytes)
    _GRID[:] = batches()
    for batch in _GRID:
        primary.add(batch)
    schema = pa.schema([("i", pa.int64())])
    primary.finish(schema)
    return budget, primary, reference, schema


def _int_batches(n=5, rows=1000):
    schema = pa.schema([("i", pa.int64())])
    return lambda: (pa.record_batch([pa.array(range(k, k + rows), pa.int64())], schema=schema)
                    for k in range(0, n * rows, rows))


def _streamed_through(budget, primary, reference, schema, batches):
    """The verdict once ``batches`` streamed into ``reference``; the budget closed."""
    try:
        for batch in batches():
            reference.add(batch)
        reference.finish(schema)
        return streamed_verdict(primary, reference, budget=budget)
    finally:
        budget.close()


@pytest.mark.parametrize("sql, spilled", [("SELECT i FROM t", 0),
                                          ("SELECT i FROM t ORDER BY i", 5 * 8000)])
def test_a_finished_shared_side_is_read_in_place_and_the_other_proven_as_it_comes(sql, spilled):
    """The console's grid holds the primary's whole answer: it is not spilled, and the
    reference's rows are proven against it as they come. Only the rows that differ are
    kept, and every row of the reference where the order may have to be checked."""
    batches = _int_batches()
    budget, primary, reference, schema = _shared_and_streamed(sql, 1000, batches)
    verdict = _streamed_through(budget, primary, reference, schema, batches)
    assert verdict.category == "match", verdict.message
    assert verdict.evidence["proven_in_place"] and verdict.evidence["paired_rows"] == 0
    assert verdict.evidence["spilled_bytes"] == spilled  # the primary's 40,000 bytes: never


def test_a_side_proven_in_step_is_never_more_than_one_batch_ahead(monkeypatch):
    """However much of the budget is free, the reference's batches are not queued while it
    is proven against a side read in place: beside the engine's own working memory (a
    sort's rows), the comparison holds the batch being compared and the next one."""
    from gateway.verify.spilled_answer import SpilledAnswer

    add = SpilledAnswer.add

    def slow_add(self, batch):  # a comparison slower than the engine
        time.sleep(0.02)
        add(self, batch)

    monkeypatch.setattr(SpilledAnswer, "add", slow_add)
    batches = _int_batches(n=8)
    # room for four of the reference's batches once the primary's pass it
    budget, primary, reference, schema = _shared_and_streamed("SELECT i FROM t", 32000,
                                                              batches)
    verdict = _streamed_through(budget, primary, reference, schema, batches)
    assert verdict.category == "match", verdict.message
    assert budget.peak <= 2 * 8000


def test_a_streamed_answer_kept_for_display_is_not_held_while_it_streams():
    """The reference's answer within keep_bytes is kept for ctrl+r; once the answers are
    streamed, the copy waits in the comparison's folder, not in memory beside the engine's
    working memory, and is read back whole when asked for."""
    batches = _int_batches(n=5, rows=10_000)  # 80,000 bytes each
    budget, primary, reference, schema = _shared_and_streamed(
        "SELECT i FROM t ORDER BY i", 1000, batches, keep_bytes=1 << 20)
    try:
        before = pa.total_allocated_bytes()
        for batch in batches():
            reference.add(batch)
        del batch
        reference.finish(schema)
        reference.spilled()  # every batch compared and written
        held = pa.total_allocated_bytes() - before
        verdict = streamed_verdict(primary, reference, budget=budget)
        kept = reference.kept()
    finally:
        budget.close()
    assert verdict.category == "match", verdict.message
    assert held < 80_000  # not one of the reference's batches is held (nor copied)
    assert kept is not None and kept.equals(pa.Table.from_batches(list(batches())))


def test_a_streamed_answer_over_keep_bytes_leaves_no_copy():
    batches = _int_batches(n=5, rows=10_000)
    budget, _, reference, schema = _shared_and_streamed(
        "SELECT i FROM t", 1000, batches, keep_bytes=200_000)
    try:
        for batch in batches():
            reference.add(batch)
        reference.finish(schema)
        reference.spilled()
        assert budget.streaming is not None
        left = os.listdir(budget.streaming.folder)
        assert reference.kept() is None
    finally:
        budget.close()
    assert not [name for name in left if name.startswith("kept")]


def test_closing_the_answer_early_skips_the_record_and_stops_the_reference(tmp_path):
    hooked = []

    class Hook:
        @gateway.hookimpl
        def arrowgate_shadow_finished(self, record):
            hooked.append(record.status)

    with connect(tmp_path, plugins=[Hook()]) as gw:
        result = gw.execute(BIG)
        reader = result.reader()
        reader.read_next_batch()
        result.close()
        record = result.shadow
        assert record.done() and record.status == "skipped"
        assert "closed the answer after" in record.skip_reason
        result.close()
        reference_stopped()
    assert hooked == ["skipped"]


def test_wait_reads_an_answer_nobody_reads(tmp_path):
    with connect(tmp_path, {"background": True}) as gw:
        result = gw.execute("SELECT 42 AS answer")
        assert result.shadow.wait(HANG_GUARD)
        assert result.shadow.category == "match"
        assert result.to_arrow().to_pylist() == [{"answer": 42}]


def test_a_reference_timeout_over_the_cap_is_an_error_verdict(tmp_path):
    slow = {"type": "planted", "delay": 5.0}
    with connect(tmp_path, {"max_compare_bytes": 65536, "timeout": 0.5}, slow) as gw:
        gw.engine("reference")
        result = gw.execute("SELECT range AS i FROM range(200000)")
        assert result.to_arrow().num_rows == 200000
    record = result.shadow
    assert record.downgraded and record.category == "error"
    assert "QueryTimeout" in record.message


def test_the_reference_timeout_cancels_only_the_references_query(tmp_path):
    # the same view name answers at once on the primary and takes seconds on the reference
    reference = {"type": "duckdb", "settings": {"threads": 1}}
    answers = []
    with connect(tmp_path, {"timeout": 0.3}, reference) as gw:
        gw.execute("CREATE VIEW slow AS SELECT 1::HUGEINT AS h", shadow=False).to_arrow()
        gw.execute("CREATE VIEW slow AS SELECT sum(hash(range)) AS h FROM range(200000000)",
                   engine="reference", shadow=False).to_arrow()
        other = threading.Thread(target=lambda: answers.append(
            gw.execute("SELECT h FROM slow", engine="reference", shadow=False).to_arrow()))
        other.start()
        deadline = time.monotonic() + HANG_GUARD
        while not any(q.engine == "reference" for q in gw.running()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        result = gw.execute("SELECT h FROM slow")
        assert result.to_arrow().num_rows == 1
        assert "QueryTimeout" in result.shadow.message
        assert any(q.engine == "reference" for q in gw.running())  # still running
        other.join()
    assert answers and answers[0].num_rows == 1  # the other query on that engine completed


def test_a_shadowed_answer_in_a_session_streams_and_cancelling_it_skips_the_record(tmp_path):
    with connect(tmp_path) as gw, gw.session("primary") as session:
        result = session.execute("SELECT 7 AS x", shadow="reference")
        assert result.to_arrow().to_pylist() == [{"x": 7}]
        assert result.shadow.category == "match"
        assert result.shadow.query_id == result.query_id
        stopped = session.execute(BIG, shadow="reference")
        reader = stopped.reader()
        reader.read_next_batch()
        assert stopped.cancel()
        with pytest.raises(gateway.errors.Cancelled):
            reader.read_all()
        assert stopped.shadow.done() and stopped.shadow.status == "skipped"
        assert "cancelled the query" in stopped.shadow.skip_reason
        reference_stopped()


def test_cancelling_a_shadowed_answer_read_whole_stops_the_reference_and_skips_the_record(
        tmp_path):
    # the same view name answers at once on the primary and runs for minutes on the reference
    reference = {"type": "duckdb", "settings": {"threads": 1}}
    with connect(tmp_path, {"timeout": 120, "background": True}, reference) as gw:
        gw.execute("CREATE VIEW slow AS SELECT 1::HUGEINT AS h", shadow=False).to_arrow()
        gw.execute("CREATE VIEW slow AS SELECT sum(hash(range)) AS h FROM range(100000000000)",
                   engine="reference", shadow=False).to_arrow()
        result = gw.execute("SELECT h FROM slow")
        assert result.to_arrow().num_rows == 1
        record = result.shadow
        assert not record.done()  # the primary's answer is whole; the reference runs on
        started = time.monotonic()
        assert result.cancel()
        assert record.wait(HANG_GUARD)
        assert time.monotonic() - started < HANG_GUARD  # not the 120 s shadow timeout
        assert record.status == "skipped"
        assert "cancelled the query before the reference answered" in record.skip_reason
        reference_stopped()
        assert not any(q.engine == "reference" for q in gw.running())
        assert not result.cancel()  # nothing left to stop
