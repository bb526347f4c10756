"""One side of a shadow comparison: an answer gathered as it streams, within a memory budget.

The two answers of a shadowed query (three with ``noise``) share one
:class:`Budget` of ``max_compare_bytes``. While they fit together, their
batches are kept (references to the engines' buffers, not copies) and the
comparator later sees both tables whole. When they pass it, every side is
*streamed*: a thread per side hands its batches to a
:class:`~gateway.verify.compare_stream.StreamingComparison`, which spills them to disk
(and compares them by value once both are in), and drops them, so the bytes held never exceed
the budget by more than one batch. The verdict is then the streaming
comparison's: the same categories and evidence, computed within the cap.

A side whose caller keeps every batch anyway (``shared``: the console's grid holds
the primary's answer) costs the comparison no memory: its bytes are not held by
the comparison, and adding one never waits for the spill nor starts it. They
count when another side's batch decides between the whole and the streamed
comparison (so a large shared side is streamed too, once the other side comes).
A shared side already finished when the answers are streamed is not spilled: the
comparison reads its batches where the caller holds them, and the one other side
is proven against them as it arrives (``after``, :mod:`gateway.verify.spilled_answer`),
so its batches are dropped once compared and only the rows that differ (all of
them where the order must be checked) go to disk; nothing is read back from disk
when every row is proven. Such a side is never more than one batch ahead of its
comparison.

An answer kept whole for display (``keep_bytes``) is kept in memory while the
answers are compared whole; once they are streamed, its copy goes to a file of the
comparison's folder with the spill, and is read back by :meth:`Answer.kept` once
the engine is done: so it is never held beside the engine's working memory (a
sort's rows) and the comparison's batches while the answer streams.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from gateway.verify.compare_stream import StreamingComparison
from gateway.verify.spilled_answer import SpilledAnswer
from gateway.verify.verdict import CompareOptions, Verdict

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
        #: the display copy's batches (None: dropped, or never wanted); once the answer is
        #: streamed they go to :attr:`_kept_path` instead, written by the spilling thread
        self._kept: list[pa.RecordBatch] | None = [] if keep_bytes > 0 else None
        self._kept_path: str | None = None
        self._kept_writer: Any = None
        self._pending: list[pa.RecordBatch] = []
        self._finished = False
        #: the answer's side of the streaming comparison, once the answers are streamed
        self._side: SpilledAnswer | None = None
        self._streamed = False
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
        budget = self.budget
        with budget.cv:
            if self._kept is not None:
                if self.nbytes > self._keep_bytes:
                    self._kept = None
                elif not self._streamed:  # streamed: the spilling thread writes the copy
                    self._kept.append(batch)
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
                # a side read in place first: the others may be proven against it
                for answer in sorted(budget.answers, key=lambda a: not a._in_place()):
                    answer._start_hashing()
            while (budget.held > 0 and budget.held + n > budget.limit) or \
                    (self._pending and self._in_step()):
                budget.cv.wait()
            budget._hold(n)
            self._pending.append(batch)
            budget.cv.notify_all()

    def finish(self, schema: pa.Schema | None, error: BaseException | None = None) -> None:
        """The answer is complete (``error``: it failed, or was abandoned, with this error)."""
        with self.budget.cv:
            self.schema, self.error, self._finished = schema, error, True
            self.budget.cv.notify_all()

    def _in_place(self) -> bool:
        """Whether the streaming comparison can read this answer where its caller holds it:
        shared, finished without error, and with no dictionary column to decode (a copy)."""
        import pyarrow as pa

        return self.shared and self._finished and self.error is None and \
            self.schema is not None and not any(pa.types.is_dictionary(t)
                                                for t in self.schema.types)

    def _in_step(self) -> bool:
        """Whether this answer is proven as it arrives against a side read in place."""
        return self._side is not None and self._side.proof is not None

    def _start_hashing(self) -> None:
        """Hand this answer to its side of the streaming comparison: at once when it is read
        in place, else through a spilling thread (called under the budget's lock)."""
        if self._streamed:
            return
        self._streamed = True
        budget = self.budget
        streaming = budget.streaming
        if streaming is None:
            streaming = budget.streaming = StreamingComparison(budget.sql, budget.options,
                                                               budget.limit)
        if self._in_place():
            assert self.schema is not None
            self._side = streaming.side(shared=True)
            for batch in self._batches:
                self._side.add(batch)
            self._side.finish(self.schema)
            self._batches = []
            return
        # the one other side, held in place and finished: proven against it as it comes
        others = [a for a in budget.answers if a is not self]
        after = others[0]._side if len(others) == 1 and others[0]._in_place() else None
        self._pending.extend(self._batches)
        self._batches = []
        if self._kept is not None:  # the batches kept so far are those pending: all of them
            self._kept = []
            self._kept_path = os.path.join(streaming.folder, f"kept{id(self)}.arrow")
        self._side = streaming.side(keep=False, after=after)
        self._spiller = _Spiller(self, self._side)
        self._spiller.start()

    @property
    def downgraded(self) -> bool:
        """The answers passed the budget: this one is streamed."""
        return self._streamed

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
        assert self._side is not None
        if self._spiller is not None:
            self._spiller.join()
            if self._spiller.error is not None:
                raise self._spiller.error
        return self._side

    def _keep_on_disk(self, batch: pa.RecordBatch) -> None:
        """Write ``batch`` to the display copy's file (the spilling thread); a copy that can
        no longer be kept is dropped, and so is its file."""
        import pyarrow as pa

        if self._kept is not None and self._kept_path is not None:
            try:
                if self._kept_writer is None:
                    self._kept_writer = pa.ipc.new_stream(pa.OSFile(self._kept_path, "wb"),
                                                          batch.schema)
                self._kept_writer.write_batch(batch)
                return
            except OSError:  # no room for the copy: ctrl+r runs the statement again
                self._kept = None
        self._close_kept(remove=True)

    def _close_kept(self, remove: bool = False) -> None:
        writer, self._kept_writer = self._kept_writer, None
        if writer is not None:
            writer.close()
        if remove and self._kept_path is not None:
            path, self._kept_path = self._kept_path, None
            try:
                os.remove(path)
            except OSError:
                pass

    def kept(self) -> pa.Table | None:
        """The whole answer when it fit in ``keep_bytes`` and did not fail, else None (read
        back from its file when the answer was streamed)."""
        import pyarrow as pa

        if self._spiller is not None:
            self._spiller.join()
        if self._kept is None or self.error is not None or self.schema is None:
            return None
        if self._kept_path is None:
            return pa.Table.from_batches(self._kept, schema=self.schema)
        if not os.path.exists(self._kept_path):  # not one batch came once streamed
            return pa.Table.from_batches(self._kept, schema=self.schema)
        try:
            with pa.OSFile(self._kept_path) as f, pa.ipc.open_stream(f) as reader:
                return pa.Table.from_batches(list(reader), schema=self.schema)
        except OSError:
            return None

    def release(self) -> None:
        """Drop the batches kept for the comparison (the verdict is in)."""
        with self.budget.cv:
            if not self.shared:
                self.budget.held -= sum(b.nbytes for b in self._batches)
            self._batches = []
            if self._spiller is None:  # read in place: the caller's batches, not the spill's
                self._side = None
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
                if answer._kept_path is not None:
                    answer._keep_on_disk(batch)
                if self.error is None:
                    try:
                        self.side.add(batch)
                    except BaseException as exc:  # kept for the verdict; keep draining
                        self.error = exc
                if not answer.shared:
                    budget._release(batch.nbytes)
            answer._close_kept(remove=answer._kept is None)
            if self.error is None and answer.error is None and answer.schema is not None:
                self.side.finish(answer.schema)
        except BaseException as exc:
            self.error = exc


def streamed_verdict(primary: Answer, reference: Answer, *, budget: Budget) -> Verdict:
    """Compare two streamed answers (see :mod:`gateway.verify.compare_stream`), within the budget."""
    assert budget.streaming is not None
    verdict = budget.streaming.compare(primary.spilled(), reference.spilled())
    verdict.message += (f" (streamed: the answers passed max_compare_bytes, {budget.limit} "
                        "bytes)")
    verdict.evidence.update(max_compare_bytes=budget.limit, held_peak_bytes=budget.peak)
    return verdict
