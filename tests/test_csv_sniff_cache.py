"""The csv engine's layouts kept between processes (gateway_csv.sniff_cache), and the
layouts one engine keeps in memory: a kept layout is the layout a sniff of the same
bytes finds, and no file's name, size or times make a changed file look unchanged."""

from __future__ import annotations

import marshal
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import gateway
from gateway_csv import engine as csv_engine
from gateway_csv import sniff_cache
from gateway_csv.layout import DIALECT_BYTES, INT, STR, Layout, sniff
from gateway_csv.opening import open_csv
from tests.conftest import run_arrowgate
from tests.csv_support import write

FIXTURES = Path(__file__).parent / "fixtures" / "duckdb_csv"


@pytest.fixture
def kept(monkeypatch, tmp_path) -> Path:
    """The cache on, in a folder of the test's own."""
    where = tmp_path / "sniff"
    monkeypatch.setenv("ARROWGATE_SNIFF_CACHE", str(where))
    monkeypatch.setattr(sniff_cache, "MIN_BYTES", 0)  # the tests' files are small
    return where


def _head(path: Path) -> tuple[bytes, bool]:
    file = open_csv(str(path), {})
    try:
        head = file.pread(0, DIALECT_BYTES)
        return head, len(head) >= file.size
    finally:
        file.close()


def _sniffed(path: Path, options: dict | None = None, options_key: str = "[]") -> Layout:
    file = open_csv(str(path), {})
    try:
        return sniff_cache.sniffed(file, min(DIALECT_BYTES, file.size), options or {},
                                   path=str(path), options_key=options_key)
    finally:
        file.close()


def _entries(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if not p.name.startswith("."))


def test_a_second_sniff_of_the_same_bytes_reads_the_kept_layout(kept, monkeypatch, tmp_path):
    path = write(tmp_path, "a.csv", "a,b,when\n1,x,2024-01-02 03:04:05\n2,,2024-01-03 00:00:00\n")
    first = _sniffed(path)
    assert len(_entries(kept)) == 1
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert stat.S_IMODE((kept / _entries(kept)[0]).stat().st_mode) == 0o600

    def no_sniff(*args, **kwargs):
        raise AssertionError("sniffed again")

    monkeypatch.setattr(sniff_cache, "sniff", no_sniff)
    assert _sniffed(path) == first


def test_every_corpus_file_reads_back_the_layout_its_sniff_found(kept):
    """DuckDB's CSV files (tests/fixtures/duckdb_csv): the layout read back from the cache
    equals a fresh sniff's, field by field; a file the sniffer refuses keeps nothing."""
    compared = refused = 0
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix != ".md"):
        try:
            head, complete = _head(path)
        except Exception:
            continue  # not a file the engine opens (an undecodable compression, ...)
        try:
            fresh = sniff(head, {}, path=str(path), complete=complete)
        except Exception as exc:
            before = _entries(kept) if kept.exists() else []
            with pytest.raises(type(exc)):
                _sniffed(path)
            assert (_entries(kept) if kept.exists() else []) == before, path
            refused += 1
            continue
        assert _sniffed(path) == fresh, path  # the miss, which writes
        assert _sniffed(path) == fresh, path  # the hit, which reads
        compared += 1
    assert compared > 30 and refused > 0, (compared, refused)


def test_a_changed_option_or_byte_is_another_key(kept, tmp_path):
    path = write(tmp_path, "a.csv", "a\n1\n2\n")
    as_int = _sniffed(path)
    other = _sniffed(path, {"header": False}, "[('header', False)]")
    assert as_int.header and not other.header
    path.write_text("a\n1\nx\n")
    assert _sniffed(path).kinds != as_int.kinds
    assert len(_entries(kept)) == 3


def _answer(config: dict, sql: str) -> list[dict]:
    with gateway.connect(config) as gw:
        return gw.execute(sql, engine="csv").to_arrow().to_pylist()


