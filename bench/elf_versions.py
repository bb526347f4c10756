"""Let a shared library that asks for a newer glibc symbol version load on an older glibc.

csvql 2.9.0's wheel (manylinux_2_17 by its tag) ships a ``libcsvql.so`` that asks
for one symbol from glibc 2.38, ``fmod@GLIBC_2.38``, and so does not load on
Debian 12's glibc 2.36 ("version `GLIBC_2.38' not found"). glibc 2.38 gave
``fmod`` a new version only to drop the SVID error-handling wrapper; 2.36's
``fmod`` computes the same values. :func:`loosen` does, in pure Python, what
``patchelf --clear-symbol-version fmod`` and one flag do:

- the symbol's entry in ``.gnu.version`` becomes 1 (global: any version binds);
- the requirement (``GLIBC_2.38`` in ``.gnu.version_r``) is marked weak
  (``VER_FLG_WEAK``), which the loader tolerates when missing.

Nothing else in the file changes. Used by ``bench/csvql_bench.py --csvql-shim``.
"""

from __future__ import annotations

import struct
from pathlib import Path

SHT_DYNSYM = 11
SHT_GNU_VERSYM = 0x6FFFFFFF
SHT_GNU_VERNEED = 0x6FFFFFFE
VER_FLG_WEAK = 0x2
VER_NDX_GLOBAL = 1


def _sections(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(type, offset, size, link, info) of each section of an ELF64 little-endian file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    found = []
    for i in range(shnum):
        _, kind, _, _, off, size, link, info, _, _ = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        found.append((kind, off, size, link, info))
    return found


def _name(data: bytes, strtab: int, at: int) -> str:
    return data[strtab + at:data.index(b"\0", strtab + at)].decode()


def loosen(path: Path, symbols: set[str], version: str) -> tuple[int, int]:
    """Rewrite ``path`` in place so that ``symbols`` bind unversioned and ``version``
    is a weak requirement. Returns (symbols changed, requirements marked weak)."""
    data = bytearray(path.read_bytes())
    sections = _sections(bytes(data))
    changed = weak = 0
    dynsym = next(s for s in sections if s[0] == SHT_DYNSYM)
    versym = next((s for s in sections if s[0] == SHT_GNU_VERSYM), None)
    strtab = sections[dynsym[3]][1]
    if versym is not None:
        for i in range(dynsym[2] // 24):
            name = _name(data, strtab, struct.unpack_from("<I", data, dynsym[1] + i * 24)[0])
            if name in symbols:
                struct.pack_into("<H", data, versym[1] + 2 * i, VER_NDX_GLOBAL)
                changed += 1
    for kind, off, _, link, count in sections:
        if kind != SHT_GNU_VERNEED:
            continue
        names, pos = sections[link][1], off
        for _ in range(count):
            _, aux_count, _, aux, after = struct.unpack_from("<HHIII", data, pos)
            at = pos + aux
            for _ in range(aux_count):
                _, flags, _, name_at, next_aux = struct.unpack_from("<IHHII", data, at)
                if _name(data, names, name_at) == version:
                    struct.pack_into("<H", data, at + 4, flags | VER_FLG_WEAK)
                    weak += 1
                at += next_aux
            pos += after
    path.write_bytes(bytes(data))
    return changed, weak
