"""A shadow store folder holding files that are not store files: each is skipped with one line
naming it, compaction moves it into quarantine/, and no process prints a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.shadow.record import ShadowRecord
from gateway.shadow.store import COMPACT_FILES, ShadowStore
from tests.conftest import run_arrowgate


def record(i: int) -> ShadowRecord:
    return ShadowRecord(sql=f"SELECT {i}", primary="a", reference="b", status="compared",
                        category="match", primary_ms=1.0, reference_ms=2.0)


def _corrupt(folder: Path) -> Path:
    path = folder / "corrupt.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    return path


def _foreign(folder: Path) -> Path:
    path = folder / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    return path


def _dangling(folder: Path) -> Path:
    path = folder / "dangling.parquet"
    path.symlink_to(folder / "gone.parquet")
    return path


def _wrong_types(folder: Path) -> Path:
    path = folder / "wrong.parquet"
    pq.write_table(pa.table({"id": [[1]], "time": [[2]], "status": [[3]]}), path)
    return path


@pytest.mark.parametrize("make", [_corrupt, _foreign, _dangling, _wrong_types])
def test_report_skips_a_file_that_is_no_store_file_naming_it(tmp_path, make):
    store = tmp_path / "store"
    ShadowStore(store).append([record(1), record(2)])
    bad = make(store)
    done = run_arrowgate("shadow", "report", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"2 records in {store}")
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"shadow store: skipped {bad}: "), lines


@pytest.mark.parametrize("make", [_corrupt, _foreign, _dangling, _wrong_types])
def test_compaction_quarantines_it(tmp_path, make, caplog):
    store = ShadowStore(tmp_path / "store")
    store.append([record(1)])
    store.append([record(2)])
    bad = make(store.path)
    store.compact()
    assert [f.name for f in (store.path / "quarantine").iterdir()] == [bad.name]
    assert len(store.files()) == 1
    caplog.clear()
    assert store.read().num_rows == 2
    assert caplog.records == []  # read again without a word


def test_past_the_compaction_threshold_no_process_prints_a_traceback_at_exit(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    _foreign(store)
    _corrupt(store)
    writer = textwrap.dedent(f"""
        from gateway.shadow.record import ShadowRecord
        from gateway.shadow.store import ShadowStore
        store = ShadowStore({str(store)!r})
        for i in range({COMPACT_FILES + 2}):
            store.append([ShadowRecord(sql=f"SELECT {{i}}", primary="a", reference="b",
                                       status="compared", category="match")])
        store.add(ShadowRecord(sql="SELECT 'at exit'", primary="a", reference="b",
                               status="compared", category="match"))
    """)
    done = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert sorted(f.name for f in (store / "quarantine").iterdir()) == ["corrupt.parquet",
                                                                       "foreign.parquet"]
    assert ShadowStore(store).read().num_rows == COMPACT_FILES + 3


def test_records_made_just_before_exit_are_written_at_exit(tmp_path):
    """The flush at interpreter exit imported pyarrow.parquet, which registers an atexit
    handler: 'can't register atexit after shutdown', and the records were lost."""
    import subprocess
    import sys

    store = tmp_path / "store"
    code = ("import gateway\n"
            "gw = gateway.connect({'engines': {'a': {'type': 'duckdb'}, 'b': {'type': 'duckdb'}},"
            f" 'shadow': {{'reference': 'b', 'store': {str(store)!r}}}}})\n"
            "gw.execute('SELECT 1 AS x', engine='a').to_arrow()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "not written" not in done.stderr
    assert list(store.glob("*.parquet"))
