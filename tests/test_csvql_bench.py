"""bench/csvql_bench.py's measuring and answer checking (its timings are the lead's to run)."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("csvql_bench")


def test_a_run_measures_the_child_not_the_benchmark(bench):
    """Peak RSS is the child's own (wait4's ru_maxrss counted this process's pages too)."""
    ballast = bytearray(200 * 2**20)  # this process holds 200 MB more than the child
    code = ("import sys, time; sys.stdout.write('a\\n'); sys.stdout.flush(); "
            "x = bytearray(50 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(0.05)")
    run = bench.run_once([sys.executable, "-c", code])
    assert run.code == 0 and run.output == b"a\n"
    assert 0 < run.first_byte < run.wall
    assert 50 * 2**20 < run.peak_rss < 150 * 2**20
    assert 50 * 2**20 < run.rss_anon <= run.peak_rss
    del ballast


def test_answers_compare_as_sorted_rows_with_numbers_normalised(bench):
    duckdb = b"passenger_count,y,\"count_star()\"\n2,2015,3\n1,2014,4.0\n"
    ours = b"passenger_count,y,count\n1,2014,4\n2,2015,3.000000000001\n"
    assert bench.answer(duckdb) == bench.answer(ours)
    assert bench.answer(duckdb) != bench.answer(b"h\n1,2014,5\n2,2015,3\n")


def test_a_library_asking_for_a_missing_symbol_version_loads_once_loosened(tmp_path, monkeypatch):
    """bench/elf_versions.py, as ``--csvql-shim`` uses it on csvql's fmod@GLIBC_2.38: a
    library built against ``twice@NEW_1`` fails to load where its provider has only
    ``twice@OLD_1``, and loads and calls the provider's ``twice`` once loosened."""
    import ctypes
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from elf_versions import loosen

    (tmp_path / "provider.c").write_text("int twice(int x) { return 2 * x; }\n")
    (tmp_path / "new.map").write_text("NEW_1 { global: twice; local: *; };\n")
    (tmp_path / "old.map").write_text("OLD_1 { global: twice; local: *; };\n")
    (tmp_path / "user.c").write_text("int twice(int);\nint quad(int x) { return twice(twice(x)); }\n")
    build = tmp_path / "build"
    build.mkdir()

    def cc_run(*args: str) -> None:
        subprocess.run([cc, "-shared", "-fPIC", *args], check=True, cwd=tmp_path,
                       capture_output=True)

    # the user is linked against a provider that versions twice as NEW_1 ...
    cc_run("-Wl,--version-script=new.map", "-Wl,-soname,libprovider.so", "-o",
           "build/libprovider.so", "provider.c")
    cc_run("-o", "libuser.so", "user.c", "-Lbuild", "-lprovider")
    # ... and loaded beside an older one, which has it as OLD_1 only (as glibc 2.36 has
    # fmod@GLIBC_2.2.5 and not fmod@GLIBC_2.38)
    cc_run("-Wl,--version-script=old.map", "-Wl,-soname,libprovider.so", "-o",
           "libprovider.so", "provider.c")
    ctypes.CDLL(str(tmp_path / "libprovider.so"), mode=ctypes.RTLD_GLOBAL)
    with pytest.raises(OSError, match="NEW_1"):
        ctypes.CDLL(str(tmp_path / "libuser.so"))
    assert loosen(tmp_path / "libuser.so", {"twice"}, "NEW_1") == (1, 1)
    assert ctypes.CDLL(str(tmp_path / "libuser.so")).quad(3) == 12


@pytest.mark.parametrize("state", ["read-back", "written", "as-is"])
def test_setting_a_files_page_cache_state_keeps_its_bytes(monkeypatch, tmp_path, state):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    page_cache = importlib.import_module("page_cache")
    data = b"".join(b"%d,row %d\n" % (i, i) for i in range(100_000))  # ~1.3 MB, 16 KiB writes
    path = tmp_path / "data.csv"
    path.write_bytes(data)
    inode = path.stat().st_ino
    page_cache.settle(path, state)
    assert path.read_bytes() == data
    assert list(tmp_path.iterdir()) == [path]  # no copy left beside it
    assert (path.stat().st_ino == inode) == (state != "written")
    share = page_cache.huge_share(path)
    assert share is None or 0 <= share <= 1
    with pytest.raises(ValueError, match="no page-cache state"):
        page_cache.settle(path, "cold")
