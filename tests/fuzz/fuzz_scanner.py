#!/usr/bin/env python3
"""Fuzz the compiled CSV scanner (gateway_csv._scanner) with atheris.

    .venv/bin/pip install atheris
    .venv/bin/python tests/fuzz/fuzz_scanner.py -atheris_runs=200000
    .venv/bin/python tests/fuzz/fuzz_scanner.py -max_total_time=600 corpus_dir/

Each input is split into a few control bytes (dialect, field count, a plan,
a byte range) and the file's bytes. The scanner must never crash, hang or
leak on any of them: it either scans or returns an error tuple. Scans start
at arbitrary offsets on purpose, because speculative chunks do. The input
goes through a real file, since the scanner only reads memory maps.

For coverage of the C code itself, build the extension instrumented first:
``CC=clang CFLAGS="-fsanitize=fuzzer-no-link,address" pip install -e .``
and run with ``LD_PRELOAD=$(python -c "import atheris; print(atheris.path())")/asan_with_fuzzer.so``.
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    from gateway_csv import _scanner

KINDS = 7
PATH = os.path.join(tempfile.mkdtemp(prefix="fuzz_scanner_"), "input.csv")


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    delim = fdp.PickValueInList([ord(","), ord(";"), ord("\t"), ord("|")])
    quote = fdp.PickValueInList([ord('"'), ord("'"), -1])
    escape = fdp.PickValueInList([quote, ord("\\"), -1])
    ncols = fdp.ConsumeIntInRange(1, 8)
    skip = fdp.ConsumeBool()
    nslots = fdp.ConsumeIntInRange(0, ncols)
    cols = sorted(set(fdp.ConsumeIntInRange(0, ncols - 1) for _ in range(nslots)))
    slots = tuple((c, fdp.ConsumeIntInRange(0, KINDS - 1)) for c in cols)
    agg = fdp.ConsumeBool() and bool(slots)
    filters = ()
    if slots and fdp.ConsumeBool():
        s = fdp.ConsumeIntInRange(0, len(slots) - 1)
        op = fdp.ConsumeIntInRange(0, 7)
        ctype = fdp.PickValueInList(["i", "f", "s", "n"])
        value = {"i": 3, "f": 1.5, "s": b"ab", "n": None}[ctype]
        filters = ((s, op, ctype, value),)
    keys = ((0, fdp.ConsumeIntInRange(0, 5)),) if agg else None
    aggs = ((fdp.ConsumeIntInRange(0, 5), 0), (0, -1)) if agg else None
    start = fdp.ConsumeIntInRange(0, 64)
    span = fdp.ConsumeIntInRange(0, 1 << 16)
    limit = fdp.ConsumeIntInRange(-1, 50)
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    with open(PATH, "wb") as fh:
        fh.write(body)
    f = _scanner.File(PATH)
    try:
        dialect = (delim, quote, escape, ncols, skip, (b"", b"NA"))
        end, seen, out, skipped, _error, payload = _scanner.scan(
            f, start, start + span, dialect, slots, filters, keys, aggs, limit)
        assert 0 <= end <= max(len(body), start), (end, len(body))
        assert out <= seen and skipped <= seen
        if agg:
            payload.export()
        for kind in range(1, KINDS):
            try:
                _scanner.parse_value(kind, body[:40])
            except ValueError:
                pass
    finally:
        f.close()


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
