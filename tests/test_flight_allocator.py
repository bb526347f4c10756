"""The service process keeps freed answer buffers for the next ones (gateway/flight/allocator.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import gateway
from gateway.flight import service
from gateway.flight.allocator import USER_SETTINGS
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""),
    reason="the allocator tuned is glibc's")

#: Batches as the service handles them: a thread (not the main one, so not glibc's main
#: heap) makes three 2 MiB buffers, writes them and frees them, over and over; prints the
#: page faults of the last ten rounds and the pages written in them.
BATCHES = """
import ctypes, resource, sys, threading
from gateway.flight.allocator import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "tuned" else None)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
SIZE = 2 << 20
faults = []
def batches():
    for i in range(12):
        if i == 2:
            start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        held = [libc.malloc(SIZE) for _ in range(3)]
        for p in held:
            libc.memset(p, 1, SIZE)
        for p in held:
            libc.free(p)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
thread = threading.Thread(target=batches)
thread.start()
thread.join()
print(faults[0], 10 * 3 * SIZE // 4096)
"""


def run_batches(how: str, **env: str) -> tuple[str, int, int]:
    inherited = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    done = subprocess.run([sys.executable, "-c", BATCHES, how], capture_output=True, text=True,
                          env={**inherited, "PYTHONPATH": str(ROOT), **env}, check=True)
    tuned, counts = done.stdout.splitlines()
    faults, pages = map(int, counts.split())
    return tuned, faults, pages


def test_freed_batches_are_written_again_without_page_faults():
    _, faults, pages = run_batches("plain")
    assert faults > pages // 2  # glibc's default gives them back: each page faults again
    tuned, faults, pages = run_batches("tuned")
    assert tuned == "True"
    assert faults < pages // 20


def test_an_allocator_tuned_in_the_environment_is_left_as_it_is():
    tuned, faults, pages = run_batches("tuned", MALLOC_ARENA_MAX="4")
    assert tuned == "False"
    assert faults > pages // 2


def test_serve_tunes_the_allocator_before_it_starts_the_server(monkeypatch):
    calls = []

    class Stop(Exception):
        pass

    def server(*args):
        calls.append("server")
        raise Stop

    monkeypatch.setattr(service, "keep_freed_memory", lambda: calls.append("allocator"))
    monkeypatch.setattr(service, "FlightSqlServer", server)
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw, \
            pytest.raises(Stop):
        service.serve(gw, port=0)
    assert calls == ["allocator", "server"]


#: Memory left free inside a thread's heap (the tuned thresholds keep it): 1,500 blocks of
#: 64 KiB written, every other one freed (holes no trim at the heap's top reaches), then
#: the rest; prints the resident MiB before and after give_back().
HOLES = """
import ctypes, threading
from gateway.flight.allocator import give_back, keep_freed_memory
keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20
def work():
    held = [libc.malloc(64 << 10) for _ in range(1500)]
    for p in held:
        libc.memset(p, 1, 64 << 10)
    for p in held[::2]:
        libc.free(p)
    for p in held[1:-1:2]:
        libc.free(p)
thread = threading.Thread(target=work)
thread.start()
thread.join()
before = rss()
print(give_back(), before, rss())
"""


def test_free_memory_is_given_back_at_rest():
    """bench/client_model.py: malloc_trim gave back 40-60 MB of a 320-380 MB service; the
    tuned thresholds (64 MiB kept at a heap's top) and the holes inside heaps kept it."""
    inherited = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    done = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True,
                          env={**inherited, "PYTHONPATH": str(ROOT)}, check=True)
    gave, before, after = done.stdout.split()
    assert gave == "True"
    assert int(before) - int(after) >= 40, (before, after)  # of ~94 MB freed


def test_the_service_gives_memory_back_once_nothing_runs():
    from gateway.flight.allocator import AtRest

    rest = AtRest(quiet=5.0)
    rest.seen(10, 2, now=100.0)   # busy
    rest.seen(12, 0, now=101.0)   # statements still starting
    rest.seen(12, 0, now=103.0)   # quiet for 2 s: not yet
    assert rest.trims == 0
    rest.seen(12, 0, now=106.5)   # quiet for 5.5 s
    assert rest.trims == 1
    rest.seen(12, 0, now=200.0)   # nothing ran since: nothing to give back
    assert rest.trims == 1
    rest.seen(13, 0, now=201.0)
    rest.seen(13, 0, now=207.0)
    assert rest.trims == 2
