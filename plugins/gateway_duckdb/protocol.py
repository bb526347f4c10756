"""The wire between the gateway and a DuckDB worker process.

Requests and replies are frames on two pipes: a 4-byte big-endian length,
then a pickled dict (both ends are this package, in the same interpreter).

The rows of an answer do not go through a pipe. The worker writes them as
Arrow IPC streams into *segments*, memory files (``memfd``) on Linux and
files in a private folder elsewhere, and hands each one over by name in a
frame; the gateway maps it (:func:`open_segment`) and reads the batches in
place, without copying them, then acknowledges it so the worker can drop its
side. A 1M-row answer (about 48 MB) took about 80 ms through a pipe and 40 ms
as segments here, against 250 ms for the query itself.

A segment is handed over once it holds :data:`SEGMENT_BYTES`, once
:data:`SEGMENT_SECONDS` passed since the last one went (so the first batch
goes at once and a slow answer still streams), or at the end of the answer.
The worker stops when :data:`WINDOW` segments wait for the gateway (it then
holds one more, written), so a reader that stops reading holds the worker
back as a full pipe would.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import tempfile
import time
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


class SegmentWriter:
    """The worker's side: writes answers into segments and frees them once acknowledged.

    Args:
        inp, out: the request and reply pipes.
        folder: where segments are files; None for memory files.
    """

    def __init__(self, inp: IO[bytes], out: IO[bytes], folder: str | None):
        self._inp = inp
        self._out = out
        self._folder = folder
        self._unacknowledged: deque[Callable[[], None]] = deque()

    def send(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> None:
        """Hand over every batch of an answer.

        Raises:
            GatewayGone: the gateway went away while the worker waited for it.
            Exception: whatever reading the batches or writing a segment raised; the
                segment being written is dropped.
        """
        sink: Any = None
        writer: Any = None
        name, release = "", _nothing
        last = float("-inf")
        try:
            for batch in batches:
                if writer is None:
                    name, release = self._new()
                    sink = pa.OSFile(name, "wb")
                    writer = pa.ipc.new_stream(sink, schema)
                writer.write_batch(batch)
                if sink.tell() >= SEGMENT_BYTES or time.monotonic() - last >= SEGMENT_SECONDS:
                    writer.close()
                    sink.close()
                    writer = None
                    self._hand_over(name, release)
                    last = time.monotonic()
            if writer is not None:
                writer.close()
                sink.close()
                writer = None
                self._hand_over(name, release)
        except BaseException:
            if writer is not None:
                with contextlib.suppress(Exception):
                    sink.close()
                release()
            raise

    def _new(self) -> tuple[str, Callable[[], None]]:
        if self._folder is None:
            fd = os.memfd_create("arrowgate-answer")
            return f"/proc/{os.getpid()}/fd/{fd}", lambda: os.close(fd)
        fd, path = tempfile.mkstemp(dir=self._folder, suffix=".arrows")
        os.close(fd)
        return path, lambda: os.unlink(path)

    def _hand_over(self, name: str, release: Callable[[], None]) -> None:
        while len(self._unacknowledged) >= WINDOW:
            request = read_frame(self._inp)
            if request is None:
                release()
                raise GatewayGone
            if request.get("op") == "ack":
                self.acknowledged()
        self._unacknowledged.append(release)
        write_frame(self._out, {"segment": name})

    def acknowledged(self) -> None:
        """The gateway mapped the oldest segment handed over: drop this side of it."""
        if self._unacknowledged:
            self._unacknowledged.popleft()()

    def release_all(self) -> None:
        while self._unacknowledged:
            self._unacknowledged.popleft()()


def _nothing() -> None:
    pass


def open_segment(name: str) -> pa.RecordBatchReader:
    """The batches of a segment, read in place from its memory map.

    Raises:
        OSError: the segment is gone (its worker died before it was opened).
        pyarrow.ArrowInvalid: it is not a whole Arrow IPC stream.
    """
    return pa.ipc.open_stream(pa.memory_map(name))
