"""Clients that go away: their statements are cancelled, not run to their end for nobody.

A Flight handler runs a statement in the call's own thread (a query's
planning and a blocking aggregate happen inside GetFlightInfo; a DoGet reads
batches as the engine makes them). While it does, the call is registered with
one :class:`ClientWatch` thread, which asks every registered call whether its
client cancelled or went away (``context.is_cancelled()``: the ADBC driver's
cancel, a deadline, a dropped connection) and cancels the statements that
call started. One thread for every call, instead of a thread per statement:
that cost the ``SELECT 1`` round trip a thread start.

A call's context is only touched while the call is registered, and a call is
registered only while a thread runs the handler's code for it: the handler
unregisters it (under the same lock) before it returns, and a DoGet's stream
before each ``yield``. A context lives only as long as its call, and pyarrow can
let go of a stream's generator after the call has ended: one kept alive past it
(a reference cycle waiting for the collector) stayed registered, and this thread
asked a freed context whether it was cancelled: SIGSEGV in the service (issue 36;
four of eight probed client-model runs, traced with faulthandler).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

from gateway.result import QueryHandle, started_in_block

#: how often the watch asks each call whether its client is still there
WATCH_SECONDS = 0.1


class ClientWatch:
    """Cancels the statements of calls whose client left."""

    def __init__(self, interval: float = WATCH_SECONDS):
        self.interval = interval
        self._calls: dict[int, tuple[Any, list[QueryHandle]]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def statements_of(self, context: Any) -> Iterator[list[QueryHandle]]:
        """Watch ``context`` while the block runs; statements started in it are cancelled
        if the client goes away. Yields the list of their handles."""
        with started_in_block() as handles, self.handles(context, handles):
            yield handles

    @contextlib.contextmanager
    def handles(self, context: Any, handles: list[QueryHandle]) -> Iterator[None]:
        """Watch ``context`` while the block runs, for the statements in ``handles``."""
        key = self.add(context, handles)
        try:
            yield
        finally:
            self.remove(key)

    def add(self, context: Any, handles: list[QueryHandle]) -> int:
        """Watch ``context`` for the statements in ``handles`` until :meth:`remove` is
        given the key this returns; only while a thread runs the call's handler."""
        key = next(self._ids)
        with self._lock:
            self._calls[key] = (context, handles)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="flight-client-watch",
                                                daemon=True)
                self._thread.start()
        return key

    def remove(self, key: int | None) -> None:
        """Stop watching the call :meth:`add` gave ``key`` for (None: nothing)."""
        if key is not None:
            with self._lock:
                self._calls.pop(key, None)

    def _run(self) -> None:
        while not self._wake.wait(self.interval):
            with self._lock:
                gone = [handles for context, handles in self._calls.values()
                        if handles and _cancelled(context)]
                stopping = [h for handles in gone for h in handles if not h.cancelled]
            for handle in stopping:
                handle.cancel()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._wake.set()


def _cancelled(context: Any) -> bool:
    try:
        return bool(context.is_cancelled())
    except Exception:  # a context pyarrow no longer answers for: treat the client as gone
        return True
