"""The service process's memory allocator: freed answer buffers are kept for the next ones.

DuckDB builds each Arrow batch it hands out in buffers of its own, grown with
``realloc`` (1-2 MiB a column for its 122,880-row batches), and the service
frees them once they are sent, while the next ones are being made. glibc's
allocator gave that memory back to the system whenever more than twice the
largest buffer lay free at the top of a heap (its trim threshold follows its
mmap threshold), which a stream holding two or three batches always passed:
every batch was written into fresh pages, each one a page fault. A 10M-row
answer cost the service 26,000-39,000 page faults and 0.02-0.065 s of its
0.46-0.50 s of CPU (docs/flight.md, "Where the service's CPU goes").

:func:`keep_freed_memory` sets, from the start, the thresholds glibc's own
adjustment reaches at its ceiling (buffers up to 32 MiB from the heaps, 64 MiB
left free at a heap's top before it is trimmed), and at most one arena (a
thread's set of heaps) per core, two at least, where glibc allows eight per
core: the thresholds alone
left the memory of batches spread over the arenas of the threads that made
them (480-550 MB resident after a few answers, against 320 MB); with both, the
peak stays within 15 MB of glibc's defaults.

The price is memory kept while nothing runs: up to 64 MiB free at each heap's
top, and every free page inside a heap, which glibc never returns on its own.
Under bench/client_model.py's clients, ``malloc_trim`` gave back 40-60 MB of a
320-380 MB service every 45 s. :func:`give_back` returns it, and the service
calls it once it is at rest (:class:`AtRest`), never while answers are made.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

#: mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's adjustment pairs with it

#: environment variables by which a user tunes glibc's allocator: then it is left as set
USER_SETTINGS = ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_",
                 "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def keep_freed_memory() -> bool:
    """Tune glibc's allocator for this process (call it before the server starts threads).

    Returns:
        True when the thresholds were set; False on another C library or
        system, or when the environment tunes the allocator itself.
    """
    if not sys.platform.startswith("linux") or not _glibc() \
            or any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = [(M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                (M_ARENA_MAX, max(2, os.cpu_count() or 1))]
    return all(mallopt(param, value) == 1 for param, value in settings)


def give_back() -> bool:
    """Return the allocator's free memory to the system (glibc's ``malloc_trim(0)``: the
    free top of every heap, and the free pages inside them). False where there is none."""
    if not sys.platform.startswith("linux") or not _glibc():
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True


class AtRest:
    """Calls :func:`give_back` once a busy service has run nothing for ``quiet`` seconds,
    after ``tidy`` (the engines' own giving back: :meth:`gateway.core.Gateway.at_rest`).

    ``seen(started, running)`` is told, from time to time, how many statements have
    started so far and how many run now.
    """

    def __init__(self, quiet: float = 5.0, tidy: Callable[[], None] | None = None) -> None:
        self.quiet = quiet
        self.tidy = tidy
        self.trims = 0
        self._started = 0         # statements started, at the last look
        self._trimmed_at = 0      # ... when memory was last given back
        self._changed = 0.0       # when the count or the running ones last changed

    def seen(self, started: int, running: int, now: float) -> None:
        if started != self._started or running:
            self._started, self._changed = started, now
            return
        if started != self._trimmed_at and now - self._changed >= self.quiet:
            self._trimmed_at = started
            if self.tidy is not None:
                self.tidy()
            if give_back():
                self.trims += 1


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):  # not a GNU C library (musl has no such name)
        return False