def test_a_file_rewritten_with_the_same_size_and_times_is_sniffed_again(kept, tmp_path):
    """A new process (a new gateway) with the first file's layout on disk: the rewritten
    file, of the same size with its old times put back, reads as it now is."""
    path = write(tmp_path, "t.csv", "a,b\n1,2\n3,4\n")
    config = {"engines": {"csv": {"type": "csv"}}, "sources": {"t": {"path": str(path)}}}
    assert _answer(config, "SELECT a + b AS s FROM t") == [{"s": 3}, {"s": 7}]
    before = path.stat()
    path.write_text("a,b\nx,2\ny,4\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert _answer(config, "SELECT a, b FROM t") == [{"a": "x", "b": 2}, {"a": "y", "b": 4}]


def test_one_engine_does_not_keep_the_layout_of_a_file_just_written(tmp_path):
    """In memory the layouts are keyed by the file's times, which move by the clock's
    tick: a file rewritten (same size, its modification time put back) right after a
    query is sniffed again, not read with the layout the query found."""
    path = write(tmp_path, "t.csv", "a,b\n1,2\n3,4\n")
    config = {"engines": {"csv": {"type": "csv"}}, "sources": {"t": {"path": str(path)}}}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT a + b AS s FROM t", engine="csv").to_arrow().to_pylist() \
            == [{"s": 3}, {"s": 7}]
        before = path.stat()
        path.write_text("a,b\nx,2\ny,4\n")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert gw.execute("SELECT a, b FROM t", engine="csv").to_arrow().to_pylist() \
            == [{"a": "x", "b": 2}, {"a": "y", "b": 4}]


def test_one_engine_keeps_the_layout_of_a_settled_file(monkeypatch, tmp_path):
    monkeypatch.setattr(csv_engine, "_SETTLED_NS", 0)
    path = write(tmp_path, "t.csv", "a,b\n1,2\n3,4\n")
    config = {"engines": {"csv": {"type": "csv"}}, "sources": {"t": {"path": str(path)}}}
    calls = []
    real = sniff_cache.sniff
    monkeypatch.setattr(sniff_cache, "sniff", lambda *a, **k: calls.append(1) or real(*a, **k))
    with gateway.connect(config) as gw:
        for _ in range(3):
            assert gw.execute("SELECT count(*) AS n FROM t", engine="csv").to_arrow() \
                .to_pylist() == [{"n": 2}]
    assert len(calls) == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong fields", "bad kind"])
def test_a_damaged_entry_is_a_miss(kept, tmp_path, damage):
    path = write(tmp_path, "a.csv", "a,b\n1,x\n")
    first = _sniffed(path)
    entry = kept / _entries(kept)[0]
    fields = marshal.loads(entry.read_bytes())
    data = {"garbage": b"\x00not marshal",
            "truncated": entry.read_bytes()[:-7],
            "wrong fields": marshal.dumps({**fields, "names": "a"}),
            "bad kind": marshal.dumps({**fields, "kinds": [0, 99]})}[damage]
    entry.write_bytes(data)
    assert _sniffed(path) == first


def test_an_entry_others_may_write_is_not_read(kept, monkeypatch, tmp_path):
    path = write(tmp_path, "a.csv", "a,b\n1,x\n")
    first = _sniffed(path)
    entry = kept / _entries(kept)[0]
    planted = sniff(b"a\n1\n", {}, path="x", complete=True)
    entry.write_bytes(marshal.dumps(sniff_cache._fields(planted), 4))
    entry.chmod(0o666)
    assert _sniffed(path) == first
    kept.chmod(0o777)  # a folder others may write to is not used at all
    assert sniff_cache.folder() is None
    assert _sniffed(path) == first


def test_an_unusable_folder_only_keeps_nothing(monkeypatch, tmp_path):
    blocker = write(tmp_path, "file", "not a folder")
    monkeypatch.setenv("ARROWGATE_SNIFF_CACHE", str(blocker / "sniff"))
    path = write(tmp_path, "a.csv", "a\n1\n")
    assert _sniffed(path).names == ["a"]
    monkeypatch.setenv("ARROWGATE_SNIFF_CACHE", "off")
    assert sniff_cache.folder() is None


def test_the_default_folder_is_under_arrowgate_home(monkeypatch, tmp_path):
    monkeypatch.delenv("ARROWGATE_SNIFF_CACHE")
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    assert sniff_cache.folder() == tmp_path / "home" / "sniff"


def test_the_oldest_entries_go_past_the_limit(kept, monkeypatch, tmp_path):
    monkeypatch.setattr(sniff_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        _sniffed(write(tmp_path, f"{i}.csv", f"c{i}\n{i}\n"))
        newest = max(kept.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        os.utime(newest, ns=(i * 10**9, i * 10**9))  # written in order, a second apart
    assert len(_entries(kept)) == 3
    leftover = kept / ".halfway"
    leftover.write_bytes(b"")
    os.utime(leftover, ns=(0, 0))
    _sniffed(write(tmp_path, "last.csv", "z\n1\n"))
    assert not leftover.exists() and len(_entries(kept)) == 3


def test_a_big_head_is_hashed_in_halves_and_still_keyed_by_every_byte(kept, monkeypatch,
                                                                     tmp_path):
    body = b"".join(b"%d,%d\n" % (i, i * 7) for i in range(200_000))
    path = write(tmp_path, "big.csv", b"a,b\n" + body)
    assert path.stat().st_size > sniff_cache._SPLIT_BYTES
    head, complete = _head(path)
    key = sniff_cache._bytes_key(head, "[]", complete)
    changed = bytearray(head)
    changed[len(head) - 3] ^= 1  # in the second half
    assert sniff_cache._bytes_key(bytes(changed), "[]", complete) != key
    changed = bytearray(head)
    changed[10] ^= 1  # in the first
    assert sniff_cache._bytes_key(bytes(changed), "[]", complete) != key
    # read a block at a time from the file, the head's key is the same: a hit
    file = open_csv(str(path), {})
    try:
        assert sniff_cache._key(len(head), sniff_cache._file_range(file), "[]", complete) == key
    finally:
        file.close()
    first = _sniffed(path)
    monkeypatch.setattr(sniff_cache, "sniff", lambda *a, **k: pytest.fail("sniffed again"))
    assert _sniffed(path) == first


def test_the_command_reads_the_layout_an_earlier_command_kept(tmp_path):
    """Two ``arrowgate query`` processes: the second finds the first's entry, and its
    answer is the same."""
    rows = "".join(f"{i},x{i}\n" for i in range(20_000))  # past MIN_BYTES
    path = write(tmp_path, "t.csv", "a,b\n" + rows)
    config = write(tmp_path, "arrowgate.toml",
                   f'[engines.csv]\ntype = "csv"\n\n[sources.t]\npath = "{path}"\n')
    env = {"ARROWGATE_SNIFF_CACHE": str(tmp_path / "sniff")}

    def run() -> str:
        done = run_arrowgate("--config", str(config), "query", "--format", "csv",
                             "SELECT * FROM t LIMIT 2", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run() == run() == 'a,b\n0,x0\n1,x1\n'
    [name] = _entries(tmp_path / "sniff")
    # the entry is what the next command reads: a name changed in it shows
    entry = tmp_path / "sniff" / name
    fields = marshal.loads(entry.read_bytes())
    entry.write_bytes(marshal.dumps({**fields, "names": ["a", "kept"]}, 4))
    assert run() == 'a,kept\n0,x0\n1,x1\n'


def test_a_small_head_is_sniffed_not_looked_up(monkeypatch, tmp_path):
    where = tmp_path / "sniff"
    monkeypatch.setenv("ARROWGATE_SNIFF_CACHE", str(where))
    small = write(tmp_path, "small.csv", "a\n" + "1\n" * ((sniff_cache.MIN_BYTES - 3) // 2))
    assert _sniffed(small).names == ["a"] and not where.exists()
    big = write(tmp_path, "big.csv", "a\n" + "1\n" * (sniff_cache.MIN_BYTES // 2))
    assert _sniffed(big).names == ["a"] and len(_entries(where)) == 1


class _Changing(bytearray):
    """A file whose bytes change between the hash of its mapping and the read of its
    head (a writer at work): the mapping is this bytearray, the read gives ``now``."""

    def __init__(self, mapped: bytes, now: bytes) -> None:
        super().__init__(mapped)
        self.now = now
        self.size = len(mapped)

    def pread(self, offset: int, n: int) -> bytes:
        return self.now[offset:offset + n]

    def pread_into(self, block: memoryview, offset: int) -> int:
        got = bytes(self[offset:offset + len(block)])
        block[:len(got)] = got
        return len(got)


def test_a_layout_is_kept_under_the_bytes_it_was_sniffed_from(kept, monkeypatch):
    ints, text = b"a\n1\n", b"a\nx\n"
    got = sniff_cache.sniffed(_Changing(ints, text), 4, {}, path="t", options_key="[]")
    assert got.kinds == [STR]  # the bytes read, not those hashed before
    calls = []
    real = sniff_cache.sniff
    monkeypatch.setattr(sniff_cache, "sniff", lambda *a, **k: calls.append(1) or real(*a, **k))
    # the bytes hashed then are a miss: their own sniff, not the other bytes' layout
    assert sniff_cache.sniffed(_Changing(ints, ints), 4, {}, path="t",
                               options_key="[]").kinds == [INT]
    assert calls == [1]
    assert sniff_cache.sniffed(_Changing(text, text), 4, {}, path="t",
                               options_key="[]").kinds == [STR]
    assert calls == [1]


def test_a_file_reads_into_a_buffer_and_counts_its_lines_without_its_mapping(tmp_path):
    from gateway_csv import _scanner

    path = write(tmp_path, "t.csv", "a,b\n1,2\n3,4\n")
    file = _scanner.File(str(path))
    block = bytearray(5)
    assert file.pread_into(block, 0) == 5 and block == b"a,b\n1"
    assert file.pread_into(memoryview(block)[:2], 10) == 2 and block[:2] == b"4\n"
    assert file.pread_into(block, 12) == 0 and file.pread_into(block, 99) == 0
    assert [file.newlines(n) for n in (0, 3, 4, 100)] == [0, 0, 1, 3]
    with pytest.raises(TypeError):
        file.pread_into(b"read-only", 0)
    file.close()
    for call in (lambda: file.pread_into(block, 0), lambda: file.newlines(1)):
        with pytest.raises(ValueError, match="closed"):
            call()


#: a big file opened (mapped), then cut to nothing before its head is counted and hashed
CUT_SHORT = """
import os, sys
from gateway_csv import _scanner, sniff_cache
path = sys.argv[1]
file = _scanner.File(path)
n = min(8 << 20, file.size)
os.truncate(path, 0)
print(file.newlines(n))
print(sniff_cache.sniffed(file, n, {}, path=path, options_key="[]").names)
"""


def test_a_file_cut_short_after_it_was_opened_does_not_crash_the_lookup(tmp_path):
    """The head is counted and hashed through reads, not the mapping: a page past the
    new end would be a SIGBUS there, which kills the process (the server's too)."""
    path = write(tmp_path, "big.csv", "a,b\n" + "".join(f"{i},x\n" for i in range(100_000)))
    done = subprocess.run([sys.executable, "-c", CUT_SHORT, str(path)], capture_output=True,
                          text=True, env={**os.environ,
                                          "ARROWGATE_SNIFF_CACHE": str(tmp_path / "sniff")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "0"


def test_no_cache_where_there_is_no_owner_to_check(kept, monkeypatch, tmp_path):
    """Windows has no geteuid: the folder's owner and mode cannot be checked, so the
    cache is not used (and the query does not fail on the missing call)."""
    monkeypatch.delattr(os, "geteuid")
    assert sniff_cache.folder() is None
    assert _sniffed(write(tmp_path, "a.csv", "a\n1\n")).names == ["a"]
    assert not kept.exists()
