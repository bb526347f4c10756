"""The shadow store: batched appends to one Parquet dataset, concurrent writers, crashes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.errors import GatewayError
from gateway.shadow import store as shadow_store
from gateway.shadow.record import ShadowRecord
from gateway.shadow.store import ShadowStore, summarize
from tests.hang_guard import HANG_GUARD

WRITER = textwrap.dedent("""
    import sys
    from gateway.shadow.record import ShadowRecord
    from gateway.shadow.store import ShadowStore

    store, tag, n = ShadowStore(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(n):
        store.add(ShadowRecord(sql=f"SELECT {i} -- {tag}", primary="a", reference="b",
                               status="compared", category="match", primary_ms=1.0,
                               reference_ms=2.0))
    # the rest is written at exit
""")


def record(tag: str, i: int) -> ShadowRecord:
    return ShadowRecord(sql=f"SELECT {i} -- {tag}", primary="a", reference="b",
                        status="compared", category="match", primary_ms=1.0, reference_ms=2.0)


def test_four_threads_and_four_processes_lose_no_record(tmp_path, monkeypatch):
    monkeypatch.setattr(shadow_store, "FLUSH_RECORDS", 7)
    monkeypatch.setattr(shadow_store, "COMPACT_FILES", 5)  # compactions run amid the appends
    path, n = tmp_path / "store", 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{k}", str(n)])
             for k in range(4)]

    def write(tag: str) -> None:
        store = ShadowStore(path)
        for i in range(n):
            store.add(record(tag, i))
            if i % 40 == 0:
                store.append([record(f"{tag}-direct", i)])

    threads = [threading.Thread(target=write, args=(f"t{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(p.wait(120) == 0 for p in procs)
    table = ShadowStore(path).read()
    direct = 4 * len(range(0, n, 40))
    assert table.num_rows == 8 * n + direct
    assert len(set(table.column("id").to_pylist())) == table.num_rows
    assert len(set(table.column("sql").to_pylist())) == table.num_rows
    ShadowStore(path).compact()
    assert len(ShadowStore(path).files()) == 1
    assert ShadowStore(path).read().num_rows == 8 * n + direct


def test_a_killed_writer_leaves_the_store_readable(tmp_path):
    path = tmp_path / "store"
    big = textwrap.dedent("""
        import sys
        from gateway.shadow.record import ShadowRecord
        from gateway.shadow.store import ShadowStore

        store = ShadowStore(sys.argv[1])
        i = 0
        while True:  # 4 MB files: the kill lands mid-write more often than not
            store.append([ShadowRecord(sql="SELECT 1 -- " + "x" * 4_000_000 + str(i),
                                       primary="a", reference="b", status="compared",
                                       category="match")])
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", big, str(path)])
    deadline = time.monotonic() + HANG_GUARD
    while len(ShadowStore(path).files()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ShadowStore(path)
    files = store.files()
    assert len(files) >= 3
    (path / ".20261130T000000-1-deadbeef.tmp").write_bytes(b"PAR1 half a file")  # a torn write
    assert store.read().num_rows == len(files)
    assert summarize(store.read())["records"] == len(files)
    store.compact()
    assert store.read().num_rows == len(files)


def test_old_one_file_per_query_layout_reads_beside_the_new(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    old = pa.table({"id": ["old1"], "time": ["2026-01-01T00:00:00Z"], "name": ["q"],
                    "sql": ["SELECT 1"], "primary": ["a"], "reference": ["b"],
                    "status": ["compared"], "category": ["values"], "message": ["differs"],
                    "evidence": ["{}"], "skip_reason": pa.array([None], pa.string()),
                    "primary_ms": [2.0], "reference_ms": [1.0], "ratio": [2.0],
                    "primary_rows": [1], "reference_rows": [1],
                    "primary_peak_mb": pa.array([None], pa.float64()),
                    "reference_peak_mb": pa.array([None], pa.float64()),
                    "noise_checked": [False], "answered_by": pa.array([None], pa.string())})
    pq.write_table(old, path / "20260101T000000-1-0a0a0a0a.parquet")
    store = ShadowStore(path)
    store.add(record("new", 1))
    table = store.read()
    assert table.num_rows == 2
    assert table.column("query_id").to_pylist() == [None, None]
    summary = summarize(table)
    assert summary["records"] == 2 and summary["by_category"] == {"match": 1, "values": 1}


def test_buffered_records_are_written_after_flush_seconds(tmp_path, monkeypatch):
    monkeypatch.setattr(shadow_store, "FLUSH_SECONDS", 0.2)
    store = ShadowStore(tmp_path / "store")
    store.add(record("timer", 1))
    assert store.files() == []
    deadline = time.monotonic() + HANG_GUARD
    while not store.files() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(store.files()) == 1


def test_an_unwritable_store_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(GatewayError, match="cannot write the shadow store") as info:
        ShadowStore(blocker / "store").append([record("x", 1)])
    assert "writable folder" in info.value.hint


def test_compaction_is_one_process_at_a_time(tmp_path):
    store = ShadowStore(tmp_path / "store")
    for i in range(3):
        store.append([record("c", i)])
    import fcntl

    with open(store.path / ".compact.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        store.compact(wait=False)  # another process is compacting: skipped
        assert len(store.files()) == 3
    store.compact(wait=False)
    assert len(store.files()) == 1 and store.read().num_rows == 3
