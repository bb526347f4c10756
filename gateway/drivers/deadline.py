"""A per-query time limit: cancel the statement when it runs past its deadline."""

from __future__ import annotations

import threading
from collections.abc import Callable

from gateway.errors import GatewayError, QueryTimeout


class Deadline:
    """Calls ``cancel`` once ``seconds`` have passed, unless :meth:`stop` came first.

    Args:
        seconds: the limit, or None for none (then this does nothing).
        cancel: stops the running statement; called from a timer thread.
    """

    def __init__(self, seconds: float | None, cancel: Callable[[], None]):
        self.seconds = seconds
        self.expired = False
        self._cancel = cancel
        self._timer: threading.Timer | None = None
        if seconds is not None:
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        self.expired = True
        self._cancel()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def translate(self, error: GatewayError) -> GatewayError:
        """A cancellation the deadline caused, as :class:`QueryTimeout`; others unchanged."""
        if self.expired:
            return QueryTimeout(f"the query ran past its time limit ({self.seconds:g} s) and "
                                "was cancelled", engine=error.engine,
                                hint="raise timeout in the engine's section, or narrow the query")
        return error
