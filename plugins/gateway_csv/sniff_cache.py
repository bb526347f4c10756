"""Layouts sniffed by earlier processes, found again by the bytes they came from.

Sniffing types a file's first 20,480 rows, as DuckDB's sniffer does: 12-25 ms
of a taxi file's 8 MiB head, a fifth of a one-query ``arrowgate query`` on
1M rows, and hundreds of milliseconds for a head full of quoted fields. The
layout is a pure function of the head's bytes, the source's CSV options and
the sniffer's code, so it is kept on disk under the SHA-256 of exactly those
(``$ARROWGATE_HOME/sniff``, see :mod:`gateway.config`) and read back by the next
process that reads the same bytes. A changed byte, option or sniffer file is
another key: nothing is trusted to a file's name, size or time, and a file
rewritten in place with the same size and time still gets its own sniff.

``ARROWGATE_SNIFF_CACHE``: ``off`` sniffs every time; a folder keeps the
entries there instead. A folder that cannot be made, or that another user
owns or may write to, is not used (the query sniffs as if there were none),
and an entry that does not read back as a layout is a miss.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config import cache_dir, private_dir
from gateway.records import fields
from gateway_csv.layout import DIALECT_BYTES, KIND_NAMES, SAMPLE_BYTES, SAMPLE_ROWS, Layout, sniff

#: bumped when an entry's form changes (what :func:`_fields` writes)
FORMAT = 1
#: entries kept; past it the oldest written go first
MAX_ENTRIES = 512
ENV = "ARROWGATE_SNIFF_CACHE"
#: smaller heads are sniffed, not looked up: their sniff costs less than importing
#: hashlib and reading an entry (a one-row file: 0.6 ms, and 0.9 ms for 64 KiB of rows, against
#: 2.8 ms for importing hashlib alone)
MIN_BYTES = 64 << 10
#: heads from this size are hashed in two halves at once
_SPLIT_BYTES = 1 << 20

_code_tag: bytes | None = None


def folder() -> Path | None:
    """Where entries live, or None when the cache is off or its folder unsafe."""
    setting = os.environ.get(ENV, "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    where = Path(setting).expanduser() if setting else cache_dir() / "sniff"
    return where if private_dir(where) else None


def sniffed(file: Any, n: int, options: dict[str, Any], *, path: str,
            options_key: str, then: Callable[[bytes, Layout], Layout] | None = None) -> Layout:
    """:func:`gateway_csv.layout.sniff` of the first ``n`` bytes of ``file`` (a
    ``_scanner.File``), or the layout an earlier sniff of the same bytes, options
    (``options_key``: their canonical text) and code found.

    A lookup hashes the head as it reads it, a block at a time into one small
    buffer, never through the mapping (a file cut short meanwhile would fault
    there, outside the scan's guard) and without the head's copy (an 8 MiB head
    is 2,048 pages of new memory, 5 ms here). A miss reads the head, sniffs it,
    and keeps the layout under the hash of the bytes it sniffed.

    ``then``: called with the head and the sniffed layout, its answer is the layout
    kept (a file with blanks around its quotes is typed on its head without them).

    Raises what :func:`sniff` raises (a failed sniff is not kept)."""
    complete = n >= file.size
    where = folder() if n >= MIN_BYTES else None
    if where is not None:
        key = _key(n, _file_range(file), options_key, complete)
        found = _read(where / key) if key is not None else None
        if found is not None:
            return found
    head = file.pread(0, n)
    layout = sniff(head, options, path=path, complete=complete)
    if then is not None:
        layout = then(head, layout)
    if where is not None:
        # keyed by the bytes sniffed, which a file written to meanwhile may not share
        # with the bytes hashed above
        key = _bytes_key(head, options_key, complete)
        if key is not None:
            _write(where, where / key, layout)
    return layout


def _bytes_key(head: bytes, options_key: str, complete: bool) -> str | None:
    """:func:`_key` of a head read whole."""
    import hashlib

    view = memoryview(head)
    return _key(len(head), lambda lo, hi: hashlib.sha256(view[lo:hi]).digest(), options_key,
                complete)


#: the block a lookup reads the head in
_BLOCK = 256 << 10


def _file_range(file: Any) -> Any:
    """The SHA-256 of bytes [lo, hi) of ``file``, read a block at a time (None when
    the file ends before hi: it was cut short since it was opened)."""
    def digest(lo: int, hi: int) -> bytes | None:
        import hashlib

        h = hashlib.sha256()
        block = memoryview(bytearray(min(_BLOCK, hi - lo)))
        while lo < hi:
            try:
                got = file.pread_into(block[:hi - lo], lo)
            except (OSError, ValueError):  # the read of the head, after, says why
                return None
            if got <= 0:
                return None
            h.update(block[:got])  # (hashlib lets go of the GIL)
            lo += got
        return h.digest()
    return digest


def _key(n: int, digest: Any, options_key: str, complete: bool) -> str | None:
    """The entry's name: the SHA-256 of the key's parts and of the head's bytes,
    ``digest(lo, hi)`` of each half of a big head (hashed at once, in two threads),
    of the whole of a small one; None when a digest is."""
    import hashlib

    meta = repr((FORMAT, _code(), sys.version_info[:2], SAMPLE_ROWS, DIALECT_BYTES,
                 SAMPLE_BYTES, options_key, complete, n)).encode()
    if n < _SPLIT_BYTES:
        parts = [digest(0, n)]
    else:
        half = n // 2
        second: list[bytes | None] = []
        worker = threading.Thread(target=lambda: second.append(digest(half, n)), daemon=True)
        worker.start()
        parts = [digest(0, half)]
        worker.join()
        parts += second or [None]
    if any(p is None for p in parts):
        return None
    return hashlib.sha256(meta + b"\0" + b"".join(parts)).hexdigest()  # type: ignore[arg-type]


def _code() -> bytes:
    """The sniffer's code, as the names, sizes and times of the csv engine's files
    (its Python modules and C extensions): an edited or upgraded file is a new key."""
    global _code_tag
    if _code_tag is None:
        here = os.path.dirname(os.path.abspath(__file__))
        parts = []
        with os.scandir(here) as entries:
            for e in entries:
                if e.name.endswith((".py", ".so", ".pyd")):
                    st = e.stat()
                    parts.append(f"{e.name}:{st.st_size}:{st.st_mtime_ns}")
        _code_tag = "\n".join(sorted(parts)).encode()
    return _code_tag


#: the fields an entry keeps (not lower_names, which Layout works out)
_FIELDS = tuple(name for name in fields(Layout) if name != "lower_names")


def _fields(layout: Layout) -> dict[str, Any]:
    return {name: getattr(layout, name) for name in _FIELDS}


def _layout(kept: Any) -> Layout | None:
    """The layout an entry holds, or None when it is not one this code wrote."""
    if not isinstance(kept, dict) or set(kept) != set(_FIELDS):
        return None
    names, kinds, formats = kept["names"], kept["kinds"], kept["formats"]
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
            and isinstance(kinds, list) and all(type(k) is int and k in KIND_NAMES for k in kinds)
            and len(names) == len(kinds) > 0
            and isinstance(kept["nulls"], tuple) and all(isinstance(n, str) for n in kept["nulls"])
            and isinstance(formats, dict)
            and all(type(i) is int and isinstance(f, str) for i, f in formats.items())
            and all(isinstance(kept[k], str) for k in ("delimiter", "quote", "escape", "comment"))
            and all(type(kept[k]) is bool for k in ("header", "skip_bad", "trailing",
                                                    "cut_comments", "padded_quotes"))
            and all(type(kept[k]) is int and kept[k] >= 0 for k in ("data_start",
                                                                    "skipped_lines"))
            and (kept["timestamp_format"] is None or isinstance(kept["timestamp_format"], str))):
        return None
    return Layout(**kept)


def _read(entry: Path) -> Layout | None:
    try:
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        import stat

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() \
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_size > 1 << 20:
            return None
        data = os.read(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return _layout(marshal.loads(data))
    except (ValueError, EOFError, TypeError):
        return None


def _write(where: Path, entry: Path, layout: Layout) -> None:
    """Keep ``layout`` as ``entry``, whole or not at all (written aside, then renamed
    over); a folder that takes no writes (full, read-only) only keeps nothing."""
    data = marshal.dumps(_fields(layout), 4)
    # a name no other writer has, whatever its process or thread (or machine, on a
    # shared home)
    aside = where / f".{entry.name}.{os.urandom(8).hex()}"
    try:
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(aside, entry)
    except OSError:
        try:
            os.unlink(aside)
        except OSError:
            pass
        return
    _prune(where)


def _prune(where: Path) -> None:
    """Keep the newest :data:`MAX_ENTRIES` entries, and no leftovers of writes that
    died halfway (an hour old)."""
    import time

    try:
        with os.scandir(where) as found:
            entries = [(e.stat(follow_symlinks=False).st_mtime, e.path, e.name) for e in found]
    except OSError:
        return
    hour_ago = time.time() - 3600
    stale = [p for mtime, p, name in entries if name.startswith(".") and mtime < hour_ago]
    kept = sorted((e for e in entries if not e[2].startswith(".")), reverse=True)
    for _, p, _ in kept[MAX_ENTRIES:]:
        stale.append(p)
    for p in stale:
        try:
            os.unlink(p)
        except OSError:
            pass
