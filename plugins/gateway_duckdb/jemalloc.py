"""DuckDB's own allocator: each DuckDB library (a wheel's ``_duckdb*.so``) allocates
through a jemalloc of its own, whose symbols carry the prefix ``duckdb_je_``.

That jemalloc keeps the pages DuckDB frees and returns them only as later
allocations go by (``dirty_decay_ms`` 1000, no background thread): at rest, never.
After a CHECKPOINT at rest that dropped 45 MB of deleted rows' versions, 50 MB stayed
resident until :func:`purge` (then 4-5 MB; docs/benchmarks.md, issue 36). DuckDB's
``allocator_background_threads`` setting does the same all the time, which would give
pages back under load too, where they are about to be used again.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

#: jemalloc's MALLCTL_ARENAS_ALL: ``arena.<i>.purge`` for every arena
ALL_ARENAS = 4096


def purge(library: str | Path | None) -> bool:
    """Return the free pages of ``library``'s jemalloc to the system.

    Args:
        library: a DuckDB library this process has loaded already (it is not loaded
            here otherwise: a DuckDB session passes its own).

    Returns:
        False when there is no such library or it has no jemalloc of its own.
    """
    no_load = getattr(os, "RTLD_NOLOAD", None)
    if library is None or no_load is None:
        return False
    try:
        mallctl = ctypes.CDLL(str(library), mode=no_load | os.RTLD_LAZY).duckdb_je_mallctl
    except (OSError, AttributeError):
        return False
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                        ctypes.c_void_p, ctypes.c_size_t]
    return bool(mallctl(f"arena.{ALL_ARENAS}.purge".encode(), None, None, None, 0) == 0)
