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
