"""Opening a CSV file for the scanner: mapped in place, or decoded once into a temporary copy.

The scanner reads UTF-8 text whose rows end in LF or CRLF, from a memory
map. A file that is not that (gzip or zstd compressed, in another encoding,
or with rows ending in a lone CR, as DuckDB decides from the first line end)
is streamed through pyarrow's
decompressors, Python's incremental decoders and a line-ending rewrite into
an unlinked temporary file, which is then mapped like any other: memory stays
bounded, and everything downstream (chunking, sniffing, errors) is unchanged.
Byte offsets and line numbers in errors then refer to that decoded text.
So is a file with comments after values (``1;3 # note``), which the scanner,
skipping only whole comment lines, would read as part of the row: the copy
cuts each line at its comment character, a block at a time in C
(``_scanner.uncomment``). Blanks around quoted fields (``1, "a" ,2``) are
skipped by the scanner itself as it reads (the layout's ``padded_quotes``);
only the sniffer's head is read through a copy without them
(:func:`unpadded_layout`), and a file that needs a comment copy drops them
in that copy (``_scanner.unpad``).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable
from typing import Any

from gateway.errors import ConfigError, QueryError, Unsupported
from gateway_csv import _scanner
from gateway_csv.dialect import newline_kind

COMPRESSIONS = ("auto", "none", "gzip", "zstd")
_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}
_BLOCK = 1 << 20
_CR = 1  # dialect.newline_kind of rows ending in a lone CR


def open_csv(path: str, options: dict[str, Any]) -> Any:
    """A ``_scanner.File`` holding ``path``'s rows as UTF-8 text ending in LF or CRLF.

    Args:
        path: the file.
        options: the source's options; ``compression`` (auto, none, gzip, zstd;
            auto looks at the first bytes) and ``encoding`` (any name Python's
            codecs know; utf-8 by default) are read here.

    Raises:
        OSError: the file cannot be opened.
        ConfigError: an unknown compression or encoding.
        QueryError: the file does not decompress or decode.
    """
    compression = _compression(path, options.get("compression") or "auto")
    encoding = _encoding(options.get("encoding") or "utf-8")
    if compression is None and encoding == "utf-8":
        file = _scanner.File(path)
        head = file.pread(0, 64 << 10)
        # a CR ending a partial head may be the first half of CRLF; a lone CR after
        # the first line end (inside a quoted field) is a character of its value
        if newline_kind(head[:-1] if len(head) < file.size else head) != _CR:
            return file
        file.close()
    return _decoded_copy(path, compression, encoding)


def _compression(path: str, name: str) -> str | None:
    if name not in COMPRESSIONS:
        raise ConfigError(f"the csv engine cannot read {name!r} compression",
                          key="compression", hint="compression: " + ", ".join(COMPRESSIONS))
    if name != "auto":
        return None if name == "none" else name
    with open(path, "rb") as f:
        magic = f.read(4)
    for prefix, found in _MAGIC.items():
        if magic.startswith(prefix):
            return found
    return None


def _encoding(name: str) -> str:
    try:
        codec = codecs.lookup(name)
    except LookupError:
        raise ConfigError(f"no text encoding is named {name!r}", key="encoding",
                          hint="for example utf-8, latin-1, utf-16, shift_jis, cp1252") from None
    return "utf-8" if codec.name in ("utf-8", "utf-8-sig") else codec.name


def _decoded_copy(path: str, compression: str | None, encoding: str) -> Any:
    import tempfile

    import pyarrow as pa

    fd, name = tempfile.mkstemp(prefix="arrowgate-csv-", suffix=".csv")
    try:
        with os.fdopen(fd, "wb") as copy, pa.input_stream(path, compression=compression) as raw:
            decoder = codecs.getincrementaldecoder(encoding)() if encoding != "utf-8" else None
            held = b""  # a CR at the end of a block may be the first half of CRLF
            rewrite: bool | None = None  # rows end in a lone CR: rewrite every ending
            in_quote = False
            while True:
                try:
                    block = raw.read(_BLOCK)
                    text = decoder.decode(block, final=not block) if decoder else None
                except (OSError, pa.ArrowInvalid) as exc:
                    raise QueryError(f"{path}: the file does not decompress as {compression} "
                                     f"({exc})", hint="set compression on the source", kind="type") from None
                except UnicodeDecodeError as exc:
                    raise QueryError(f"{path}: the file is not {encoding} text ({exc.reason} "
                                     f"at byte {exc.start} of a block)",
                                     hint="set the source's encoding", kind="type") from None
                data = held + (text.encode("utf-8") if text is not None else block)
                if rewrite is None:
                    rewrite = newline_kind(data[:-1] if block else data) == _CR
                if rewrite:
                    held = data[-1:] if data.endswith(b"\r") and block else b""
                    data = data[:-1] if held else data
                    in_quote = _check_quoted_cr(data, in_quote, path)
                    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                copy.write(data)
                if not block:
                    break
        file = _scanner.File(name)
    finally:
        _remove(name)
    return file


def _check_quoted_cr(data: bytes, in_quote: bool, path: str) -> bool:
    """Whether a double-quoted field is open after ``data``, a block of a file whose
    rows end in a lone CR, given whether one was open before it.

    Raises:
        Unsupported: a CR inside a double-quoted field. DuckDB keeps it in the value;
            rewriting the row ends to LF would change it (and which quote the file
            uses is not known yet).
    """
    found, in_quote = _scanner.quoted_cr(data, in_quote)
    if found:
        raise Unsupported(f"{path}: the file ends its rows with a lone carriage return "
                          "(CR) and also holds one inside a quoted field, which DuckDB "
                          "keeps in the value; the csv engine cannot tell them apart. "
                          "The duckdb engine reads it", engines=("duckdb",))
    return in_quote


def without_comments(file: Any, comment: str, quote: str, delimiter: str, escape: str,
                     padded: bool) -> Any:
    """A copy of a mapped ``file`` whose lines end before their comment character,
    and, when ``padded``, without the blanks around its quoted fields.

    As in DuckDB's state machine, the character starts a comment outside quoted
    fields only; a line that is blank before it becomes a bare comment line,
    which the scanner skips. The caller keeps ``file`` open (and closes it).
    """
    mark, q = ord(comment), ord(quote) if quote else -1
    d, e = ord(delimiter), ord(escape) if escape else -1
    states = [False, False]

    def fix(block: bytes) -> bytes:
        block, states[0] = _scanner.uncomment(block, mark, q, states[0])
        if padded and q >= 0:
            block, states[1] = _scanner.unpad(block, d, q, e, states[1])
        return block

    return _rewritten(file, fix)


def unpadded_layout(head: bytes, complete: bool, layout: Any, options: dict[str, Any],
                    path: str) -> Any:
    """``layout``, sniffed on ``head``, as is, unless the file's quoted fields have
    blanks around them (``1, "a" ,2``) and no comment follows values: then sniffed
    again on the head without those blanks, for the scanner to read the file in
    place, skipping them (``padded_quotes``), with ``data_start`` an offset in the
    file itself. ``complete``: the head is the whole file."""
    from gateway_csv.layout import sniff

    if not layout.padded_quotes or layout.cut_comments:
        return layout
    d, q = ord(layout.delimiter), ord(layout.quote)
    e = ord(layout.escape) if layout.escape else -1
    if not _scanner.unpad(head, d, q, e, False, True)[0]:
        # the blank beside a quote was inside a quoted field (TPC-H's lineitem: `bold, "`):
        # sniffing the same bytes again would find the same layout (0.1 s of its head);
        # asked without the copy (10 ms of lineitem's 8 MiB head, with the comparison)
        return layout
    unpadded, _ = _scanner.unpad(head, d, q, e, False)
    given = {**options, "delimiter": layout.delimiter, "quote": layout.quote,
             "escape": layout.escape, "comment": layout.comment}
    found = sniff(unpadded, given, path=path, complete=complete)
    # unpadding keeps every line end: data_start is the same line's start in the file
    start = found.data_start
    if start and unpadded[start - 1:start] != b"\n":
        raise Unsupported(f"{path}: its rows start after blanks around quoted fields the "
                          "csv engine cannot place", engines=("duckdb",))
    lines, at = unpadded.count(b"\n", 0, start), 0
    for _ in range(lines):
        at = head.index(b"\n", at) + 1
    found.data_start, found.padded_quotes = at, True
    return found


def _rewritten(file: Any, fix: Callable[[bytes], bytes]) -> Any:
    """A mapped copy of ``file`` with each block of whole lines passed through ``fix``."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix="arrowgate-csv-", suffix=".csv")
    try:
        with os.fdopen(fd, "wb") as copy:
            offset, held = 0, b""
            while offset < file.size:
                read = file.pread(offset, _BLOCK)
                if not read:
                    raise QueryError("the file changed while it was read (it is shorter "
                                     "than when it was opened)", kind="resource",
                                     hint="run the query again once the file is no longer "
                                          "being written")
                block = held + read
                offset += len(read)
                cut = block.rfind(b"\n") + 1 if offset < file.size else len(block)
                copy.write(fix(block[:cut]))
                held = block[cut:]
            copy.write(fix(held) if held else held)
        copy_file = _scanner.File(name)
    finally:
        _remove(name)
    return copy_file


def _remove(name: str) -> None:
    try:
        os.unlink(name)  # the mapping keeps the contents alive until it closes
    except OSError:
        pass  # Windows: a mapped file cannot be removed; the temp folder's cleaner will
