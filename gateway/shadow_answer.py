"""One side of a shadow comparison: an answer gathered as it streams, within a memory budget.

The two answers of a shadowed query (three with ``noise``) share one
:class:`Budget` of ``max_compare_bytes``. While they fit together, their
batches are kept (references to the engines' buffers, not copies) and the
comparator later sees both tables whole. When they pass it, every side is
*streamed*: a thread per side hands its batches to a
:class:`~gateway.compare_stream.StreamingComparison`, which spills them to disk
(and compares them by value once both are in), and drops them, so the bytes held never exceed
the budget by more than one batch. The verdict is then the streaming
comparison's: the same categories and evidence, computed within the cap.

A side whose caller keeps every batch anyway (``shared``: the console's grid holds
the primary's answer) costs the comparison no memory: its bytes are not held by
the comparison, and adding one never waits for the spill nor starts it. They
count when another side's batch decides between the whole and the streamed
comparison (so a large shared side is streamed too, once the other side comes).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gateway.compare import CompareOptions, Verdict
from gateway.compare_stream import StreamingComparison
from gateway.spilled_answer import SpilledAnswer

if TYPE_CHECKING:
    import pyarrow as pa


class Budget:
    """The bytes every side of one comparison may keep, together."""

    def __init__(self, limit: int, sql: str | None = None,
                 options: CompareOptions | None = None):
        self.limit = limit
        self.held = 0
        self.peak = 0
        #: bytes of the shared sides (held by their callers, not by the comparison)
        self.shared = 0
        self.downgraded = False
        self.cv = threading.Condition()
        self.answers: list[Answer] = []
        self.sql, self.options = sql, options
        self.streaming: StreamingComparison | None = None

    def close(self) -> None:
        """Remove what the streaming comparison spilled (the verdict is in, or never will be)."""
        with self.cv:
            streaming, self.streaming = self.streaming, None
        if streaming is not None:
            streaming.close()

    def _hold(self, nbytes: int) -> None:
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def _release(self, nbytes: int) -> None:
        with self.cv:
            self.held -= nbytes
            self.cv.notify_all()


class Answer:
    """One engine's answer (or error), fed batch by batch by the thread reading it.

    Args:
        budget: shared with the other sides of the comparison.
        keep_bytes: keep this answer whole for :meth:`kept` while it is at
            most this many bytes (the reference's, for side-by-side display);
            0 keeps nothing beyond the comparison.
        shared: the caller keeps every batch of this answer whole anyway: they
            are not counted as held, and :meth:`add` never waits nor streams.
    """

    def __init__(self, budget: Budget, keep_bytes: int = 0, shared: bool = False):
        self.budget = budget
        self.shared = shared
        self.rows = 0
        self.nbytes = 0
        self.error: BaseException | None = None
        self.schema: pa.Schema | None = None
        self._batches: list[pa.RecordBatch] = []
        self._keep_bytes = keep_bytes
        self._kept: list[pa.RecordBatch] | None = [] if keep_bytes > 0 else None
        self._pending: list[pa.RecordBatch] = []
        self._finished = False
        self._spiller: _Spiller | None = None
        with budget.cv:
            budget.answers.append(self)
            if budget.downgraded:
                self._start_hashing()

    def add(self, batch: pa.RecordBatch) -> None:
        """Take one batch; blocks only while the hashing thread is a whole budget behind."""
        n = batch.nbytes
        self.rows += batch.num_rows
        self.nbytes += n
        if self._kept is not None:
            if self.nbytes <= self._keep_bytes:
                self._kept.append(batch)
            else:
                self._kept = None
        budget = self.budget
        with budget.cv:
            if self.shared:  # the other sides' adds decide when to stream
                budget.shared += n
                (self._pending if budget.downgraded else self._batches).append(batch)
                budget.cv.notify_all()
                return
            if not budget.downgraded and budget.held + budget.shared + n <= budget.limit:
                self._batches.append(batch)
                budget._hold(n)
                return
            if not budget.downgraded:
                budget.downgraded = True
                for answer in budget.answers:
                    answer._start_hashing()
            while budget.held > 0 and budget.held + n > budget.limit:
                budget.cv.wait()
            budget._hold(n)
            self._pending.append(batch)
            budget.cv.notify_all()

    def finish(self, schema: pa.Schema | None, error: BaseException | None = None) -> None:
        """The answer is complete (``error``: it failed, or was abandoned, with this error)."""
        with self.budget.cv:
            self.schema, self.error, self._finished = schema, error, True
            self.budget.cv.notify_all()

    def _start_hashing(self) -> None:
        """Hand the kept batches to a spilling thread (called under the budget's lock)."""
        if self._spiller is None:
            budget = self.budget
            if budget.streaming is None:
                budget.streaming = StreamingComparison(budget.sql, budget.options, budget.limit)
            self._pending.extend(self._batches)
            self._batches = []
            self._spiller = _Spiller(self, budget.streaming.side(keep=False))
            self._spiller.start()

    @property
    def downgraded(self) -> bool:
        """The answers passed the budget: this one is streamed to the spill."""
        return self._spiller is not None

    def table(self) -> pa.Table:
        """The whole answer (not downgraded, finished without error)."""
        import pyarrow as pa

        assert self.schema is not None and not self.downgraded
        return pa.Table.from_batches(self._batches, schema=self.schema)

    def spilled(self) -> SpilledAnswer:
        """The streamed answer, once every batch is spilled (downgraded, finished without error).

        Raises:
            GatewayError: spilling failed (the disk filled up).
        """
        assert self._spiller is not None
        self._spiller.join()
        if self._spiller.error is not None:
            raise self._spiller.error
        return self._spiller.side

    def kept(self) -> pa.Table | None:
        """The whole answer when it fit in ``keep_bytes`` and did not fail, else None."""
        import pyarrow as pa

        if self._kept is None or self.error is not None or self.schema is None:
            return None
        return pa.Table.from_batches(self._kept, schema=self.schema)

    def release(self) -> None:
        """Drop the batches kept for the comparison (the verdict is in)."""
        with self.budget.cv:
            if not self.shared:
                self.budget.held -= sum(b.nbytes for b in self._batches)
            self._batches = []
            self.budget.cv.notify_all()


class _Spiller(threading.Thread):
    """Hands an answer's pending batches to its side of the streaming comparison as they come,
    releasing their bytes."""

    def __init__(self, answer: Answer, side: SpilledAnswer):
        super().__init__(name="shadow-spill", daemon=True)
        self.answer, self.side = answer, side
        self.error: BaseException | None = None

    def run(self) -> None:
        answer, budget = self.answer, self.answer.budget
        try:
            while True:
                with budget.cv:
                    while not answer._pending and not answer._finished:
                        budget.cv.wait()
                    if not answer._pending:
                        break
                    batch = answer._pending.pop(0)
                if self.error is None:
                    try:
                        self.side.add(batch)
                    except BaseException as exc:  # kept for the verdict; keep draining
                        self.error = exc
                if not answer.shared:
                    budget._release(batch.nbytes)
            if self.error is None and answer.error is None and answer.schema is not None:
                self.side.finish(answer.schema)
        except BaseException as exc:
            self.error = exc


def streamed_verdict(primary: Answer, reference: Answer, *, budget: Budget) -> Verdict:
    """Compare two streamed answers (see :mod:`gateway.compare_stream`), within the budget."""
    assert budget.streaming is not None
    verdict = budget.streaming.compare(primary.spilled(), reference.spilled())
    verdict.message += (f" (streamed: the answers passed max_compare_bytes, {budget.limit} "
                        "bytes)")
    verdict.evidence.update(max_compare_bytes=budget.limit, held_peak_bytes=budget.peak)
    return verdict
