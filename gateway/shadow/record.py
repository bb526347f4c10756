"""The shadow record: one shadowed query's verdict and timings, delivered when final."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class ShadowRecord:
    """One shadowed (or deliberately skipped) query.

    ``status``: ``pending`` while the verdict is being computed (the
    primary's answer is still streaming, or the reference still running),
    then ``compared``, or ``skipped`` (then ``skip_reason`` says why and
    ``category`` is None). :meth:`done`, :meth:`wait` and
    :meth:`add_done_callback` deliver the final record; so does the hook
    ``arrowgate_shadow_finished``. ``ratio`` is primary time over reference
    time. ``downgraded``: the answers passed ``max_compare_bytes`` and were
    compared by the streaming comparison (``evidence["compared"]`` is
    ``"streamed"``). Peak memory is filled when an engine reports it
    (``peak_memory_bytes`` in its result notes); in-process engines sharing
    one process cannot be told apart, so it is often None here (``arrowgate
    bench`` measures it).
    """

    sql: str
    primary: str
    reference: str
    status: str = "pending"
    name: str | None = None
    category: str | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    skip_reason: str | None = None
    primary_ms: float | None = None
    reference_ms: float | None = None
    primary_rows: int | None = None
    reference_rows: int | None = None
    primary_peak_mb: float | None = None
    reference_peak_mb: float | None = None
    noise_checked: bool = False
    #: the engine that actually answered for the primary, when it fell back to another
    answered_by: str | None = None
    downgraded: bool = False
    #: the primary result's ``query_id``, when it carries one
    query_id: int | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    time: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def __post_init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[ShadowRecord], Any]] = []
        self._reference_answer: pa.Table | None = None
        #: reads the primary's answer whole when nobody has started reading it
        self._drain: Callable[[], None] | None = None

    def done(self) -> bool:
        """True once the verdict is in (or the query was skipped)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the record is final.

        The verdict needs the primary's whole answer: when nobody has
        started reading the result, it is read here (and kept, so
        ``result.to_arrow()`` still returns it).

        Returns:
            True when the record is final, False when ``timeout`` passed first.
        """
        drain, self._drain = self._drain, None
        if drain is not None and not self._done.is_set():
            drain()
        return self._done.wait(timeout)

    def add_done_callback(self, fn: Callable[[ShadowRecord], Any]) -> None:
        """Call ``fn(record)`` once, when the record is final (at once if it already is).

        ``fn`` runs in the thread that completes the record; an exception it
        raises is reported as a RuntimeWarning.
        """
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        _call_back(fn, self)

    def reference_answer(self) -> pa.Table | None:
        """The reference's whole answer, when it was at most ``keep_reference_bytes``.

        None while the record is pending, when the reference failed or timed
        out, when its answer was larger, and for skipped queries.
        """
        return self._reference_answer

    def _complete(self, notify: Callable[[ShadowRecord], None]) -> None:
        """Mark the record final, then run the callbacks and ``notify`` (the hook), once."""
        with self._lock:
            if self._done.is_set():
                return
            self._drain = None
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _call_back(fn, self)
        notify(self)

    @property
    def ratio(self) -> float | None:
        if not self.primary_ms or not self.reference_ms:
            return None
        return self.primary_ms / self.reference_ms

    @property
    def diverged(self) -> bool:
        """The answers disagree (nondeterministic queries, skipped ones and ones that failed
        on both sides alike do not count)."""
        return self.category not in (None, "match", "nondeterministic", "both_error",
                                     "order_unchecked")

    @property
    def key(self) -> str:
        """The name the store groups repeated runs of one query under."""
        return self.name or " ".join(self.sql.split())[:80]

    def summary(self) -> str:
        """One line: verdict and latency ratio."""
        if self.status == "skipped":
            return f"shadow {self.reference}: skipped ({self.skip_reason})"
        if self.status == "pending":
            return f"shadow {self.reference}: pending (the verdict follows in the background)"
        ratio = f"; {self.primary} took {self.ratio:.2f}x {self.reference}'s time" \
            if self.ratio is not None else ""
        timing = (f" ({self.primary} {self.primary_ms:.1f} ms, {self.reference} "
                  f"{self.reference_ms:.1f} ms)") if self.ratio is not None else ""
        fallback = f" [{self.primary} fell back to {self.answered_by}]" if self.answered_by else ""
        return f"shadow {self.reference}: {self.category}: {self.message}{ratio}{timing}{fallback}"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        return out


def _call_back(fn: Callable[[ShadowRecord], Any], record: ShadowRecord) -> None:
    try:
        fn(record)
    except Exception as exc:
        warnings.warn(f"a shadow done-callback failed: {exc!r}", RuntimeWarning, stacklevel=2)
