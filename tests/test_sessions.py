"""Sessions, prepared statements, per-query cancel and timeouts, engine starts (issue #10)."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gateway
from gateway.errors import Cancelled, EngineConnectionError, QueryError, QueryTimeout, Unsupported
from tests.duckdb_support import V155, use_shared_home
from tests.hang_guard import HANG_GUARD

DATA = Path(__file__).resolve().parent.parent / "examples" / "data"
SOURCES = {"trips": {"path": str(DATA / "trips.csv")}}
#: A query that runs for seconds on DuckDB unless interrupted.
SLOW = "SELECT count(*) FROM range(4000000000) a WHERE a.range % 7 = 3"


@pytest.fixture
def gw() -> Any:
    with gateway.connect({"engines": {"duck": {"type": "duckdb"},
                                      "scan": {"type": "csv"},
                                      "worker": {"type": "duckdb", "isolation": "process"}},
                          "sources": SOURCES}) as gw:
        yield gw


# -- state ------------------------------------------------------------------------------
def test_session_state_persists_within_a_session_and_is_absent_in_another(gw: Any) -> None:
    with gw.session("duck") as one, gw.session("duck") as two:
        one.execute("CREATE TEMP TABLE mine AS SELECT 1 AS x").to_arrow()
        one.execute("SET VARIABLE who = 'one'").to_arrow()
        assert one.execute("SELECT x, getvariable('who') AS who FROM mine").to_arrow() \
            .to_pylist() == [{"x": 1, "who": "one"}]
        with pytest.raises(QueryError, match="mine"):
            two.execute("SELECT * FROM mine").to_arrow()
        assert two.execute("SELECT getvariable('who') AS who").to_arrow().to_pylist() == \
            [{"who": None}]
        assert "temp_tables" in one.keeps and "transactions" in one.keeps


def test_one_shot_queries_keep_no_state(gw: Any) -> None:
    gw.execute("CREATE TEMP TABLE gone AS SELECT 1 AS x", engine="duck").to_arrow()
    with pytest.raises(QueryError, match="gone"):
        gw.execute("SELECT * FROM gone", engine="duck").to_arrow()


def test_begin_rollback_rolls_back_within_a_session(gw: Any) -> None:
    with gw.session("duck") as s:
        s.execute("CREATE TABLE kept (a INTEGER)").to_arrow()
        s.execute("BEGIN").to_arrow()
        s.execute("INSERT INTO kept VALUES (1), (2)").to_arrow()
        assert s.execute("SELECT count(*) AS n FROM kept").to_arrow()["n"][0].as_py() == 2
        s.execute("ROLLBACK").to_arrow()
        assert s.execute("SELECT count(*) AS n FROM kept").to_arrow()["n"][0].as_py() == 0


@pytest.mark.parametrize("sql", ["SET threads = 1", "BEGIN", "USE memory",
                                 "CREATE TEMP TABLE t AS SELECT 1"])
def test_a_statement_the_engine_cannot_keep_is_refused_not_silently_reset(
        gw: Any, sql: str) -> None:
    with gw.session("scan") as s:
        assert s.keeps == frozenset()
        with pytest.raises(Unsupported, match="would not persist") as info:
            s.execute(sql)
        assert "duck" in (info.value.hint or "")


def _session_round(gw: Any, engine: str, worker: int, k: int) -> list[Any]:
    with gw.session(engine) as s:
        tag = f"w{worker}s{k}"
        if engine in ("duck", "worker"):
            s.execute(f"CREATE TEMP TABLE mine AS SELECT '{tag}' AS tag").to_arrow()
            s.execute(f"SET VARIABLE tag = '{tag}'").to_arrow()
            got = s.execute("SELECT tag, getvariable('tag') AS v FROM mine").to_arrow()
            return [got.to_pylist() == [{"tag": tag, "v": tag}]]
        got = s.execute("SELECT count(*) AS n FROM trips WHERE cab_type = 'yellow'").to_arrow()
        return [got.to_pylist() == [{"n": 254}]]


@pytest.mark.parametrize("engine", ["duck", "scan", "worker"])
def test_8_threads_by_4_sessions_each_with_its_own_state(gw: Any, engine: str) -> None:
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(_session_round, gw, engine, w, k)
                   for w in range(8) for k in range(4)]
        outcomes = [f.result() for f in futures]
    assert outcomes == [[True]] * 32


def test_a_worker_session_that_lost_its_process_says_so(gw: Any) -> None:
    with gw.session("worker") as s, gw.session("worker") as other:
        s.execute("CREATE TEMP TABLE kept AS SELECT 1 AS x").to_arrow()
        other.execute("SELECT 1").to_arrow()
        thread, outcome = _in_thread(lambda: s.execute(SLOW).to_arrow())
        _running(gw, SLOW)
        time.sleep(0.3)
        s.cancel()
        thread.join(20)
        assert isinstance(outcome[0], Cancelled)
        with pytest.raises(EngineConnectionError, match="open a new session"):
            s.execute("SELECT * FROM kept")
        # the other session's worker was not touched
        assert other.execute("SELECT 2 AS two").to_arrow().to_pylist() == [{"two": 2}]
    # one-shot queries share the engine's worker, as before: tables last between them
    gw.execute("CREATE TABLE shared AS SELECT 7 AS x", engine="worker").to_arrow()
    assert gw.execute("SELECT x FROM shared", engine="worker").to_arrow().to_pylist() == \
        [{"x": 7}]


def test_a_session_runs_one_statement_at_a_time(gw: Any) -> None:
    with gw.session("duck") as s:
        started = threading.Event()
        failure: list[BaseException] = []

        def slow() -> None:
            started.set()
            try:
                s.execute(SLOW, timeout=20).to_arrow()
            except Cancelled:
                pass  # the session.cancel() below, while execute had not returned yet
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=slow)
        thread.start()
        started.wait()
        time.sleep(0.3)
        with pytest.raises(gateway.GatewayError, match="busy"):
            s.execute("SELECT 1")
        s.cancel()
        thread.join(10)
        assert not failure


# -- cancel and timeout --------------------------------------------------------------
def _running(gw: Any, sql: str) -> Any:
    for _ in range(1500):  # 30 s: a loaded machine can be slow to start a thread
        found = [q for q in gw.running() if q.sql == sql]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"never saw {sql!r} running")


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_cancelling_one_query_leaves_the_other_complete(gw: Any) -> None:
    slow_thread, slow = _in_thread(lambda: gw.execute(SLOW, engine="duck").to_arrow())
    fast_thread, fast = _in_thread(lambda: gw.execute(
        "SELECT count(*) AS n FROM range(30000000) r WHERE r.range % 3 = 0",
        engine="duck").to_arrow())
    assert gw.cancel(_running(gw, SLOW).query_id)
    slow_thread.join(60)
    fast_thread.join(120)
    assert isinstance(slow[0], Cancelled)
    assert fast[0].to_pylist() == [{"n": 10000000}]


def test_result_cancel_stops_that_query_only(gw: Any) -> None:
    endless = gw.execute("SELECT range AS i FROM range(10000000000)", engine="duck")
    reader = endless.reader()
    first = reader.read_next_batch()
    other = gw.execute("SELECT count(*) AS n FROM range(1000000)", engine="duck")
    assert endless.cancel()
    with pytest.raises(Cancelled):
        while True:
            reader.read_next_batch()
    assert first.num_rows > 0
    assert other.to_arrow().to_pylist() == [{"n": 1000000}]
    assert not endless.cancel()  # already stopped


def test_a_timeout_cancels_that_query_only(gw: Any) -> None:
    outcome: list[BaseException] = []

    def slow() -> None:
        try:
            gw.execute(SLOW, engine="duck", timeout=0.5).to_arrow()
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    answers = [gw.execute("SELECT count(*) AS n FROM range(100000)", engine="duck")
               .to_arrow().to_pylist() for _ in range(5)]
    thread.join(20)
    assert isinstance(outcome[0], QueryTimeout)
    assert "0.5 s" in str(outcome[0])
    assert answers == [[{"n": 100000}]] * 5


def test_timeouts_share_one_watching_thread(gw: Any) -> None:
    gw.execute("SELECT 1", engine="duck", timeout=60).to_arrow()
    before = threading.active_count()
    for _ in range(50):
        gw.execute("SELECT 1", engine="duck", timeout=60).to_arrow()
    assert threading.active_count() <= before
    assert [t.name for t in threading.enumerate()].count("query-deadlines") == 1


def test_only_a_new_earliest_deadline_wakes_the_watching_thread() -> None:
    from gateway.result import QueryHandle, _Deadlines

    deadlines = _Deadlines()
    wakes: list[int] = []
    notify = deadlines._wake.notify
    deadlines._wake.notify = lambda n=1: (wakes.append(n), notify(n))  # type: ignore[method-assign]
    handles = [QueryHandle("duck", 0, "SELECT 1", timeout=1) for _ in range(3)]
    now = time.monotonic()
    deadlines.add(now + 60, handles[0])
    deadlines.add(now + 120, handles[1])  # later than the one the thread sleeps until
    assert len(wakes) == 1
    deadlines.add(now + 0.05, handles[2])
    assert len(wakes) == 2
    for _ in range(200):
        if handles[2].timed_out:
            break
        time.sleep(0.01)
    assert handles[2].timed_out and not handles[0].timed_out


def test_one_shot_queries_reuse_an_idle_cursor_but_never_its_state(gw: Any) -> None:
    idle = gw.engine("duck")._session._idle
    gw.execute("SELECT 1", engine="duck").to_arrow()
    assert len(idle) == 1
    cursor = idle[0]
    gw.execute("SELECT 2", engine="duck").to_arrow()
    assert idle == [cursor]
    for sql in ("SET VARIABLE v = 7", "CREATE TEMP TABLE tt AS SELECT 1 AS x",
                "SELECT 1; SET VARIABLE v = 8"):
        gw.execute(sql, engine="duck").to_arrow()
    assert gw.execute("SELECT getvariable('v') AS v", engine="duck").to_arrow() \
        .to_pylist() == [{"v": None}]
    with pytest.raises(QueryError, match="tt"):
        gw.execute("SELECT * FROM tt", engine="duck").to_arrow()
    assert cursor not in idle  # the statements that changed it closed it
    path = gw.engine("duck")._session
    path.reset_idle()  # what a ducklake engine's reattach asks for
    assert path._idle == []
    assert gw.execute("SELECT 3 AS x", engine="duck").to_arrow().to_pylist() == [{"x": 3}]


def test_the_engine_timeout_option_is_the_default(tmp_path: Path) -> None:
    with gateway.connect({"engines": {"duck": {"type": "duckdb", "timeout": 0.3}}}) as gw, \
            pytest.raises(QueryTimeout):
        gw.execute(SLOW).to_arrow()


def test_running_lists_queries_with_their_session_and_rows(gw: Any) -> None:
    with gw.session("duck") as s:
        result = s.execute("SELECT * FROM range(3000000)")
        reader = result.reader()
        reader.read_next_batch()
        running = {q.query_id: q for q in gw.running()}
        assert result.query_id in running
        query = running[result.query_id]
        assert (query.engine, query.session_id) == ("duck", s.id)
        assert query.rows > 0 and query.sql.startswith("SELECT * FROM range")
        result.close()
    assert result.query_id not in {q.query_id for q in gw.running()}
    assert gw.cancel(result.query_id) is False


# -- engine starts ------------------------------------------------------------------------
def test_a_hung_engine_start_times_out_and_holds_up_no_other_engine(tmp_path: Path) -> None:
    fifo = tmp_path / "never.duckdb"
    os.mkfifo(fifo)  # opening it blocks until a writer comes, which never does
    config = {"engines": {"hung": {"type": "duckdb", "database": str(fifo),
                                   "connect_timeout": 1.5},
                          "duck": {"type": "duckdb"}}}
    with gateway.connect(config) as gw:
        gw.execute("SELECT 1", engine="duck").to_arrow()
        failure: list[BaseException] = []

        def start_hung() -> None:
            try:
                gw.execute("SELECT 1", engine="hung")
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=start_hung)
        began = time.monotonic()
        thread.start()
        time.sleep(0.2)
        assert gw.execute("SELECT 2 AS two", engine="duck").to_arrow().to_pylist() == \
            [{"two": 2}]
        assert thread.is_alive()  # not queued behind the hung start, which is still trying
        thread.join(HANG_GUARD)
        assert isinstance(failure[0], EngineConnectionError)
        assert "connect_timeout of 1.5 s" in str(failure[0])
        assert 1.4 < time.monotonic() - began < HANG_GUARD  # its connect_timeout was waited
        with pytest.raises(EngineConnectionError, match="still trying"):
            gw.execute("SELECT 1", engine="hung")
        # release the hung open so the test leaves no thread behind
        with open(fifo, "wb"):
            pass


# -- prepared statements ----------------------------------------------------------------
def test_a_prepared_statement_has_its_schema_before_it_runs(gw: Any) -> None:
    with gw.session("duck") as s:
        s.execute("CREATE TABLE never_read AS SELECT 1 AS a").to_arrow()
        p = s.prepare("SELECT a, CAST(? AS DOUBLE) AS b FROM never_read WHERE a = ?")
        assert p.schema.names == ["a", "b"]
        assert p.schema.field("b").type == pa.float64()
        assert p.parameter_schema.names == ["$1", "$2"]
        assert p.execute([2.5, 1]).to_arrow().to_pylist() == [{"a": 1, "b": 2.5}]


def test_a_prepared_statement_runs_a_10000_row_parameter_batch(gw: Any) -> None:
    with gw.session("duck") as s:
        s.execute("CREATE TABLE target (a BIGINT, b VARCHAR)").to_arrow()
        insert = s.prepare("INSERT INTO target VALUES (?, ?)")
        batch = pa.record_batch({"a": list(range(10_000)),
                                 "b": [f"v{i}" for i in range(10_000)]})
        assert insert.execute(batch).update_count == 10_000
        query = s.prepare("SELECT b FROM target WHERE a = ?")
        answer = query.execute(pa.table({"a": [5, 9999, 123456]})).to_arrow()
        assert answer.column("b").to_pylist() == ["v5", "v9999"]
        total = s.execute("SELECT count(*) AS n, sum(a) AS s FROM target").to_arrow()
        assert total.to_pylist() == [{"n": 10_000, "s": sum(range(10_000))}]


def test_prepared_statement_misuse_is_a_clear_error(gw: Any) -> None:
    with gw.session("duck") as s:
        p = s.prepare("SELECT ?::INTEGER + ? AS x")
        with pytest.raises(QueryError, match="takes 2 parameters; 3 values were given"):
            p.execute([1, 2, 3])
        with pytest.raises(QueryError, match="takes 2 parameters; 1 columns were given"):
            p.execute(pa.table({"a": [1]}))
        with pytest.raises(QueryError, match=r"(?i)conver|cast"):
            p.execute(["not a number", 1]).to_arrow()
        p.close()
        with pytest.raises(gateway.GatewayError, match="closed"):
            p.execute([1, 2])


def test_the_csv_engine_prepares_a_query_without_parameters(gw: Any) -> None:
    with gw.session("scan") as s:
        p = s.prepare("SELECT cab_type, count(*) AS n FROM trips GROUP BY 1 ORDER BY 2 DESC")
        assert p.schema.names == ["cab_type", "n"]
        first = p.execute().to_arrow()
        assert p.execute().to_arrow().equals(first)
        assert first.num_rows == 3


# -- concurrency on pooled engines ------------------------------------------------------
@pytest.mark.parametrize("concurrency", [8])
def test_concurrent_queries_on_a_pooled_adbc_engine_all_succeed(
        tmp_path_factory: pytest.TempPathFactory, concurrency: int) -> None:
    use_shared_home(tmp_path_factory)
    config = {"engines": {"adbc": {"type": "duckdb", "version": V155}}, "sources": SOURCES}
    with gateway.connect(config) as gw:
        gw.engine("adbc")

        def one(i: int) -> Any:
            with gw.session("adbc") as s:
                s.execute(f"CREATE TEMP TABLE t{i} AS SELECT {i} AS i").to_arrow()
                n = s.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py()
                return n, s.execute(f"SELECT i FROM t{i}").to_arrow()["i"][0].as_py()

        with ThreadPoolExecutor(concurrency) as pool:
            answers = list(pool.map(one, range(concurrency)))
    assert answers == [(400, i) for i in range(concurrency)]


# -- the catalog tree at scale ------------------------------------------------------------
def test_the_catalog_tree_on_10000_tables() -> None:
    with gateway.connect() as gw:
        gw.execute(";".join(f"CREATE TABLE t{i} (a INTEGER, b VARCHAR)"
                            for i in range(10_000))).to_arrow()
        assert len(gw.tables()) == 10_000
        assert len(gw.tables(pattern="t99__")) == 100
        assert [t.table for t in gw.tables(pattern="t9999")] == ["t9999"]
        assert gw.tables(types=["VIEW"]) == []
        assert [(c.column, str(c.type)) for c in gw.columns(table="t5000")] == \
            [("a", "int32"), ("b", "string")]


@pytest.mark.parametrize("key", ["timeout", "connect_timeout"])
def test_the_common_timeouts_must_be_positive(key: str) -> None:
    with pytest.raises(gateway.ConfigError, match=f"{key}: -1 is out of range"):
        gateway.connect({"engines": {"d": {"type": "csv", key: -1}}})


def test_a_shadowed_query_keeps_its_timeout_and_does_not_wait_for_the_reference(
        gw: Any) -> None:
    began = time.monotonic()
    with pytest.raises(QueryTimeout) as info:
        gw.execute(SLOW, engine="duck", shadow="worker", timeout=0.5).to_arrow()
    # not a speed bound: the reference's 30 s shadow timeout (60x the 0.5 s expected) was
    # not waited
    assert time.monotonic() - began < 30
    record = info.value.shadow  # type: ignore[attr-defined]
    assert record.status == "skipped" and "timeout" in record.skip_reason


def test_a_closed_adbc_session_leaves_nothing_to_the_next(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    use_shared_home(tmp_path_factory)
    with gateway.connect({"engines": {"adbc": {"type": "duckdb", "version": V155}}}) as gw:
        with gw.session("adbc") as first:
            first.execute("CREATE TEMP TABLE left_behind AS SELECT 1 AS x").to_arrow()
            first.execute("SET VARIABLE who = 'first'").to_arrow()
        for _ in range(3):  # whichever pooled connection the next session takes
            with gw.session("adbc") as later:
                assert later.execute("SELECT getvariable('who') AS w").to_arrow() \
                    .to_pylist() == [{"w": None}]
                with pytest.raises(QueryError, match="left_behind"):
                    later.execute("SELECT * FROM left_behind").to_arrow()


def test_one_shot_statements_on_a_pooled_adbc_engine_leave_no_state(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A one-shot statement's pooled connection went back to the pool whatever ran on it:
    the next user's query saw the temp table and the time zone a one-shot statement left."""
    use_shared_home(tmp_path_factory)
    with gateway.connect({"engines": {"adbc": {"type": "duckdb", "version": V155}}}) as gw:
        for sql in ("SET VARIABLE v = 7", "CREATE TEMP TABLE tt AS SELECT 1 AS x",
                    "SET TimeZone = 'Asia/Tokyo'"):
            gw.execute(sql, engine="adbc").to_arrow()
        assert gw.execute("SELECT getvariable('v') AS v, current_setting('TimeZone') AS tz",
                          engine="adbc").to_arrow().to_pylist() == [{"v": None, "tz": "Etc/UTC"}]
        with pytest.raises(QueryError, match="tt"):
            gw.execute("SELECT * FROM tt", engine="adbc").to_arrow()
        pool = gw.engine("adbc")._session._pool
        idle = list(pool._idle)
        gw.execute("SELECT 1", engine="adbc").to_arrow()
        assert pool._idle == idle  # a query's connection is lent again


