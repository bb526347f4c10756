"""How a data file sits in the page cache, which the whole-process benches set and report.

The same 339 MB file (the 1M-row taxi file), hot in the page cache each time, took
a C loop 34-46 ms to map (``MADV_POPULATE_READ``) and read on 2 cores as
``arrowgate data taxi`` (pyarrow's CSV writer) had written it, 34-42 ms when
written again in 16 KiB writes, 20-23 ms in 1 MiB writes, and 10.7-13.2 ms once
evicted and read back (2026-12-02, Linux 6.18, ext4). A whole ``arrowgate query``
of it (Q01) took a median of 155 ms (130-209, 41 runs) as written and 100-110 ms
(6 runs) read back. The page cache holds a file in folios sized by the writes
or the read-ahead that brought it in (what these runs suggest, not a reading of
the kernel's code): read-ahead brought 2 MiB ones, which a mapping takes whole
(``FilePmdMapped``); writes, 1 MiB ones included, and a copy with ``cp`` left none. Every contender reads
the same pages, but not alike (csvql and arrowgate map the file, the DuckDB
CLI copies it out), so the benches set the state and say which.

- :func:`read_back`: evict the file (``POSIX_FADV_DONTNEED``) and read it once,
  in 1 MiB reads: the state of a file read from disk.
- :func:`rewrite`: write the file again in 16 KiB writes, beside it, and
  rename the copy over it: the state of a file a program has just written.
- :func:`huge_share`: the share of the file a mapping takes in 2 MiB folios.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

#: MADV_POPULATE_READ (Linux 5.14): maps a range's pages without reading them
_POPULATE_READ = 22


def read_back(path: Path) -> None:
    """Drop ``path``'s pages from the page cache, then read it through once."""
    if not hasattr(os, "posix_fadvise"):
        raise SystemExit("--page-cache read-back needs posix_fadvise, which this system lacks: "
                         "use --page-cache written or as-is")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # a page not yet written back is not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def rewrite(path: Path, block: int = 16 << 10) -> None:
    """Write ``path`` again, ``block`` bytes a write, and put the copy in its place."""
    copy = path.with_name(path.name + ".rewrite")
    with open(path, "rb") as src, open(copy, "wb", buffering=0) as out:
        while data := src.read(block):
            out.write(data)
    os.replace(copy, path)


def settle(path: Path, state: str) -> None:
    """Put ``path`` in the page-cache ``state``: ``read-back``, ``written`` or ``as-is``."""
    if state == "read-back":
        read_back(path)
    elif state == "written":
        rewrite(path)
    elif state != "as-is":
        raise ValueError(f"no page-cache state {state!r}")


STATES = ("read-back", "written", "as-is")


def huge_share(path: Path) -> float | None:
    """The share of ``path`` a fresh mapping of it holds in 2 MiB folios
    (``FilePmdMapped`` of this process over the file's size); None where that is not known."""
    rollup = Path("/proc/self/smaps_rollup")
    size = path.stat().st_size
    if not rollup.exists() or not size:
        return None

    def pmd_mapped() -> int:
        for line in rollup.read_text().splitlines():
            if line.startswith("FilePmdMapped:"):
                return int(line.split()[1]) * 1024
        return 0

    before = pmd_mapped()
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), size, prot=mmap.PROT_READ) as view:
        try:
            view.madvise(_POPULATE_READ)
        except OSError:
            return None
        share = (pmd_mapped() - before) / size
    return share


def describe(path: Path) -> str:
    share = huge_share(path)
    return (f"{path.name}: {share:.0%} of it in 2 MiB page-cache folios" if share is not None
            else f"{path.name}: page-cache folio sizes not known here")
