"""Named data sources: files, globs and folders declared once in the config.

A source is mounted into every engine that can read it, under its name, so
the same SQL text (``SELECT ... FROM trips``) runs on every engine.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Final

from gateway.engine import Option
from gateway.records import FrozenRecord

FORMATS = ("csv", "parquet")

#: The keys a ``[sources.NAME]`` section accepts.
SOURCE_OPTIONS: dict[str, Option] = {
    "path": Option((str,), required=True, help="a file, a glob (data/*.csv) or a folder"),
    "format": Option((str,), choices=FORMATS, help="csv or parquet; default from the extension"),
    "delimiter": Option((str,), help="CSV field delimiter; sniffed when absent"),
    "quote": Option((str,), help="CSV quote character"),
    "escape": Option((str,), help="CSV escape character"),
    "header": Option((bool,), help="whether the first CSV line names the columns"),
    "null": Option((str, list), help="string(s) read as NULL"),
    "columns": Option((dict,), help="column name -> SQL type, overriding sniffed types"),
    "timestamp_format": Option((str,), help="strftime format of timestamp columns"),
    "encoding": Option((str,), help="text encoding of a CSV file: utf-8 (default, BOM "
                       "allowed), latin-1, utf-16, or any encoding Python knows"),
    "compression": Option((str,), choices=("auto", "none", "gzip", "zstd"),
                          help="compression of a CSV file; auto looks at the file's first bytes"),
    "on_error": Option((str,), choices=("error", "skip"), default="error",
                       help="what to do with a malformed row"),
}


class Source(FrozenRecord):
    """One named data source.

    Attributes:
        name: the table name it is mounted under.
        path: the absolute path as written (a file, a glob or a folder).
        format: ``csv`` or ``parquet``.
        options: the remaining keys of the section (delimiter, header, ...).
    """

    __slots__ = ("name", "path", "format", "options")
    name: Final[str]
    path: Final[str]
    format: Final[str]
    options: Final[dict[str, Any]]

    def __init__(self, name: str, path: str, format: str,
                 options: dict[str, Any] | None = None) -> None:
        self.name, self.path, self.format = name, path, format
        self.options = {} if options is None else options

    @property
    def is_glob(self) -> bool:
        """A pattern, unless a file or folder of that very name exists
        (``[avalon]_daily-avg.csv`` is a file of DuckDB's corpus)."""
        return any(ch in self.path for ch in "*?[") and not Path(self.path).exists()

    @property
    def is_folder(self) -> bool:
        return Path(self.path).is_dir()

    def scan_pattern(self) -> str:
        """The path an engine should scan: a folder becomes ``folder/*.<format>``."""
        if self.is_folder:
            return str(Path(self.path) / f"*.{self.format}")
        return self.path

    def files(self) -> list[str]:
        """The files this source currently covers, sorted."""
        pattern = self.scan_pattern()
        if Path(pattern).is_file():
            return [pattern]
        if any(ch in pattern for ch in "*?["):
            import glob  # (a source of one file needs no glob)

            return sorted(glob.glob(pattern, recursive=True))
        return []


def not_regular(source: Source) -> tuple[str, str] | None:
    """The first path of ``source`` that is neither a regular file nor a folder, and what it
    is (``a named pipe (FIFO)``, ``a character device``, ...), or None.

    Reading a FIFO or a device never ends (``/dev/zero``) or waits for a writer,
    and DuckDB reads every source while it binds any query, ``SELECT 1`` included.
    """
    paths = [source.path] if not source.is_glob else []
    paths += source.files()
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # a missing path has its own error
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return path, _file_kind(mode)
    return None


def special_file(path: str) -> str | None:
    """What ``path`` is (``a named pipe (FIFO)``, ...) when it exists and is neither a
    regular file nor a folder: opening it would wait for a writer, or never end."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _file_kind(mode)


#: the quoted texts of a statement (string literals, quoted identifiers), which may name files
_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")


def named_special_file(sql: str) -> tuple[str, str] | None:
    """The first quoted text of ``sql`` naming a FIFO or device (``FROM 'p.csv'``), and what
    it is, or None. DuckDB opens such a path while it binds, past any timeout or cancel."""
    for match in _QUOTED.finditer(sql):
        text = match.group(1) if match.group(1) is not None else match.group(2)
        if 0 < len(text) < 4096:
            kind = special_file(os.path.expanduser(text.replace("''", "'").replace('""', '"')))
            if kind is not None:
                return text, kind
    return None


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def infer_format(path: str) -> str | None:
    """``csv`` or ``parquet`` from a path's extension (``.csv.gz`` counts as csv)."""
    lower = path.lower()
    for suffix, fmt in ((".parquet", "parquet"), (".pq", "parquet"), (".csv", "csv"),
                        (".tsv", "csv"), (".csv.gz", "csv"), (".txt", "csv")):
        if lower.endswith(suffix):
            return fmt
    return None


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (how a statement names a source safely)."""
    return '"' + name.replace('"', '""') + '"'
