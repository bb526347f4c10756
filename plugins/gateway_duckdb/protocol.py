"""The wire between the gateway and a DuckDB worker process.

Requests and replies are frames on two pipes: a 4-byte big-endian length,
then a pickled dict (both ends are this package, in the same interpreter).

The rows of an answer do not go through a pipe. The worker writes them as
Arrow IPC streams into *segments*, memory files (``memfd``) on Linux and
files in a private folder elsewhere, and hands each one over by name in a
frame; the gateway maps it (:func:`open_segment`) and reads the batches in
place, without copying them, then acknowledges it (a file is then removed;
a memory file is kept for reuse, below). A 1M-row answer (about 48 MB) took about 80 ms through a pipe and 40 ms
as segments here, against 250 ms for the query itself.

A segment is handed over once it holds :data:`SEGMENT_BYTES`, once
:data:`SEGMENT_SECONDS` passed since the last one went (so the first batch
goes at once and a slow answer still streams), or at the end of the answer.
The worker stops when :data:`WINDOW` segments wait for the gateway (it then
holds one more, written), so a reader that stops reading holds the worker
back as a full pipe would.

Most of a segment's cost is the kernel allocating its pages, so memory files
are reused: the gateway tells the worker (in the ``released`` list of its
next frame) which segments it no longer maps, once the last batch read from
one is freed, and the worker overwrites those instead of making new ones.
A segment the gateway still maps is never written again. The price is memory
an idle worker keeps: at most :data:`POOL` released segments, and
:data:`HELD` the gateway had not yet said it released (16 MiB and a batch
each, at most).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import struct
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO, Any

import pyarrow as pa

_HEADER = struct.Struct(">I")

#: A segment is handed over once it holds this many bytes ...
SEGMENT_BYTES = 16 << 20
#: ... or once this many seconds passed since the previous one was.
SEGMENT_SECONDS = 0.1
#: Segments handed over and not acknowledged before the worker waits.
WINDOW = 4
#: Released memory files the worker keeps for reuse.
POOL = 4
#: Memory files the gateway maps that the worker keeps open to reuse once released (the
#: newest ones; an older one lives on only as long as the gateway's map of it).
HELD = 8


def write_frame(out: IO[bytes], message: dict[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def read_frame(inp: IO[bytes]) -> dict[str, Any] | None:
    """The next message, or None at end of input."""
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    data = inp.read(size)
    if len(data) < size:
        return None
    message: dict[str, Any] = pickle.loads(data)
    return message


def memory_files() -> bool:
    """Whether segments can be memory files another process opens (Linux), not files."""
    return hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd")


class GatewayGone(Exception):
    """The gateway closed the request pipe while the worker waited for it."""


class _Segment:
    """One segment on the worker's side: its name, and how to write and drop it."""

    def __init__(self, key: tuple[str, int], folder: str | None):
        self.key = key
        if folder is None:
            self.fd: int | None = os.memfd_create("arrowgate-answer")
            self.name = f"/proc/{os.getpid()}/fd/{self.fd}"
        else:
            fd, self.name = tempfile.mkstemp(dir=folder, suffix=".arrows")
            os.close(fd)
            self.fd = None

    def drop(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.name)


class SegmentWriter:
    """The worker's side: writes answers into segments, reuses those the gateway released.

    Args:
        inp, out: the request and reply pipes.
        folder: where segments are files; None for memory files.
    """

    def __init__(self, inp: IO[bytes], out: IO[bytes], folder: str | None):
        self._inp = inp
        self._out = out
        self._folder = folder
        self._count = 0
        self._token = os.urandom(8).hex()  # a key never names another worker's segment
        self._unacknowledged: deque[_Segment] = deque()
        self._mapped: dict[tuple[str, int], _Segment] = {}  # acknowledged, not yet released
        self._pool: list[_Segment] = []

    def send(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> None:
        """Hand over every batch of an answer.

        Raises:
            GatewayGone: the gateway went away while the worker waited for it.
            Exception: whatever reading the batches or writing a segment raised; the
                segment being written is dropped.
        """
        segment: _Segment | None = None
        sink: Any = None
        writer: Any = None
        last = float("-inf")
        try:
            for batch in batches:
                if writer is None:
                    segment = self._take()
                    sink = open(segment.name, "r+b", buffering=0)  # noqa: SIM115
                    writer = pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema)
                writer.write_batch(batch)
                if sink.tell() >= SEGMENT_BYTES or time.monotonic() - last >= SEGMENT_SECONDS:
                    self._close(writer, sink)
                    writer = None
                    assert segment is not None
                    self._hand_over(segment)
                    last = time.monotonic()
            if writer is not None:
                self._close(writer, sink)
                writer = None
                assert segment is not None
                self._hand_over(segment)
        except BaseException:
            if writer is not None and segment is not None:
                with contextlib.suppress(Exception):
                    sink.close()
                segment.drop()
            raise

    def _take(self) -> _Segment:
        if self._pool:
            return self._pool.pop()
        self._count += 1
        return _Segment((self._token, self._count), self._folder)

    @staticmethod
    def _close(writer: Any, sink: Any) -> None:
        writer.close()
        os.ftruncate(sink.fileno(), sink.tell())  # a reused file may be longer
        sink.close()

    def _hand_over(self, segment: _Segment) -> None:
        while len(self._unacknowledged) >= WINDOW:
            request = read_frame(self._inp)
            if request is None:
                segment.drop()
                raise GatewayGone
            self.heard(request)
        self._unacknowledged.append(segment)
        write_frame(self._out, {"segment": segment.name, "key": segment.key})

    def heard(self, request: dict[str, Any]) -> None:
        """Take note of an acknowledgement and of the segments the gateway released."""
        if request.get("op") == "ack" and self._unacknowledged:
            segment = self._unacknowledged.popleft()
            if segment.fd is None:
                segment.drop()  # a file is not reused: the gateway's mapping keeps it
            else:
                self._mapped[segment.key] = segment
                if len(self._mapped) > HELD:
                    self._mapped.pop(next(iter(self._mapped))).drop()
        for key in request.get("released", ()):
            if key not in self._mapped:  # dropped already, or another worker's
                continue
            segment = self._mapped.pop(key)
            if len(self._pool) < POOL:
                self._pool.append(segment)
            else:
                segment.drop()

    def release_all(self) -> None:
        for segment in [*self._unacknowledged, *self._mapped.values(), *self._pool]:
            segment.drop()
        self._unacknowledged.clear()
        self._mapped.clear()
        self._pool.clear()


def open_segment(name: str, released: Callable[[], None]) -> pa.RecordBatchReader:
    """The batches of a segment, read in place from its memory map.

    ``released`` is called once the map is gone: no batch read from it is left.

    Raises:
        OSError: the segment is gone (its worker died before it was opened).
        pyarrow.ArrowInvalid: it is not a whole Arrow IPC stream.
    """
    fd = os.open(name, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise pa.ArrowInvalid(f"the segment {name} is empty")
        region = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    weakref.finalize(region, released).atexit = False
    return pa.ipc.open_stream(pa.BufferReader(pa.py_buffer(region)))