def test_a_started_engine_answers_for_its_own_dialect(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    import sqlite3

    sqlite3.connect(db).close()
    config = {"engines": {"lite": {"type": "adbc", "driver": "sqlite", "uri": str(db)},
                          "duck": {"type": "duckdb"}}}
    with gateway.connect(config) as gw:
        gw.engine("lite")
        assert gw.dialect("lite") == "sqlite"
        assert gw.dialect("duck") == "duckdb"


@pytest.mark.parametrize("engine", ["duck", "adbc", "worker"])
def test_a_session_statement_after_an_unread_answer_runs_and_the_old_answer_says_so(
        engine: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """DuckDB refused the next statement ("connection has an open result") while an
    answer was unread; and a closed answer must never read as a shorter, complete one."""
    use_shared_home(tmp_path_factory)
    config = {"engines": {"duck": {"type": "duckdb"},
                          "adbc": {"type": "duckdb", "version": V155},
                          "worker": {"type": "duckdb", "isolation": "process"}}}
    with gateway.connect(config) as gw, gw.session(engine) as s:
        unread = s.execute("SELECT * FROM range(1000000)")
        partly = s.execute("SELECT * FROM range(1000000)")
        reader = partly.reader()
        reader.read_next_batch()
        assert s.execute("SELECT 1 AS x").to_arrow().to_pylist() == [{"x": 1}]
        with pytest.raises(gateway.GatewayError, match="closed before it was read"):
            unread.to_arrow()
        with pytest.raises(gateway.GatewayError, match="closed before it was read"):
            for _ in reader:
                pass
