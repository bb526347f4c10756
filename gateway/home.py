"""Where arrowgate keeps what it caches between processes.

``$ARROWGATE_HOME``, else ``$XDG_CACHE_HOME/arrowgate``, else
``~/.cache/arrowgate``. The duckdb plugin keeps its installed DuckDB versions
there, the csv engine its sniffed layouts (``sniff/``).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The arrowgate cache: ``$ARROWGATE_HOME``, else the XDG cache folder."""
    home = os.environ.get("ARROWGATE_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "arrowgate"


def private_dir(path: Path) -> bool:
    """Make ``path`` (and its parents) if missing, private to this user (0700), and
    say whether it is safe to read what this process wrote there earlier: a
    folder this user owns that no one else may write to. False on any error (a
    read-only home, a folder another user owns, Windows): the caller does without."""
    if not hasattr(os, "geteuid"):
        return False  # (Windows: no owner and mode to check; its caller does without)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    import stat

    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() \
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
